package benchmarks

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard-go/switchboard/durable/durabletest"
)

// The drain benchmarks: N due items, W workers, run until every item's outcome is stored, by
// three systems over the same database, side by side in one process (see doc.go).

// drainDB is one database of a drain case: the pools of a fresh schema (PostgreSQL) or of a
// fresh file (SQLite), with the side table the insert handler writes to.
type drainDB struct {
	engine string // "postgres" or "sqlite"
	// dsn is the DSN of the queue's database on PostgreSQL: the case's own schema, or through
	// PgBouncer (bouncer) the case's own database.
	dsn     string
	bouncer bool
	// sql is the database/sql pool: pgx's stdlib driver on PostgreSQL, modernc's on SQLite
	// (one connection, as durable/sqlite opens it; everything on SQLite goes through it).
	sql *sql.DB
	// pgx is a native pool on PostgreSQL (nil on SQLite), sized for the workers: the insert
	// handler of every system writes through it, so the handlers cost the same everywhere.
	pgx *pgxpool.Pool
}

// insertSide is the "one INSERT per item" handler's statement, the same in every system.
func (d *drainDB) insertSide(ctx context.Context, n int64) error {
	if d.pgx != nil {
		_, err := d.pgx.Exec(ctx, "INSERT INTO bench_side (item) VALUES ($1)", n)
		return err
	}
	_, err := d.sql.ExecContext(ctx, "INSERT INTO bench_side (item) VALUES (?)", n)
	return err
}

// count returns the result of q, a SELECT COUNT(*).
func (d *drainDB) count(ctx context.Context, q string) (int, error) {
	var n int
	err := d.sql.QueryRowContext(ctx, q).Scan(&n)
	return n, err
}

// counter is a drainSystem's succeeded: the result of q, a SELECT COUNT(*).
func counter(q string) func(tb testing.TB, d *drainDB) int {
	return func(tb testing.TB, d *drainDB) int {
		tb.Helper()
		n, err := d.count(context.Background(), q)
		if err != nil {
			tb.Fatal(err)
		}
		return n
	}
}

// pgDSN returns the PostgreSQL DSN, or "" to skip the PostgreSQL rows; under CI=true a missing
// DSN fails instead, as the library's PostgreSQL suites do, so CI never skips them silently.
func pgDSN(tb testing.TB) string {
	tb.Helper()
	dsn := os.Getenv(durabletest.PostgresDSNEnv)
	if dsn == "" && os.Getenv("CI") == "true" {
		tb.Fatalf("%s is not set under CI=true: the PostgreSQL rows must run (use scripts/with-postgres.sh)", durabletest.PostgresDSNEnv)
	}
	return dsn
}

// openDrainDB opens a fresh database of engine for one drain of workers workers: a schema of
// its own on the server of dsn, or a new SQLite file in a temporary directory. With bouncer, a
// PgBouncer DSN in front of dsn's server, the queue's DSN reaches a database of its own through
// it (PgBouncer 1.18 refuses a search_path) while the pools of the seed and of the handlers
// reach that database directly, as in the direct case. Everything is closed (and the schema or
// database dropped) when tb ends.
func openDrainDB(tb testing.TB, engine, dsn, bouncer string, workers int) *drainDB {
	tb.Helper()
	d := &drainDB{engine: engine}
	var err error
	switch engine {
	case "postgres":
		var pools string // the DSN of the seed's and the handlers' pools
		if bouncer == "" {
			d.dsn = durabletest.PostgresSchema(tb, dsn)
			pools = d.dsn
		} else {
			own := newOwnDatabase(tb, dsn, bouncer, "bench_drain_")
			d.dsn, d.bouncer, pools = own.bouncer, true, own.direct
		}
		if d.sql, err = sql.Open("pgx", pools); err != nil {
			tb.Fatal(err)
		}
		cfg, err := pgxpool.ParseConfig(pools)
		if err != nil {
			tb.Fatal(err)
		}
		cfg.MaxConns = int32(workers + 4)
		if d.pgx, err = pgxpool.NewWithConfig(context.Background(), cfg); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(d.pgx.Close)
		if _, err := d.sql.Exec("CREATE TABLE bench_side (item bigint NOT NULL)"); err != nil {
			tb.Fatal(err)
		}
	case "sqlite":
		path := filepath.Join(tb.TempDir(), "drain.db")
		// The parameters durable/sqlite's Open uses (see sqlite.New).
		v := url.Values{}
		v.Set("_txlock", "immediate")
		v.Add("_pragma", "busy_timeout(10000)")
		v.Add("_pragma", "journal_mode(WAL)")
		v.Add("_pragma", "synchronous(NORMAL)")
		v.Add("_pragma", "foreign_keys(1)")
		if d.sql, err = sql.Open("sqlite", "file:"+path+"?"+v.Encode()); err != nil {
			tb.Fatal(err)
		}
		d.sql.SetMaxOpenConns(1)
		if _, err := d.sql.Exec("CREATE TABLE bench_side (item INTEGER NOT NULL)"); err != nil {
			tb.Fatal(err)
		}
	default:
		tb.Fatalf("unknown engine %q", engine)
	}
	tb.Cleanup(func() { _ = d.sql.Close() })
	return d
}

// handlerKind is what each item's handler does.
type handlerKind string

const (
	noop   handlerKind = "noop"   // nothing: the drain measures the queue alone
	insert handlerKind = "insert" // one INSERT into bench_side on the same database
)

// tally counts the items handled and signals when every one of them was, and keeps which item
// numbers ran so a test can tell lost from twice-run items.
type tally struct {
	want     int64
	n        atomic.Int64
	done     chan struct{}
	record   bool
	mu       sync.Mutex
	seen     map[int64]int
	failed   chan struct{} // closed at the first handler error, kept in err
	failOnce sync.Once
	err      error
}

func newTally(want int, record bool) *tally {
	t := &tally{want: int64(want), done: make(chan struct{}), failed: make(chan struct{}), record: record}
	if record {
		t.seen = make(map[int64]int, want)
	}
	return t
}

// handle runs the handler of kind on item n and counts it.
func (t *tally) handle(ctx context.Context, d *drainDB, kind handlerKind, n int64) error {
	if kind == insert {
		if err := d.insertSide(ctx, n); err != nil {
			t.failOnce.Do(func() { t.err = err; close(t.failed) })
			return err
		}
	}
	if t.record {
		t.mu.Lock()
		t.seen[n]++
		t.mu.Unlock()
	}
	if t.n.Add(1) == t.want {
		close(t.done)
	}
	return nil
}

// wait returns once every item was handled; it fails tb at the first handler error, or when
// the drain stalls for longer than any case takes (a broken harness, not a slow system).
func (t *tally) wait(tb testing.TB) {
	tb.Helper()
	stall := time.NewTimer(5 * time.Minute)
	defer stall.Stop()
	select {
	case <-t.done:
	case <-t.failed:
		tb.Fatalf("handler: %v", t.err)
	case <-stall.C:
		tb.Fatalf("drain stalled: %d of %d items handled", t.n.Load(), t.want)
	}
}

// drainSystem is one of the systems compared. seed puts n items (numbered 0..n-1) in the
// queue and prepare sets the system up, both untimed; the drain prepare returns, the timed
// part, starts workers workers and returns once every item's outcome is stored and the system
// stopped. succeeded counts the items stored as done, untimed.
type drainSystem struct {
	name string
	// via is how the system reaches PostgreSQL: direct (or "") or pgbouncer (its rows run on
	// PostgreSQL only).
	via       string
	seed      func(tb testing.TB, d *drainDB, n int)
	prepare   func(tb testing.TB, d *drainDB, kind handlerKind, workers int, t *tally) (drain func())
	succeeded func(tb testing.TB, d *drainDB) int
}

var drainSystems = []drainSystem{switchboardSystem, switchboardBouncerSystem, riverSystem, floorSystem}

// runsOn reports whether sys has rows on engine.
func (sys drainSystem) runsOn(engine string) bool {
	return sys.via != pgbouncer || engine == "postgres"
}

// drainCase is one row of the drain benchmarks.
type drainCase struct {
	engine  string
	kind    handlerKind
	workers int
}

// items is the fixed item count of a case: enough for a steady state, few enough that the
// whole comparison stays within a few minutes on two cores.
func (c drainCase) items() int {
	switch {
	case c.workers == 1:
		return 2_000
	case c.engine == "sqlite":
		return 5_000
	default:
		return 20_000
	}
}

// usage is the process's CPU time so far (user and system): every goroutine of this process,
// the SQLite engine included, but not the PostgreSQL server, which is another process.
func usage() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDrain drains each case's items with switchboard's durable scheduler, River and the
// bare-SQL floor. One op is one item: ns/op, B/op and allocs/op are per item; items/s is the
// drain's rate, cpu-ns/item the Go process's CPU time per item and, on PostgreSQL when the
// server runs on this machine, server-cpu-ns/item the server's (serverCPU). Run it with -benchtime=1x
// (each iteration seeds and drains a fresh database; more iterations are summed).
func BenchmarkDrain(b *testing.B) {
	dsn := os.Getenv(durabletest.PostgresDSNEnv)
	for _, engine := range []string{"postgres", "sqlite"} {
		b.Run(engine, func(b *testing.B) {
			if engine == "postgres" {
				if dsn = pgDSN(b); dsn == "" {
					b.Skipf("%s not set: the PostgreSQL rows are skipped", durabletest.PostgresDSNEnv)
				}
			}
			for _, kind := range []handlerKind{noop, insert} {
				for _, workers := range []int{1, 8, 32} {
					c := drainCase{engine: engine, kind: kind, workers: workers}
					for _, sys := range drainSystems {
						if !sys.runsOn(engine) {
							continue
						}
						b.Run(fmt.Sprintf("%s/w=%d/%s", kind, workers, sys.name), func(b *testing.B) {
							bouncer := ""
							if sys.via == pgbouncer {
								if bouncer = bouncerDSN(b); bouncer == "" {
									b.Skipf("%s not set: the PgBouncer rows are skipped", bouncerDSNEnv)
								}
							}
							benchDrain(b, c, sys, dsn, bouncer)
						})
					}
				}
			}
		})
	}
}

func benchDrain(b *testing.B, c drainCase, sys drainSystem, dsn, bouncer string) {
	n := c.items()
	b.ReportAllocs()
	var (
		elapsed, cpu, server time.Duration
		bytes, allocs        uint64
		m0, m1               runtime.MemStats
		serverKnown          = c.engine == "postgres"
	)
	for range b.N {
		b.StopTimer()
		d := openDrainDB(b, c.engine, dsn, bouncer, c.workers)
		sys.seed(b, d, n)
		drain := sys.prepare(b, d, c.kind, c.workers, newTally(n, false))
		runtime.GC()
		runtime.ReadMemStats(&m0)
		var s0 time.Duration
		if serverKnown {
			s0, serverKnown = serverCPU(context.Background(), d.sql)
		}
		c0, t0 := usage(), time.Now()
		b.StartTimer()
		drain()
		b.StopTimer()
		elapsed += time.Since(t0)
		cpu += usage() - c0
		if serverKnown {
			var s1 time.Duration
			s1, serverKnown = serverCPU(context.Background(), d.sql)
			server += s1 - s0
		}
		runtime.ReadMemStats(&m1)
		bytes += m1.TotalAlloc - m0.TotalAlloc
		allocs += m1.Mallocs - m0.Mallocs
		if got := sys.succeeded(b, d); got != n {
			b.Fatalf("%s: %d of %d items stored as done", sys.name, got, n)
		}
		b.StartTimer()
	}
	total := float64(b.N * n)
	b.ReportMetric(total/elapsed.Seconds(), "items/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/total, "cpu-ns/item")
	if serverKnown {
		b.ReportMetric(float64(server.Nanoseconds())/total, "server-cpu-ns/item")
	}
	b.ReportMetric(float64(elapsed.Nanoseconds())/total, "ns/op")
	b.ReportMetric(float64(bytes)/total, "B/op")
	b.ReportMetric(float64(allocs)/total, "allocs/op")
}

// TestDrainHarness runs every system of the drain benchmarks on a small queue, twice, with the
// insert handler, and checks what they did: every item handled exactly once (none lost, none
// run twice), stored as done, and its side row written. PostgreSQL runs when its DSN is set
// (always under CI).
func TestDrainHarness(t *testing.T) {
	const n = 50
	engines := []string{"sqlite"}
	dsn := pgDSN(t)
	if dsn != "" {
		engines = append(engines, "postgres")
	} else {
		t.Logf("%s not set: PostgreSQL not checked", durabletest.PostgresDSNEnv)
	}
	for _, engine := range engines {
		for _, sys := range drainSystems {
			if !sys.runsOn(engine) {
				continue
			}
			t.Run(engine+"/"+sys.name, func(t *testing.T) {
				bouncer := ""
				if sys.via == pgbouncer {
					if bouncer = bouncerDSN(t); bouncer == "" {
						t.Skipf("%s not set: PgBouncer not checked", bouncerDSNEnv)
					}
				}
				for round := range 2 {
					d := openDrainDB(t, engine, dsn, bouncer, 4)
					sys.seed(t, d, n)
					tl := newTally(n, true)
					sys.prepare(t, d, insert, 4, tl)()
					lost, twice := 0, 0
					for i := range int64(n) {
						switch tl.seen[i] {
						case 0:
							lost++
						case 1:
						default:
							twice++
						}
					}
					if lost != 0 || twice != 0 || len(tl.seen) != n {
						t.Errorf("round %d: lost %d, run twice %d, distinct %d of %d", round, lost, twice, len(tl.seen), n)
					}
					if got := sys.succeeded(t, d); got != n {
						t.Errorf("round %d: %d of %d items stored as done", round, got, n)
					}
					if got, err := d.count(context.Background(), "SELECT COUNT(*) FROM bench_side"); err != nil || got != n {
						t.Errorf("round %d: %d side rows of %d: %v", round, got, n, err)
					}
				}
			})
		}
	}
}
