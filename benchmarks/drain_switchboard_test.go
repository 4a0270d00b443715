package benchmarks

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/postgres"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/mediator"
)

// drainItem is the durable request of the switchboard drain (and, by its payload, of the
// floor, which claims the same rows).
type drainItem struct {
	mediator.Command
	N int64 `json:"n"`
}

// drainItemName is drainItem's registered name, the name column of its rows.
const drainItemName = "bench.item"

// openSwitchboard opens the durable queue, migrating the schema: on SQLite on d's pool (one
// connection per file), on PostgreSQL on a pool of its own with the default connection budget,
// as a service would (the handlers' statements use d's pool), through PgBouncer with
// TransactionPooling.
func openSwitchboard(tb testing.TB, d *drainDB, workers ...int) *durable.Queue {
	tb.Helper()
	drv := sqlite.New(d.sql)
	if d.engine == "postgres" {
		drv = postgres.Open(d.dsn, postgres.Config{TransactionPooling: d.bouncer})
	}
	// Defaults but the workers, and the poll interval River gets too: the drain starts with
	// every item due, so the poll only matters once the queue is empty.
	cfg := durable.Config{Logger: zap.NewNop(), PollInterval: 10 * time.Millisecond}
	for _, w := range workers {
		cfg.Workers = w
	}
	q, err := durable.Open(context.Background(), drv, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = q.Close() })
	durable.Register[*drainItem](q, drainItemName)
	return q
}

// seedSwitchboard enqueues n items through the public API, in one transaction.
func seedSwitchboard(tb testing.TB, d *drainDB, n int) {
	tb.Helper()
	q := openSwitchboard(tb, d)
	ctx := context.Background()
	tx, err := d.sql.BeginTx(ctx, nil)
	if err != nil {
		tb.Fatal(err)
	}
	for i := range int64(n) {
		if _, err := q.EnqueueTx(ctx, tx, &drainItem{N: i}); err != nil {
			_ = tx.Rollback()
			tb.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
	if err := q.Close(); err != nil {
		tb.Fatal(err)
	}
}

// switchboardBouncerSystem is switchboardSystem with the queue's pool through PgBouncer in
// transaction pooling mode (postgres.Config.TransactionPooling: no prepared statements, no
// LISTEN); the seed's and the handlers' pools reach the same database directly.
var switchboardBouncerSystem = drainSystem{
	name: "switchboard-pgbouncer",
	via:  pgbouncer,
	seed: seedSwitchboard,
	prepare: func(tb testing.TB, d *drainDB, kind handlerKind, workers int, t *tally) func() {
		return switchboardSystem.prepare(tb, d, kind, workers, t)
	},
	succeeded: func(tb testing.TB, d *drainDB) int { return switchboardSystem.succeeded(tb, d) },
}

var switchboardSystem = drainSystem{
	name: "switchboard",
	seed: seedSwitchboard,
	prepare: func(tb testing.TB, d *drainDB, kind handlerKind, workers int, t *tally) func() {
		q := openSwitchboard(tb, d, workers)
		m := mediator.New(nil, mediator.Config{})
		mediator.HandleFunc(m, func(ctx context.Context, it *drainItem) (mediator.Void, error) {
			return mediator.Void{}, t.handle(ctx, d, kind, it.N)
		})
		if err := m.Build(); err != nil {
			tb.Fatal(err)
		}
		return func() {
			if err := q.Start(m); err != nil {
				tb.Fatal(err)
			}
			t.wait(tb)
			if err := q.Shutdown(context.Background()); err != nil {
				tb.Fatal(err)
			}
		}
	},
	succeeded: func(tb testing.TB, d *drainDB) int {
		tb.Helper()
		q := openSwitchboard(tb, d)
		st, err := q.Stats(context.Background())
		if err != nil {
			tb.Fatal(err)
		}
		return int(st.Counts[record.StateSucceeded])
	},
}
