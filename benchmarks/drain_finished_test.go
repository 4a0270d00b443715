package benchmarks

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// finishedRows is how many succeeded items BenchmarkDrainBesideFinished keeps in the table
// beside the drain's pending ones: a day of a busy queue under the default retention.
const finishedRows = 1_000_000

// seedFinished inserts n succeeded items of the drain's request, as the scheduler leaves them
// (in the finished items' table, the success's attempt on the item, no attempt row), updated now so that no retention pass
// deletes them during the drain, then vacuums and analyzes the table as autovacuum would have
// by the time a day's work piled up, and checkpoints.
func seedFinished(tb testing.TB, d *drainDB, n int) {
	tb.Helper()
	ctx := context.Background()
	now := time.Now().UnixMicro()
	if _, err := d.sql.ExecContext(ctx, `INSERT INTO switchboard_finished_items (id, name, payload, state, attempts, next_at, created_at, updated_at,
		fair_key, success_id, success_instance, success_started_at, success_ended_at)
		SELECT nextval(pg_get_serial_sequence('switchboard_items', 'id')), $1, convert_to('{"n":' || g || '}', 'UTF8'), 'succeeded', 1, $2, $2, $2, $1,
		       nextval('switchboard_attempts_id_seq'), 'seed', $2, $2
		FROM generate_series(1, $3::int) g`, drainItemName, now, n); err != nil {
		tb.Fatal(err)
	}
	for _, table := range []string{"switchboard_items", "switchboard_finished_items"} {
		if _, err := d.sql.ExecContext(ctx, "VACUUM (ANALYZE) "+table); err != nil {
			tb.Fatal(err)
		}
	}
	// The seed's writes reach the disk before the drain, not during it (a role that may not
	// checkpoint leaves them to the server's own checkpoints).
	_, _ = d.sql.ExecContext(ctx, "CHECKPOINT")
}

// besideFinished is sys with finishedRows succeeded items in its table before it drains (its
// count of succeeded items leaves them out). The finished items are written first (after the
// schema), then the items to drain, as in a service whose finished work came before its
// backlog: the drain then starts, as BenchmarkDrain's does, on items written since the last
// checkpoint. With the items to drain written before the seed's checkpoint, the drain's first
// write to each page of the items' table and its indexes put a full-page image in the WAL,
// which BenchmarkDrain's drain does not, and the row measured that (0.8× the drain alone), not
// the finished items.
func besideFinished(sys drainSystem) drainSystem {
	out := sys
	out.seed = func(tb testing.TB, d *drainDB, n int) {
		sys.seed(tb, d, 0) // the schema
		seedFinished(tb, d, finishedRows)
		sys.seed(tb, d, n)
	}
	out.succeeded = func(tb testing.TB, d *drainDB) int { return sys.succeeded(tb, d) - finishedRows }
	return out
}

// BenchmarkDrainBesideFinished is BenchmarkDrain's PostgreSQL no-op rows of switchboard and the
// floor with finishedRows succeeded items in the table: the finished work a retention keeps
// must not slow the claim or the completion. Compare each row with the same row of
// BenchmarkDrain in the same run (benchfmt.WriteFinished). Run it with -benchtime=1x.
func BenchmarkDrainBesideFinished(b *testing.B) {
	dsn := pgDSN(b)
	if dsn == "" {
		b.Skip("SWITCHBOARD_TEST_PG_DSN not set: the PostgreSQL rows are skipped")
	}
	for _, workers := range []int{8, 32} {
		for _, sys := range []drainSystem{switchboardSystem, floorSystem} {
			b.Run(fmt.Sprintf("postgres/noop/w=%d/%s", workers, sys.name), func(b *testing.B) {
				benchDrain(b, drainCase{engine: "postgres", kind: noop, workers: workers}, besideFinished(sys), dsn, "")
			})
		}
	}
}
