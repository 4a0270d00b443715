package pgchaos

import (
	"context"
	"database/sql"
	"os"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"go.uber.org/goleak"

	"github.com/switchboard-go/switchboard/benchmarks/internal/chaos"
	"github.com/switchboard-go/switchboard/benchmarks/internal/chaos/replicas"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// open returns a pool on the test server with application_name app; the test skips without a
// server, and fails without one under CI=true.
func open(t *testing.T, app string) *sql.DB {
	t.Helper()
	dsn := os.Getenv("SWITCHBOARD_TEST_PG_DSN")
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("SWITCHBOARD_TEST_PG_DSN is not set under CI=true")
		}
		t.Skip("SWITCHBOARD_TEST_PG_DSN not set")
	}
	withApp, err := replicas.WithParam(dsn, "application_name", app)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", withApp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// count answers a COUNT query of pg_stat_activity with argument arg.
func count(t *testing.T, db *sql.DB, q string, arg any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(q, arg).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// until polls cond, which reads the server's state, until it holds or 10 s pass.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling the server's view, not waiting for time to pass
	}
}

// TestIdleInTxHoldsAnXID: the phase holds one idle transaction with an XID, and gives it back.
func TestIdleInTxHoldsAnXID(t *testing.T) {
	faults := open(t, "chaos-test-idle")
	watch := open(t, "chaos-test-watch")
	f := Server{DB: faults}.Faults()[chaos.IdleInTx]
	const q = `SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = $1 AND state = 'idle in transaction' AND backend_xid IS NOT NULL`
	ctx := context.Background()
	p := chaos.Phase{Label: "idle", Kind: chaos.IdleInTx, Duration: time.Minute}
	if err := f.Start(ctx, p); err != nil {
		t.Fatal(err)
	}
	if n := count(t, watch, q, "chaos-test-idle"); n != 1 {
		t.Errorf("%d idle transactions with an XID during the phase, want 1", n)
	}
	if err := f.Stop(ctx, p); err != nil {
		t.Fatal(err)
	}
	until(t, "the idle transaction ended", func() bool { return count(t, watch, q, "chaos-test-idle") == 0 })
}

// TestBackendKillSparesOtherConnections: the phase terminates the connections of the systems'
// application name and no other.
func TestBackendKillSparesOtherConnections(t *testing.T) {
	faults := open(t, "chaos-test-faults")
	victim := open(t, "chaos-test-victim-1")
	bystander := open(t, "chaos-test-bystander")
	ctx := context.Background()
	vc, err := victim.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer vc.Close()
	var pid int
	if err := vc.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	bc, err := bystander.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	f := Server{DB: faults, AppName: "chaos-test-victim"}.Faults()[chaos.PGBackendKill]
	p := chaos.Phase{Label: "kills", Kind: chaos.PGBackendKill, Duration: time.Minute, Rate: 50}
	if err := f.Start(ctx, p); err != nil {
		t.Fatal(err)
	}
	until(t, "the victim's backend terminated", func() bool {
		return count(t, bystander, `SELECT COUNT(*) FROM pg_stat_activity WHERE pid = $1`, pid) == 0
	})
	if err := f.Stop(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := bc.PingContext(ctx); err != nil {
		t.Errorf("the bystander's connection: %v", err)
	}
	if err := vc.PingContext(ctx); err == nil {
		t.Error("the victim's connection still answers")
	}
}

// TestPoolExhaustionHoldsAndGivesBack: the phase holds its idle connections and closes them.
func TestPoolExhaustionHoldsAndGivesBack(t *testing.T) {
	faults := open(t, "chaos-test-exhaust")
	watch := open(t, "chaos-test-watch")
	f := Server{DB: faults}.Faults()[chaos.PoolExhaustion]
	const q = `SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = $1`
	ctx := context.Background()
	p := chaos.Phase{Label: "exhaust", Kind: chaos.PoolExhaustion, Duration: time.Minute, IdleConns: 7}
	if err := f.Start(ctx, p); err != nil {
		t.Fatal(err)
	}
	if n := count(t, watch, q, "chaos-test-exhaust"); n < 7 {
		t.Errorf("%d connections held, want 7", n)
	}
	if err := f.Stop(ctx, p); err != nil {
		t.Fatal(err)
	}
	until(t, "the connections closed", func() bool { return count(t, watch, q, "chaos-test-exhaust") <= 2 })
}

// TestActiveReadersHoldSnapshots: the phase's readers each hold a REPEATABLE READ snapshot
// (a backend_xmin) while they scan, and stop with the phase.
func TestActiveReadersHoldSnapshots(t *testing.T) {
	faults := open(t, "chaos-test-readers")
	watch := open(t, "chaos-test-watch")
	f := Server{DB: faults, HotTables: []string{"pg_class"}}.Faults()[chaos.ActiveReaders]
	const q = `SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = $1 AND backend_xmin IS NOT NULL AND state <> 'idle'`
	ctx := context.Background()
	p := chaos.Phase{Label: "readers", Kind: chaos.ActiveReaders, Duration: time.Minute, Readers: 3}
	if err := f.Start(ctx, p); err != nil {
		t.Fatal(err)
	}
	until(t, "three readers holding snapshots", func() bool { return count(t, watch, q, "chaos-test-readers") == 3 })
	if err := f.Stop(ctx, p); err != nil {
		t.Fatal(err)
	}
	until(t, "the readers' snapshots released", func() bool { return count(t, watch, q, "chaos-test-readers") == 0 })
}

// TestRestartStopsThenStartsHalfway: postgres-restart stops the server when the phase begins
// and starts it half the phase later; Stop returns once it is started, and reports a failed
// start.
func TestRestartStopsThenStartsHalfway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var stops, starts atomic.Int32
		var startedAt time.Time
		t0 := time.Now()
		s := Server{
			Stop:  func(context.Context) error { stops.Add(1); return nil },
			Start: func(context.Context) error { starts.Add(1); startedAt = time.Now(); return nil },
		}
		f := s.Faults()[chaos.PostgresRestart]
		p := chaos.Phase{Label: "restart", Kind: chaos.PostgresRestart, Duration: 10 * time.Second}
		ctx := context.Background()
		if err := f.Start(ctx, p); err != nil {
			t.Fatal(err)
		}
		if stops.Load() != 1 || starts.Load() != 0 {
			t.Fatalf("after Start: %d stops, %d starts", stops.Load(), starts.Load())
		}
		time.Sleep(p.Duration)
		if err := f.Stop(ctx, p); err != nil {
			t.Fatal(err)
		}
		if starts.Load() != 1 || startedAt.Sub(t0) != 5*time.Second {
			t.Errorf("%d starts, %v into the phase; want 1 at 5s", starts.Load(), startedAt.Sub(t0))
		}
	})
	if _, ok := (Server{}).Faults()[chaos.PostgresRestart]; ok {
		t.Error("a server without Stop and Start has a postgres-restart fault")
	}
}

// TestDiagnoserSamplesWaitsAndTables: the Diagnoser counts a backend of the systems waiting in
// pg_sleep within the window, and reads the hot table's size.
func TestDiagnoserSamplesWaitsAndTables(t *testing.T) {
	faults := open(t, "chaos-test-diag")
	sys := open(t, "chaos-test-sys-1")
	if _, err := faults.Exec(`CREATE TABLE IF NOT EXISTS chaos_diag_t AS SELECT 1 AS n`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = faults.Exec(`DROP TABLE IF EXISTS chaos_diag_t`) })
	d := NewDiagnoser(Server{DB: faults, AppName: "chaos-test-sys", HotTables: []string{"chaos_diag_t"}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	start := time.Now()
	if _, err := sys.Exec(`SELECT pg_sleep(1)`); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
	diag, err := d.Diagnose(context.Background(), chaos.Window{Start: start, End: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if len(diag.WaitEvents) == 0 || diag.WaitEvents[0].Event != "PgSleep" || diag.WaitEvents[0].Samples < 2 {
		t.Errorf("wait events: %+v; want PgSleep sampled", diag.WaitEvents)
	}
	if _, ok := diag.TableBytes["chaos_diag_t"]; !ok || diag.TableBytes["chaos_diag_t"] <= 0 {
		t.Errorf("table bytes: %v", diag.TableBytes)
	}
	if _, ok := diag.DeadTuples["chaos_diag_t"]; !ok {
		t.Errorf("dead tuples: %v", diag.DeadTuples)
	}
}
