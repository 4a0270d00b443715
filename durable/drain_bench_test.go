package durable_test

import (
	"context"
	"database/sql"
	"os"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

// drainItems, drainWorkers and drainHistory size BenchmarkDrainHistory.
const (
	drainItems   = 20_000
	drainWorkers = 8
	drainHistory = 1_000_000
)

// BenchmarkDrainHistory measures how finished rows, which are never deleted, slow the scheduler
// down. Each iteration drains 20,000 due items with 8 workers twice: on an empty table and on
// one holding 1,000,000 succeeded items with an attempt row each (seeded with INSERT … SELECT
// generate_series and analyzed). It reports items/s of both drains and their ratio.
// PostgreSQL only; run with -benchtime=Nx (each iteration seeds and drains 40,000 items).
//
// The plans PostgreSQL picks depend on what ANALYZE last saw, so autovacuum is off on these
// tables and the sub-benchmarks fix it:
//   - stats=finished: ANALYZE ran after the finished rows were seeded, before the items to drain
//     were inserted (a drained queue);
//   - stats=queued: ANALYZE runs again once the items to drain are inserted (a queue with a
//     backlog and nothing running).
func BenchmarkDrainHistory(b *testing.B) {
	dsn := os.Getenv(pgDSNEnv)
	if dsn == "" {
		b.Skipf("%s not set", pgDSNEnv)
	}
	for _, stats := range []string{"finished", "queued"} {
		b.Run("stats="+stats, func(b *testing.B) {
			empty := postgresBackend(b, dsn).queue(b, durable.Config{})
			full := postgresBackend(b, dsn).queue(b, durable.Config{})
			seedFinished(b, durable.StoreOf(empty).DB(), 0)
			seedFinished(b, durable.StoreOf(full).DB(), drainHistory)
			queued := stats == "queued"
			var emptyTime, fullTime time.Duration
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				// The empty table starts empty every time; the full one keeps what it drained
				// (20,000 more succeeded items per iteration).
				if _, err := durable.StoreOf(empty).DB().Exec("TRUNCATE switchboard_attempts, switchboard_items"); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				emptyTime += drain(b, empty, queued)
				fullTime += drain(b, full, queued)
			}
			b.StopTimer()
			emptyRate := float64(b.N*drainItems) / emptyTime.Seconds()
			fullRate := float64(b.N*drainItems) / fullTime.Seconds()
			b.ReportMetric(emptyRate, "empty-items/s")
			b.ReportMetric(fullRate, "1M-items/s")
			b.ReportMetric(fullRate/emptyRate, "ratio")
		})
	}
}

// seedFinished inserts n succeeded items, each with one succeeded attempt row, in two
// statements, analyzes both tables and turns autovacuum off on them.
func seedFinished(b *testing.B, db *sql.DB, n int) {
	b.Helper()
	start := time.Now().Add(-time.Hour).UnixMicro()
	for _, st := range []struct {
		q    string
		args []any
	}{
		{`INSERT INTO switchboard_items (name, payload, state, attempts, next_at, claimed_at, created_at, updated_at)
		  SELECT 'test.work', convert_to('{"n":' || g || '}', 'UTF8'), 'succeeded', 1, $1::bigint + g, $1::bigint + g, $1::bigint + g, $1::bigint + g
		  FROM generate_series(1, $2::int) g`, []any{start, n}},
		{`INSERT INTO switchboard_attempts (item_id, attempt, instance, started_at, ended_at, outcome)
		  SELECT id, 1, 'seed', claimed_at, updated_at, 'succeeded' FROM switchboard_items`, nil},
		{`ANALYZE switchboard_items`, nil},
		{`ANALYZE switchboard_attempts`, nil},
		{`ALTER TABLE switchboard_items SET (autovacuum_enabled = false)`, nil},
		{`ALTER TABLE switchboard_attempts SET (autovacuum_enabled = false)`, nil},
	} {
		if _, err := db.Exec(st.q, st.args...); err != nil {
			b.Fatalf("%s: %v", st.q, err)
		}
	}
}

// drain inserts drainItems due items into store (and analyzes the tables if analyze is set),
// runs a scheduler with drainWorkers workers until all of them succeeded, and returns the time
// from Start until Shutdown returned.
func drain(b *testing.B, q *durable.Queue, analyze bool) time.Duration {
	store := durable.StoreOf(q)
	b.Helper()
	b.StopTimer()
	ctx := context.Background()
	before := must[durable.Stats](b)(q.Stats(ctx)).Counts[record.StateSucceeded]
	seed(b, store, drainItems, time.Now())
	if analyze {
		for _, q := range []string{"ANALYZE switchboard_items", "ANALYZE switchboard_attempts"} {
			if _, err := store.DB().Exec(q); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StartTimer()
	elapsed := runDrain(b, q, drainItems, drainWorkers)
	b.StopTimer()
	after := must[durable.Stats](b)(q.Stats(ctx)).Counts[record.StateSucceeded]
	if after-before != drainItems {
		b.Fatalf("succeeded %d of %d", after-before, drainItems)
	}
	b.StartTimer()
	return elapsed
}
