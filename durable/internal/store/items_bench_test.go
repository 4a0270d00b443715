package store

import (
	"context"
	"os"
	"testing"
	"time"
)

// listBenchRows and listBenchPage size BenchmarkListItemsPage.
const (
	listBenchRows = 1_000_000
	listBenchPage = 50
)

// BenchmarkListItemsPage measures reading page 1 and page 1,000 (of 50 items) of the succeeded
// items of a table of 1,000,000, seeded with one INSERT … SELECT (generate_series on
// PostgreSQL, a recursive WITH on SQLite). Each iteration reads both pages; it reports the time
// of each and their ratio, which keyset paging keeps near 1 where OFFSET grows with the page.
func BenchmarkListItemsPage(b *testing.B) {
	backends := []struct {
		name string
		b    func(b *testing.B) backend
		fill string
	}{
		{"sqlite", func(b *testing.B) backend { return sqliteBackend(b) }, `INSERT INTO switchboard_items (name, payload, state, attempts, next_at, created_at, updated_at)
			WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?2)
			SELECT 'test.work', x'7b7d', 'succeeded', 1, ?1 + n, ?1 + n, ?1 + n + 2000 FROM g`},
	}
	if dsn := os.Getenv(pgDSNEnv); dsn != "" {
		backends = append(backends, struct {
			name string
			b    func(b *testing.B) backend
			fill string
		}{"postgres", func(b *testing.B) backend { return postgresBackend(b, dsn) }, `INSERT INTO switchboard_items (name, payload, state, attempts, next_at, created_at, updated_at)
			SELECT 'test.work', '\x7b7d', 'succeeded', 1, $1::bigint + g, $1::bigint + g, $1::bigint + g + 2000
			FROM generate_series(1, $2::int) g`})
	}
	for _, bb := range backends {
		b.Run(bb.name, func(b *testing.B) {
			ctx := context.Background()
			s := bb.b(b).open(b)
			if _, err := s.DB().Exec(bb.fill, int64(1700000000000000), listBenchRows); err != nil {
				b.Fatal(err)
			}
			if _, err := s.DB().Exec("ANALYZE"); err != nil {
				b.Fatal(err)
			}
			q := ItemQuery{State: StateSucceeded, Limit: listBenchPage}
			var far ItemCursor
			for range 999 {
				items, err := s.ListItems(ctx, ItemQuery{State: StateSucceeded, Limit: listBenchPage, After: far})
				if err != nil || len(items) != listBenchPage {
					b.Fatalf("paging to page 1,000: %d items, %v", len(items), err)
				}
				far = CursorOf(q, items[len(items)-1])
			}
			read := func(after ItemCursor) time.Duration {
				q.After = after
				start := time.Now()
				items, err := s.ListItems(ctx, q)
				if err != nil || len(items) != listBenchPage {
					b.Fatalf("%d items, %v", len(items), err)
				}
				return time.Since(start)
			}
			var first, thousandth time.Duration
			b.ResetTimer()
			for range b.N {
				first += read(ItemCursor{})
				thousandth += read(far)
			}
			b.ReportMetric(float64(first.Nanoseconds())/float64(b.N), "page1-ns")
			b.ReportMetric(float64(thousandth.Nanoseconds())/float64(b.N), "page1000-ns")
			b.ReportMetric(float64(thousandth)/float64(first), "ratio")
		})
	}
}
