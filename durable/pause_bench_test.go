package durable_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
)

// BenchmarkClaimPastPaused measures a claim of 100 items when a paused request name has a
// backlog of due items older than them: the claim reads past those items (they stay pending,
// untouched) on every call. Each iteration is one claim.
func BenchmarkClaimPastPaused(b *testing.B) {
	for _, bb := range benchBackends() {
		for _, paused := range []int{0, 1_000, 10_000} {
			b.Run(fmt.Sprintf("%s/paused=%d", bb.name, paused), func(b *testing.B) {
				be := bb.open(b)
				q := be.queue(b, durable.Config{})
				store := durable.StoreOf(q)
				ctx := context.Background()
				now := time.Now()
				seed(b, store, paused, now.Add(-time.Hour)) // test.work, due an hour ago
				if _, err := q.Pause(ctx, durable.NameTarget("test.work"), "bench"); err != nil {
					b.Fatal(err)
				}
				// The claimable items are of another name, due after the paused backlog.
				for off := 0; off < b.N*100; off += 1000 {
					n := min(1000, b.N*100-off)
					if _, err := store.DB().Exec(rebindFor(store.Engine().String(), `INSERT INTO switchboard_items (name, payload, state, next_at, created_at, updated_at)
						SELECT 'test.keyed', ?, 'pending', ?, ?, ? FROM (WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < ?) SELECT i FROM g) s`),
						[]byte(`{}`), now.UnixMicro(), now.UnixMicro(), now.UnixMicro(), n); err != nil {
						b.Fatal(err)
					}
				}
				if be.name == "postgres" {
					if _, err := store.DB().Exec("ANALYZE switchboard_items"); err != nil {
						b.Fatal(err)
					}
				}
				b.ResetTimer()
				for range b.N {
					got, err := store.Claim(ctx, "bench", now, time.Minute, 100)
					if err != nil || len(got) != 100 {
						b.Fatalf("claimed %d: %v", len(got), err)
					}
				}
				b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "items/s")
			})
		}
	}
}

// rebindFor turns ? placeholders into PostgreSQL's $n when engine is postgres.
func rebindFor(engine, q string) string {
	if engine != "postgres" {
		return q
	}
	out, n := []byte{}, 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			out = fmt.Appendf(out, "$%d", n)
			continue
		}
		out = append(out, q[i])
	}
	return string(out)
}
