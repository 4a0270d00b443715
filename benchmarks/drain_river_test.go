package benchmarks

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
)

// riverArgs is the River job of the drain.
type riverArgs struct {
	N int64 `json:"n"`
}

func (riverArgs) Kind() string { return "bench_item" }

type riverWorker struct {
	river.WorkerDefaults[riverArgs]
	d    *drainDB
	kind handlerKind
	t    *tally
}

func (w *riverWorker) Work(ctx context.Context, job *river.Job[riverArgs]) error {
	return w.t.handle(ctx, w.d, w.kind, job.Args.N)
}

// riverPool opens River's own pgx pool on d's schema: as many connections as the drain's
// pools elsewhere (workers + 4), since pgxpool's default (4 on two cores) would starve it.
func riverPool(tb testing.TB, d *drainDB, workers int) *pgxpool.Pool {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(d.dsn)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.MaxConns = int32(workers + 4)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// riverClient migrates River's schema on drv and returns a client with workers workers running
// the drain's handler (nil worker: an insert-only client).
func riverClient[TTx any](tb testing.TB, drv riverdriver.Driver[TTx], workers int, w *riverWorker) *river.Client[TTx] {
	tb.Helper()
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	mig, err := rivermigrate.New(drv, &rivermigrate.Config{Logger: logger})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := mig.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		tb.Fatal(err)
	}
	cfg := &river.Config{
		Logger: logger,
		// River's defaults throttle a drain: FetchCooldown (100 ms) caps it at MaxWorkers
		// items per cooldown. Its minimum lets River fetch as soon as workers are free, and
		// the poll interval matches the one switchboard's scheduler gets.
		FetchCooldown:     river.FetchCooldownMin,
		FetchPollInterval: 10 * time.Millisecond,
	}
	if w != nil {
		ws := river.NewWorkers()
		river.AddWorker(ws, w)
		cfg.Workers = ws
		cfg.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}}
	}
	c, err := river.NewClient(drv, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func seedRiver[TTx any](tb testing.TB, c *river.Client[TTx], n int) {
	tb.Helper()
	params := make([]river.InsertManyParams, n)
	for i := range params {
		params[i] = river.InsertManyParams{Args: riverArgs{N: int64(i)}}
	}
	// InsertManyFast: COPY on PostgreSQL; one statement per job on SQLite.
	if _, err := c.InsertManyFast(context.Background(), params); err != nil {
		tb.Fatal(err)
	}
}

func drainRiver[TTx any](tb testing.TB, c *river.Client[TTx], t *tally) func() {
	return func() {
		ctx := context.Background()
		if err := c.Start(ctx); err != nil {
			tb.Fatal(err)
		}
		t.wait(tb)
		if err := c.Stop(ctx); err != nil {
			tb.Fatal(err)
		}
	}
}

var riverSystem = drainSystem{
	name: "river",
	seed: func(tb testing.TB, d *drainDB, n int) {
		if d.engine == "postgres" {
			seedRiver(tb, riverClient(tb, riverpgxv5.New(riverPool(tb, d, 0)), 0, nil), n)
			return
		}
		seedRiver(tb, riverClient(tb, riversqlite.New(d.sql), 0, nil), n)
	},
	prepare: func(tb testing.TB, d *drainDB, kind handlerKind, workers int, t *tally) func() {
		w := &riverWorker{d: d, kind: kind, t: t}
		if d.engine == "postgres" {
			return drainRiver(tb, riverClient(tb, riverpgxv5.New(riverPool(tb, d, workers)), workers, w), t)
		}
		return drainRiver(tb, riverClient(tb, riversqlite.New(d.sql), workers, w), t)
	},
	succeeded: counter("SELECT COUNT(*) FROM river_job WHERE state = 'completed'"),
}
