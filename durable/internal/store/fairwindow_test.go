package store

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"
)

// waitingKeys enqueues one item due in an hour for each of n keys prefix-0000, prefix-0001, …:
// keys with pending items and nothing due, as endpoints whose items wait on open breakers.
func waitingKeys(t *testing.T, s *Store, prefix string, n int) {
	t.Helper()
	for i := range n {
		fairEnqueue(t, s, fmt.Sprintf("%s-%04d", prefix, i), 1, 0, pruneT0.Add(time.Hour))
	}
}

// A claim visits a window of the fairness keys, and the next claim the window after it: a key
// with due items beyond the first window, behind many keys whose items all wait, gets its turn
// within ceil(keys / fairKeyWindow) claims, while the fill keeps every claim full from the
// backlog of a key in no window; after the last window the walk starts from the first key again.
func TestFairClaimWindowsTakeTurns(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		a := fairEnqueue(t, s, "a", 40, 0, pruneT0)
		waitingKeys(t, s, "m", 2*fairKeyWindow)
		z := fairEnqueue(t, s, "z", 3, 0, pruneT0.Add(time.Second))
		keys := 1 + 2*fairKeyWindow + 1
		windows := (keys + fairKeyWindow - 1) / fairKeyWindow
		now := pruneT0.Add(time.Minute)
		zAt := 0
		for n := 1; n <= windows; n++ {
			got, cl := claimKeys(t, s, now, 4)
			if len(cl) != 4 {
				t.Fatalf("claim %d took %d items, want 4: the fill keeps a claim full", n, len(cl))
			}
			count := map[string]int{}
			for _, k := range got {
				count[k]++
			}
			if count["z"] > 0 && zAt == 0 {
				zAt = n
				if count["z"] != len(z) {
					t.Errorf("claim %d took %d of z's %d items: z is the one key with items due in its window", n, count["z"], len(z))
				}
			}
			t.Logf("claim %d: %v", n, count)
		}
		if zAt == 0 {
			t.Fatalf("z's items were not claimed within %d claims (%d keys, windows of %d)", windows, keys, fairKeyWindow)
		}
		// The walk starts again from the first key: a's window, where a alone is due.
		got, _ := claimKeys(t, s, now, 4)
		for id, k := range got {
			if k != "a" || id < a[0] || id > a[len(a)-1] {
				t.Fatalf("after the last window: item %d of %q claimed, want a's", id, k)
			}
		}
	})
}

// A claim's cost is bounded by its window, not by the number of keys with pending items: with
// five windows of keys whose items all wait, one claim reads the fairness index at most a few
// times per key of its window (PostgreSQL counts the index's scans).
func TestFairClaimWalksAWindowOfKeys(t *testing.T) {
	s, db := oneConnStore(t)
	ctx := context.Background()
	waitingKeys(t, s, "m", 5*fairKeyWindow)
	fairEnqueue(t, s, "a", 10, 0, pruneT0)
	fairEnqueue(t, s, "b", 10, 0, pruneT0)
	scans := func() int64 { return indexStat(t, db, "idx_scan", "switchboard_items_fair") }
	before := scans()
	cl := must[[]Claimed](t)(s.Claim(ctx, "w", pruneT0.Add(time.Minute), time.Minute, 8))
	if len(cl) != 8 {
		t.Fatalf("claimed %d of 8", len(cl))
	}
	read := scans() - before
	t.Logf("one claim among %d keys read the fairness index %d times (window %d keys)", 5*fairKeyWindow+2, read, fairKeyWindow)
	if read > 3*fairKeyWindow {
		t.Errorf("one claim read the fairness index %d times: more than three times its window of %d keys", read, fairKeyWindow)
	}
}

// The fair claim's per-key probes keep to the fairness index when the table's statistics are
// stale: statistics taken when nothing was pending, then 100 items due for 20 keys and 3,000
// for 1,500 more (as when a wave of items for down endpoints arrives before autoanalyze has run). A
// plan that took the due index for a key's probe, filtering its rows by key, read thousands of
// rows per key and made each claim cost seconds.
func TestFairClaimKeepsToTheFairIndexOnStaleStatistics(t *testing.T) {
	s, db := oneConnStore(t)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "ALTER TABLE switchboard_items SET (autovacuum_enabled = false)"); err != nil {
		t.Fatal(err)
	}
	for i := range 900 {
		fairEnqueue(t, s, fmt.Sprintf("h%02d", i%20), 1, 0, pruneT0)
	}
	if _, err := db.ExecContext(ctx, "UPDATE switchboard_items SET state = 'succeeded'"); err != nil {
		t.Fatal(err)
	}
	// Analyzed when nothing was pending (a queue drained), then work came.
	if _, err := db.ExecContext(ctx, "ANALYZE switchboard_items"); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		fairEnqueue(t, s, fmt.Sprintf("h%02d", i%20), 1, 0, pruneT0)
	}
	for i := range 3000 {
		fairEnqueue(t, s, fmt.Sprintf("d%04d", i%1500), 1, 0, pruneT0)
	}
	read := func() int64 { return indexStat(t, db, "idx_tup_read", "switchboard_items_due") }
	before := read()
	cl := must[[]Claimed](t)(s.Claim(ctx, "w", pruneT0.Add(time.Minute), time.Minute, 16))
	if len(cl) != 16 {
		t.Fatalf("claimed %d of 16", len(cl))
	}
	due := read() - before
	t.Logf("one claim of 16 among 1,520 keys read %d entries of the due index", due)
	if due > 1000 {
		t.Errorf("one claim read %d entries of the due index: its per-key probes scanned the due items of every key", due)
	}
}

// oneConnStore returns a PostgreSQL store (skipping t without one) whose pool holds one
// connection, so that the statements a test makes and indexStat's flush share a server session.
func oneConnStore(t *testing.T) (*Store, *sql.DB) {
	t.Helper()
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	s := postgresBackend(t, dsn).open(t)
	s.DB().SetMaxOpenConns(1)
	return s, s.DB()
}

// indexStat returns the column (idx_scan, idx_tup_read) of PostgreSQL's statistics of index in
// the schema of db, a pool of one connection: the statistics that connection gathered are
// flushed when it goes idle after the first statement, and read by the second.
func indexStat(t *testing.T, db *sql.DB, column, index string) int64 {
	t.Helper()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(SUM(`+column+`), 0) FROM pg_stat_user_indexes
		WHERE schemaname = current_schema() AND indexrelname = $1`, index).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
