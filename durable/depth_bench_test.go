package durable_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/internal/pgtest"
	istore "github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
)

// BenchmarkClaimDepth measures the claim at depth: one claim of 32 due items, spread over 10
// fairness keys, and the completion of those items, from a table that holds pending items due
// (pending=N) and, in the finished rows, succeeded items with their attempt rows (finished=N).
// Reported: µs per claim (with its completion) and items/s. The rows of 10,000 and 1,000,000
// pending run by default; SWITCHBOARD_BENCH_DEEP=1 adds 10,000,000 pending and 50,000,000
// finished on PostgreSQL (tens of GB, many minutes of seeding). Those two are seeded once into
// schemas that are kept for the next run (switchboard_bench_depth_…, see keptDepthSchema); each
// run puts the table back to its depth first. SQLite stops at 1,000,000.
func BenchmarkClaimDepth(b *testing.B) {
	type depth struct{ pending, finished int }
	depths := []depth{{10_000, 0}, {1_000_000, 0}}
	deep := os.Getenv("SWITCHBOARD_BENCH_DEEP") != ""
	if deep {
		depths = append(depths, depth{10_000_000, 0}, depth{10_000, 50_000_000})
	}
	for _, bb := range benchBackends() {
		for _, d := range depths {
			if bb.name == "sqlite" && d.pending+d.finished > 1_000_000 {
				continue
			}
			b.Run(fmt.Sprintf("%s/pending=%d/finished=%d", bb.name, d.pending, d.finished), func(b *testing.B) {
				now := time.Now()
				var st *istore.Store
				if bb.name == "postgres" && d.pending+d.finished > 1_000_000 {
					st = keptDepthSchema(b, d.pending, d.finished, b.N*32, now)
				} else {
					be := bb.open(b)
					st = be.open(b)
					if d.finished > 0 {
						seedRows(b, be.name, st.DB(), "succeeded", 1, d.finished, now.Add(-time.Hour))
					}
					// Enough pending items that the claims never run the table below its depth.
					seedRows(b, be.name, st.DB(), "pending", 10, d.pending+b.N*32, now.Add(-time.Minute))
				}
				ctx := context.Background()
				b.ResetTimer()
				for range b.N {
					cl := claim32(b, st, now)
					cs := make([]istore.Completion, len(cl))
					for i, c := range cl {
						cs[i] = istore.Completion{Fence: c.Fence(), State: istore.StateSucceeded, Outcome: record.OutcomeSucceeded, StartedAt: now, EndedAt: now, Name: c.Name}
					}
					if _, err := st.Complete(ctx, cs); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/claim")
				b.ReportMetric(float64(b.N*32)/b.Elapsed().Seconds(), "items/s")
			})
		}
	}
}

// keptDepthSchema returns a store on the PostgreSQL schema switchboard_bench_depth_P_F, kept
// between runs: created and seeded with pending due items (10 fairness keys) and finished
// succeeded items with their attempts the first time, and on every later run put back to that
// depth (the items an earlier run claimed deleted, pending ones added) plus extra pending items
// for the run to claim. Seeding 50 million rows takes many minutes; a kept schema takes seconds.
// Drop it with DROP SCHEMA switchboard_bench_depth_P_F CASCADE.
func keptDepthSchema(b *testing.B, pending, finished, extra int, now time.Time) *istore.Store {
	b.Helper()
	dsn := pgDSN(b)
	schema := fmt.Sprintf("switchboard_bench_depth_%d_%d", pending, finished)
	admin := pgtest.Open(b, dsn)
	if _, err := admin.Exec("CREATE SCHEMA IF NOT EXISTS " + schema); err != nil {
		b.Fatal(err)
	}
	target, err := pgtest.WithSearchPath(dsn, schema)
	if err != nil {
		b.Fatal(err)
	}
	st := durable.StoreOf(backend{name: "postgres", target: target}.bare(b, durable.Config{}))
	db := st.DB()
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS bench_seeded (last_id bigint NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	var last int64
	switch err := db.QueryRow(`SELECT last_id FROM bench_seeded`).Scan(&last); {
	case errors.Is(err, sql.ErrNoRows):
		b.Logf("seeding %s: %d pending, %d finished (once; the schema is kept)", schema, pending, finished)
		if finished > 0 {
			seedRows(b, "postgres", db, "succeeded", 1, finished, now.Add(-time.Hour))
		}
		seedRows(b, "postgres", db, "pending", 10, pending, now.Add(-time.Minute))
		if err := db.QueryRow(`SELECT COALESCE(MAX(id), 0) FROM switchboard_items`).Scan(&last); err != nil {
			b.Fatal(err)
		}
		if _, err := db.Exec(`INSERT INTO bench_seeded VALUES ($1)`, last); err != nil {
			b.Fatal(err)
		}
	case err != nil:
		b.Fatal(err)
	}
	// Back to the seeded depth: the items of earlier runs go, and as many pending items as
	// those runs claimed of the seed come back (due, on the same keys).
	for _, q := range []string{
		`DELETE FROM switchboard_attempts WHERE item_id > $1`,
		`DELETE FROM switchboard_items WHERE id > $1`,
	} {
		if _, err := db.Exec(q, last); err != nil {
			b.Fatal(err)
		}
	}
	var have int
	if err := db.QueryRow(`SELECT count(*) FROM switchboard_items WHERE state = 'pending'`).Scan(&have); err != nil {
		b.Fatal(err)
	}
	seedRows(b, "postgres", db, "pending", 10, pending-have+extra, now.Add(-time.Minute))
	return st
}

// seedRows inserts n items of test.work in state (due at at, their fairness keys k0…k(keys-1)
// in turn) straight into the table, with an attempt row each when they succeeded, then analyzes
// the tables (PostgreSQL) so that the plans are those of a table that size.
func seedRows(b testing.TB, engine string, db *sql.DB, state string, keys, n int, at time.Time) {
	b.Helper()
	us := at.UnixMicro()
	var stmts []string
	if engine == "postgres" {
		stmts = []string{fmt.Sprintf(`INSERT INTO switchboard_items (name, payload, state, attempts, next_at, created_at, updated_at, fair_key)
			SELECT 'test.work', convert_to('{"n":' || g || '}', 'UTF8'), '%s', %d, %d, %d, %d, 'k' || (g %% %d)
			FROM generate_series(1, %d) g`, state, attemptsOf(state), us, us, us, keys, n)}
		if state == "succeeded" {
			stmts = append(stmts, `INSERT INTO switchboard_attempts (item_id, attempt, instance, started_at, ended_at, outcome)
				SELECT id, 1, 'seed', updated_at, updated_at, 'succeeded' FROM switchboard_items WHERE state = 'succeeded'`,
				// Where the scheduler leaves them: in the finished items' table.
				`WITH m AS (DELETE FROM switchboard_items WHERE state = 'succeeded' RETURNING *)
				INSERT INTO switchboard_finished_items SELECT * FROM m`)
		}
		stmts = append(stmts, `ANALYZE switchboard_items`, `ANALYZE switchboard_finished_items`, `ANALYZE switchboard_attempts`)
	} else {
		stmts = []string{fmt.Sprintf(`WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g WHERE x < %d)
			INSERT INTO switchboard_items (name, payload, state, attempts, next_at, created_at, updated_at, fair_key)
			SELECT 'test.work', CAST('{"n":' || x || '}' AS BLOB), '%s', %d, %d, %d, %d, 'k' || (x %% %d) FROM g`,
			n, state, attemptsOf(state), us, us, us, keys)}
		if state == "succeeded" {
			stmts = append(stmts, `INSERT INTO switchboard_attempts (item_id, attempt, instance, started_at, ended_at, outcome)
				SELECT id, 1, 'seed', updated_at, updated_at, 'succeeded' FROM switchboard_items WHERE state = 'succeeded'`)
		}
	}
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
}

func attemptsOf(state string) int {
	if state == "succeeded" {
		return 1
	}
	return 0
}

// BenchmarkClaimManyKeys measures the claim beside many fairness keys whose items all wait
// (each with one item parked an hour ahead, as behind an open breaker): 10,000 items due over
// 10 keys, and parked=N other keys. A claim visits a window of at most 128 keys, so its cost
// should not grow with N (it did when the claim visited every key: 16 ms at 1,000 and 47 ms
// at 10,000 on PostgreSQL, where 0 took 1 ms).
func BenchmarkClaimManyKeys(b *testing.B) {
	for _, bb := range benchBackends() {
		for _, parked := range []int{0, 1_000, 10_000} {
			b.Run(fmt.Sprintf("%s/parked=%d", bb.name, parked), func(b *testing.B) {
				be := bb.open(b)
				st := be.open(b)
				now := time.Now()
				if parked > 0 {
					seedRows(b, be.name, st.DB(), "pending", parked, parked, now.Add(time.Hour))
					// The parked items' keys differ from the due items' (k0…k9).
					if _, err := st.DB().Exec(`UPDATE switchboard_items SET fair_key = 'parked-' || fair_key`); err != nil {
						b.Fatal(err)
					}
				}
				seedRows(b, be.name, st.DB(), "pending", 10, 10_000+b.N*32, now.Add(-time.Minute))
				b.ResetTimer()
				for range b.N {
					claim32(b, st, now)
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/claim")
			})
		}
	}
}

// claim32 claims 32 items of st at now, failing b unless it gets them.
func claim32(b *testing.B, st *istore.Store, now time.Time) []istore.Claimed {
	b.Helper()
	cl, err := st.Claim(context.Background(), "bench", now, time.Minute, 32)
	if err != nil || len(cl) != 32 {
		b.Fatalf("claimed %d: %v", len(cl), err)
	}
	return cl
}
