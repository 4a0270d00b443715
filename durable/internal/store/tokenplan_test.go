package store

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"
)

// TestTokenCheckUsesItsIndexOnADrainedTable: the trigger that keeps a token unique across the
// live and the finished items looks each table up by its token index, however empty the live
// table was when its plan was made. A queue that drained to nothing and was analyzed (as
// autovacuum does after the deletes of a drain) made the trigger's cached plan a sequential
// scan of the live table, so that an outbox transaction enqueuing a batch read the whole table
// once per item (quadratic: 8,000 items took six seconds), and every later enqueue of the same
// connection did so until the table was analyzed again. The transaction's own statistics
// (pg_stat_xact_user_tables) count the scans of the items' tables.
func TestTokenCheckUsesItsIndexOnADrainedTable(t *testing.T) {
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	ctx := context.Background()
	s := postgresBackend(t, dsn).open(t)
	db := s.DB()
	for _, table := range []string{"switchboard_items", "switchboard_finished_items"} {
		if _, err := db.ExecContext(ctx, "VACUUM (ANALYZE) "+table); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	before := seqScans(t, tx)
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	const items = 200
	for i := range items {
		if _, existed, err := s.EnqueueTx(ctx, tx, NewItem{Name: "w", Payload: []byte(`{}`), NextAt: now, Now: now,
			Token: fmt.Sprintf("token-%04d", i)}); err != nil || existed {
			t.Fatalf("enqueue %d: existed %v, %v", i, existed, err)
		}
	}
	// The same token again: the trigger finds the live item and nothing is inserted.
	if _, existed, err := s.EnqueueTx(ctx, tx, NewItem{Name: "w", Payload: []byte(`{}`), NextAt: now, Now: now,
		Token: "token-0007"}); err != nil || !existed {
		t.Fatalf("enqueue of a taken token: existed %v, %v", existed, err)
	}
	after := seqScans(t, tx)
	for table, n := range after {
		if scans := n - before[table]; scans > 2 {
			t.Errorf("%d enqueues in one transaction scanned %s whole %d times: the token check must use its index", items+1, table, scans)
		}
	}
}

// seqScans reads, in tx, how many sequential scans of each items' table its connection made
// that the server's statistics have not taken in yet (those of tx among them): a transaction's
// own scans are the difference of two reads in it.
func seqScans(t *testing.T, tx *sql.Tx) map[string]int64 {
	t.Helper()
	rows, err := tx.Query(`SELECT relname, seq_scan FROM pg_stat_xact_user_tables
		WHERE relname IN ('switchboard_items', 'switchboard_finished_items')`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var table string
		var scans int64
		if err := rows.Scan(&table, &scans); err != nil {
			t.Fatal(err)
		}
		out[table] = scans
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 {
		t.Fatalf("statistics of %d items' tables, want 2: %v", len(out), out)
	}
	return out
}
