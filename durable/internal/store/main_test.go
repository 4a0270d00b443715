package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	// Registers the "sqlite" database/sql driver, as durable/sqlite does.
	_ "modernc.org/sqlite"

	"github.com/switchboard-go/switchboard/durable/internal/pgtest"
	"github.com/switchboard-go/switchboard/durable/internal/pgxconn"
)

// The store's conformance suite: what every engine must do alike. Each test runs on SQLite,
// and on PostgreSQL when SWITCHBOARD_TEST_PG_DSN is set (under CI=true it must be).

// pgDSNEnv names the environment variable holding the PostgreSQL DSN of the tests.
const pgDSNEnv = pgtest.DSNEnv

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pgDSN returns the PostgreSQL DSN, failing the test under CI when none is set.
func pgDSN(t testing.TB) string { t.Helper(); return pgtest.DSN(t) }

// backend opens stores of one engine; every store opened by one backend value shares one
// database (one SQLite file, one PostgreSQL schema).
type backend struct {
	name   string
	engine Engine
	// pool opens a new pool on the backend's database, closed at the end of the test.
	pool func(t testing.TB) *sql.DB
}

// open returns a migrated store over a new pool of the backend's database.
func (b backend) open(t testing.TB) *Store {
	t.Helper()
	db := b.pool(t)
	if err := Migrate(context.Background(), db, b.engine, nil); err != nil {
		t.Fatal(err)
	}
	return New(db, b.engine, false)
}

func sqliteBackend(t testing.TB) backend {
	path := filepath.Join(t.TempDir(), "db", "durable.db")
	return backend{name: "sqlite", engine: SQLite, pool: func(t testing.TB) *sql.DB {
		t.Helper()
		db, err := OpenSQLite(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	}}
}

// postgresBackend creates a schema of its own on the test server, dropped at the end of the
// test, and opens pools whose search_path selects it.
func postgresBackend(t testing.TB, dsn string) backend {
	t.Helper()
	target := pgtest.Schema(t, dsn, "sbtest_")
	return backend{name: "postgres", engine: Postgres, pool: func(t testing.TB) *sql.DB {
		t.Helper()
		return pgtest.Open(t, target)
	}}
}

// Postgres is the PostgreSQL engine over pgx, as durable/postgres makes it.
var Postgres = NewPostgres(PostgresDriver{NotApplied: pgxconn.NotApplied, ReadOnly: pgxconn.ReadOnly, SendBatch: pgxconn.SendBatch, Listen: pgxconn.Listen})

// eachBackend runs fn against SQLite, and against PostgreSQL when a DSN is set.
func eachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { fn(t, sqliteBackend(t)) })
	dsn := pgDSN(t)
	t.Run("postgres", func(t *testing.T) {
		if dsn == "" {
			t.Skipf("%s not set", pgDSNEnv)
		}
		fn(t, postgresBackend(t, dsn))
	})
}

func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// postgresStatements are the PostgreSQL statements of the store, by name, for the plan checks.
// claimIDsQueries are the queries of the function switchboard_claim_ids (its latest migration),
// the one of a single key and the fair one, with their parameters as placeholders ($1 now, $2
// limit, and $3 the key of the first, or the window's keys of the second), for the checks of
// their plans.
func claimIDsQueries() (one, fair string) {
	ms, err := Migrations(Postgres)
	if err != nil {
		panic(err)
	}
	params := strings.NewReplacer("now_at", "$1::bigint", "claim_limit", "$2::bigint", "first_key", "$3::text", "window_keys", "$3::text[]")
	for _, m := range slices.Backward(ms) {
		parts := strings.Split(m.SQL, "RETURN QUERY")
		if len(parts) == 3 {
			one = parts[1][:strings.Index(parts[1], ";")]
			fair = parts[2][:strings.Index(parts[2], ";\nEND")]
			return params.Replace(one), params.Replace(fair)
		}
	}
	panic("no migration defines switchboard_claim_ids")
}

func postgresStatements() map[string]string {
	e := Postgres.(*postgresEngine)
	claimIDsOne, claimIDs := claimIDsQueries()
	return map[string]string{
		"claim":            e.st.claim,
		"claim_ids":        claimIDs,
		"claim_ids_one":    claimIDsOne,
		"claim_isolated":   e.st.claimIsolated,
		"complete":         e.completeMany,
		"complete_one":     e.completeMany, // the same statement, its plan for a batch of one
		"extend":           e.extendStmt,
		"sweep":            e.sweepStmt,
		"isolated_due":     e.st.isolatedDue,
		"unpark":           e.st.unpark,
		"repark":           e.st.repark,
		"oldest_due":       e.st.oldestDue,
		"enqueue":          e.st.insert,
		"enqueue_notify":   e.insertNotify,
		"enqueue_debounce": e.st.debounce,
		"dedupe":           e.st.byDedupe,
		"release":          e.st.release,
		"token":            e.st.byToken,
		"prune":            postgresPrune,
		"breaker_insert":   postgresBreakers.insert,
		"breaker_update":   postgresBreakers.update,
		"breaker_read":     postgresBreakers.read,
		"breaker_load":     postgresBreakers.load,
		"breaker_since":    postgresBreakers.changes,
		"breaker_seq":      postgresBreakers.lastSeq,
		"acquire":          pgAcquireSQL,
		"wake_limited":     pgWakeSQL,
		"limits":           Postgres.rebind(limitsSQL),
	}
}

func TestConcurrentOpenMigratesOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		var wg sync.WaitGroup
		stores := make([]*Store, 4)
		for i := range stores {
			wg.Go(func() { stores[i] = b.open(t) })
		}
		wg.Wait()
		var n int
		if err := stores[0].DB().QueryRow("SELECT COUNT(*) FROM switchboard_schema_migrations").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if want := len(must[[]Migration](t)(Migrations(b.engine))); n != want {
			t.Fatalf("%d migration rows, want %d", n, want)
		}
	})
}

// TestFenceRejectsLateCompletion: a completion under a fence whose lease was swept and claimed
// again is rejected with a *LeaseLostError; the current holder's is accepted once.
func TestFenceRejectsLateCompletion(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
		id := must[ItemID](t)(func() (ItemID, error) {
			id, _, err := s.Enqueue(ctx, NewItem{Name: "test.work", Payload: []byte(`{}`), NextAt: now, Now: now})
			return id, err
		}())
		a := must[[]Claimed](t)(s.Claim(ctx, "a", now, time.Minute, 10))
		if len(a) != 1 || a[0].ID != id || a[0].Attempts != 1 {
			t.Fatalf("claim a: %+v", a)
		}
		if n := must[int](t)(s.Sweep(ctx, now.Add(2*time.Minute))); n != 1 {
			t.Fatalf("swept %d", n)
		}
		later := now.Add(2 * time.Minute)
		bc := must[[]Claimed](t)(s.ClaimIsolated(ctx, "b", later, time.Minute))
		if len(bc) != 1 || bc[0].Attempts != 2 {
			t.Fatalf("claim b: %+v", bc)
		}
		late := Completion{Fence: a[0].Fence(), State: StateSucceeded, Outcome: OutcomeSucceeded, StartedAt: now, EndedAt: later}
		on := Completion{Fence: bc[0].Fence(), State: StateSucceeded, Outcome: OutcomeSucceeded, StartedAt: later, EndedAt: later}
		res := must[[]error](t)(s.Complete(ctx, []Completion{late, on}))
		if res[0] == nil || res[1] != nil {
			t.Fatalf("results %v", res)
		}
		if lost, ok := res[0].(*LeaseLostError); !ok || lost.Fence != a[0].Fence() {
			t.Fatalf("late completion: %v", res[0])
		}
		res = must[[]error](t)(s.Complete(ctx, []Completion{on}))
		if res[0] == nil {
			t.Fatal("a second completion under the same fence was accepted")
		}
		as := must[[]Attempt](t)(s.Attempts(ctx, id))
		if len(as) != 2 || as[0].Outcome != OutcomeAbandoned || as[1].Outcome != OutcomeSucceeded {
			t.Fatalf("attempts %+v", as)
		}
	})
}

// queryRower is a *sql.DB or a *sql.Conn: what a plan is read through.
type queryRower interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// planBuffers runs query (PostgreSQL's placeholders) under EXPLAIN (ANALYZE, BUFFERS) on db
// and returns the buffers its plan read and the rows it returned.
func planBuffers(t *testing.T, db queryRower, query string, args ...any) (buffers, rows int) {
	t.Helper()
	var raw string
	if err := db.QueryRowContext(context.Background(), "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+query, args...).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var doc []struct {
		Plan struct {
			Rows int `json:"Actual Rows"`
			Hit  int `json:"Shared Hit Blocks"`
			Read int `json:"Shared Read Blocks"`
		} `json:"Plan"`
	}
	if err := json.Unmarshal([]byte(raw), &doc); err != nil || len(doc) != 1 {
		t.Fatalf("explain output: %v", err)
	}
	return doc[0].Plan.Hit + doc[0].Plan.Read, doc[0].Plan.Rows
}

// sqlitePlan returns the lines of SQLite's EXPLAIN QUERY PLAN of query on db.
func sqlitePlan(t *testing.T, db queryRower, query string, args ...any) []string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}
