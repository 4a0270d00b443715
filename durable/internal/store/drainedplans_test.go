package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestClaimAndCompleteKeepTheirIndexesAfterAnIdleSpell: the statements of the claim loop are
// prepared once per connection and the server keeps a generic plan of each after a few runs. A
// queue that drained, and was analyzed then (autovacuum does so after a drain's deletes), made
// those plans while the statistics said the items' table was empty: a sequential scan of it for
// each claim, completion, lease extension, sweep and look for an item to run alone, kept when a burst filled the table again, until its next analyze
// (a claim of 32 items took 28 ms beside 100,000 pending, not half a millisecond). The test
// runs the loop's statements on one connection through an idle spell on an analyzed empty table,
// fills the table, runs them again, and counts the sequential scans of the table they made, and
// the statements the server planned anew at every run.
func TestClaimAndCompleteKeepTheirIndexesAfterAnIdleSpell(t *testing.T) {
	ctx := context.Background()
	s := drainedStore(t)
	db := s.DB()
	db.SetMaxOpenConns(1) // one session: the one whose plans are kept
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	enqueue := func(n int) {
		t.Helper()
		for i := range n {
			if _, _, err := s.Enqueue(ctx, NewItem{Name: "w", Payload: []byte(`{}`), NextAt: now, Now: now}); err != nil {
				t.Fatalf("enqueue %d: %v", i, err)
			}
		}
	}
	done := func(cl []Claimed) []Completion {
		cs := make([]Completion, len(cl))
		for i, c := range cl {
			cs[i] = Completion{Fence: c.Fence(), State: StateSucceeded, Outcome: OutcomeSucceeded, StartedAt: now, EndedAt: now}
		}
		return cs
	}
	// round claims up to limit items alone, extends their leases, sweeps, looks for an item to
	// run alone, completes the items with the next claim, then completes what that claimed
	// alone: every statement of the loop and of the leases, each once.
	round := func(limit int) {
		t.Helper()
		cl := must[[]Claimed](t)(s.Claim(ctx, "w1", now, time.Hour, limit))
		ids := make([]ItemID, len(cl))
		for i, c := range cl {
			ids[i] = c.ID
		}
		if err := s.Extend(ctx, "w1", ids, now.Add(2*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Sweep(ctx, now); err != nil {
			t.Fatal(err)
		}
		if _, err := s.IsolatedDue(ctx, now); err != nil {
			t.Fatal(err)
		}
		_, next, err := s.CompleteAndClaim(ctx, done(cl), "w1", now, time.Hour, limit, false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Complete(ctx, done(next)); err != nil {
			t.Fatal(err)
		}
	}
	// The idle spell: an item now and then, on a table the statistics say is empty.
	for range 8 {
		enqueue(2)
		round(1)
	}
	// The burst.
	enqueue(2_000)
	before := flushedSeqScansOf(t, db, "switchboard_items")
	for range 5 {
		round(32)
	}
	for range 8 {
		round(1) // a one-worker scheduler's round trips
	}
	if scans := flushedSeqScansOf(t, db, "switchboard_items") - before; scans > 0 {
		t.Errorf("13 rounds of claims and completions beside 2,000 pending items scanned the items' table whole %d times: their plans must use the indexes", scans)
	}
	// Each statement keeps one plan: none is planned anew on every run (with scans off alone,
	// the completion of one item was, 0.55 ms a run).
	rows, err := db.QueryContext(ctx, `SELECT statement, custom_plans FROM pg_prepared_statements WHERE custom_plans > 5`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var stmt string
		var custom int64
		if err := rows.Scan(&stmt, &custom); err != nil {
			t.Fatal(err)
		}
		t.Errorf("planned anew %d times: %.80s…", custom, stmt)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// flushedSeqScans returns the sequential scans of switchboard_items the server has counted,
// after db's connection (the test's one session) flushed its own counts.
func flushedSeqScans(t *testing.T, db *sql.DB) int64 {
	return flushedSeqScansOf(t, db, "switchboard_items")
}

// flushedSeqScansOf is flushedSeqScans of table.
func flushedSeqScansOf(t *testing.T, db *sql.DB, table string) int64 {
	t.Helper()
	if _, err := db.Exec("SELECT pg_stat_force_next_flush()"); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := db.QueryRow("SELECT seq_scan FROM pg_stat_user_tables WHERE relid = $1::regclass", table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestReadsKeepTheirIndexesAfterAnIdleSpell: the reads that run now and then (the listings of
// items and dead letters and the counts a dashboard polls every few seconds, an item, its
// attempts, a letter and its events for an operator, a lookup by token or text) kept the plans
// their connection made while the tables were empty and analyzed (a drained queue, a new one's
// letters): once a burst filled them, each read scanned a whole table (a listing of items 20 to
// 30 ms beside 40,000 items, seconds beside millions; a lookup by id every item). The test
// reads through an idle spell on one connection, fills the tables, reads again, and counts the
// sequential scans of each table.
func TestReadsKeepTheirIndexesAfterAnIdleSpell(t *testing.T) {
	ctx := context.Background()
	s := drainedStore(t)
	db := s.DB()
	db.SetMaxOpenConns(1) // one session: the one whose plans are kept
	tables := []string{"switchboard_items", "switchboard_attempts", "switchboard_dead_letters", "switchboard_dead_letter_events",
		"switchboard_audit"}
	for _, table := range tables {
		if _, err := db.Exec(`VACUUM ANALYZE ` + table); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`ALTER TABLE ` + table + ` SET (autovacuum_enabled = false)`); err != nil {
			t.Fatal(err) // the burst is not analyzed while the test runs
		}
	}
	items := map[string]ItemQuery{
		"pending": {State: StatePending, Limit: 51}, "running": {State: StateRunning, Limit: 51},
		"parked": {State: StatePending, Parked: true, Limit: 51}, "succeeded": {State: StateSucceeded, Limit: 51},
		"dead": {State: StateDead, Limit: 51}, "pending by name": {State: StatePending, Name: "w", Limit: 51},
	}
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	read := func() {
		t.Helper()
		for name, q := range items {
			if _, err := s.ListItems(ctx, q); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		if _, _, err := s.DeadLetters(ctx, DeadLetterFilter{Status: DeadLetterFailed, Limit: 50, CountLimit: 10_000}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Stats(ctx, now, 10_000); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.DeadLetterCounts(ctx, 10_000); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Item(ctx, 20_001); err != nil && !errors.Is(err, sql.ErrNoRows) {
			t.Fatal(err)
		}
		if _, err := s.ItemByToken(ctx, "b20001"); err != nil && !errors.Is(err, sql.ErrNoRows) {
			t.Fatal(err)
		}
		if _, err := s.Attempts(ctx, 20_001); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.DeadLetter(ctx, 20_001); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Events(ctx, 20_001); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.FindItems(ctx, "b20001", 10); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Audit(ctx, AuditQuery{TargetKind: "item", Target: "7", Limit: 50}); err != nil {
			t.Fatal(err)
		}
	}
	for range 8 {
		read() // the idle spell
	}
	for _, insert := range []string{`INSERT INTO switchboard_items (name, payload, state, next_at, created_at, updated_at, token, lease_until, lease_owner)
		SELECT 'w', '\x7b7d', CASE WHEN g % 2 = 0 THEN 'pending' ELSE 'running' END, g, g, g, 'b' || g, g, 'o' FROM generate_series(1, 40000) g`,
		`INSERT INTO switchboard_attempts (item_id, attempt, instance, started_at, ended_at, outcome, error)
		SELECT g, 1, 'o', g, g, 'failed', 'boom' FROM generate_series(1, 40000) g`,
		`INSERT INTO switchboard_dead_letters (source, name, item_key, payload, error, status, retry_count, created_at, updated_at)
		SELECT 'sync', 'w', '', '\x7b7d', 'boom', 'failed', 0, g, g FROM generate_series(1, 40000) g`,
		`INSERT INTO switchboard_dead_letter_events (dead_letter_id, kind, actor, started_at, ended_at, outcome)
		SELECT g, 'replay', 'op', g, g, 'still_failed' FROM generate_series(1, 40000) g`,
		`INSERT INTO switchboard_audit (at, actor, action, target_kind, target, outcome)
		SELECT g, 'op', 'cancel', 'item', g::text, 'done' FROM generate_series(1, 40000) g`} {
		if _, err := db.Exec(insert); err != nil {
			t.Fatal(err)
		}
	}
	before := map[string]int64{}
	for _, table := range tables {
		before[table] = flushedSeqScansOf(t, db, table)
	}
	read()
	for _, table := range tables {
		if n := flushedSeqScansOf(t, db, table) - before[table]; n > 0 {
			t.Errorf("the reads scanned %s whole %d times beside 40,000 rows: their plans must use the indexes", table, n)
		}
	}
}

// TestTokenCheckUsesItsIndexOnADrainedTable: the trigger that keeps a token unique across the
// live and the finished items looks each table up by its token index, however empty the live
// table was when its plan was made. A queue that drained to nothing and was analyzed (as
// autovacuum does after the deletes of a drain) made the trigger's cached plan a sequential
// scan of the live table, so that an outbox transaction enqueuing a batch read the whole table
// once per item (quadratic: 8,000 items took six seconds), and every later enqueue of the same
// connection did so until the table was analyzed again. The transaction's own statistics
// (pg_stat_xact_user_tables) count the scans of the items' tables.
func TestTokenCheckUsesItsIndexOnADrainedTable(t *testing.T) {
	ctx := context.Background()
	s := drainedStore(t)
	db := s.DB()
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

// drainedStore opens a store on a new PostgreSQL schema whose items' tables are empty and
// analyzed, as autovacuum leaves a queue that drained (the test is skipped without a server).
func drainedStore(t *testing.T) *Store {
	t.Helper()
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	s := postgresBackend(t, dsn).open(t)
	for _, table := range []string{"switchboard_items", "switchboard_finished_items"} {
		if _, err := s.DB().Exec("VACUUM (ANALYZE) " + table); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// TestEnqueueTxLookupsKeepTheirIndexesAfterAnIdleSpell: in an application's transaction
// (EnqueueTx) the enqueue's conflict lookups (the item holding a token, the item holding a dedupe
// key) run on the application's connection, which keeps a plan of each after a few runs. Planned
// while the items' table was empty and analyzed, as a drained queue is, those plans scanned the
// table whole, and kept doing so once a burst filled it (every conflicting enqueue of an outbox
// read every item). The test looks conflicts up on one connection through an idle spell, fills
// the table, looks them up again and counts the sequential scans of the items' tables.
func TestEnqueueTxLookupsKeepTheirIndexesAfterAnIdleSpell(t *testing.T) {
	ctx := context.Background()
	s := drainedStore(t)
	db := s.DB()
	db.SetMaxOpenConns(1) // one session: the application's connection, whose plans are kept
	for _, table := range []string{"switchboard_items", "switchboard_finished_items"} {
		if _, err := db.Exec(`ALTER TABLE ` + table + ` SET (autovacuum_enabled = false)`); err != nil {
			t.Fatal(err) // the burst is not analyzed while the test runs
		}
	}
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	held := NewItem{Name: "w", Payload: []byte(`{}`), NextAt: now.Add(time.Hour), Now: now, Token: "held-token", DedupeKey: "held-key"}
	conflicts := func(tx *sql.Tx, n int) {
		t.Helper()
		for i := range n {
			for _, it := range []NewItem{{Name: "w", Payload: []byte(`{}`), NextAt: now, Now: now, Token: held.Token},
				{Name: "w", Payload: []byte(`{}`), NextAt: now, Now: now, DedupeKey: held.DedupeKey}} {
				if _, existed, err := s.EnqueueTx(ctx, tx, it); err != nil || !existed {
					t.Fatalf("conflict %d (token %q, dedupe key %q): existed %v, %v", i, it.Token, it.DedupeKey, existed, err)
				}
			}
		}
	}
	inTx := func(fn func(tx *sql.Tx)) {
		t.Helper()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		fn(tx)
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	// The idle spell: one item, its token and key looked up ten times each.
	inTx(func(tx *sql.Tx) {
		if _, existed, err := s.EnqueueTx(ctx, tx, held); err != nil || existed {
			t.Fatalf("enqueue: existed %v, %v", existed, err)
		}
		conflicts(tx, 10)
	})
	// The burst, and the items it finished, left unanalyzed.
	for _, insert := range []string{`INSERT INTO switchboard_items (name, payload, state, next_at, created_at, updated_at, token, dedupe_key)
		SELECT 'w', '\x7b7d', 'pending', g, g, g, 'burst-' || g, 'key-' || g FROM generate_series(1, 20000) g`,
		`INSERT INTO switchboard_finished_items (id, name, payload, state, next_at, created_at, updated_at, token)
		SELECT g, 'w', '\x7b7d', 'succeeded', g, g, g, 'done-' || g FROM generate_series(1000001, 1020000) g`} {
		if _, err := db.Exec(insert); err != nil {
			t.Fatal(err)
		}
	}
	inTx(func(tx *sql.Tx) {
		// The application's own setting, which the lookups must leave as they found it.
		if _, err := tx.Exec(`SET LOCAL plan_cache_mode = force_generic_plan`); err != nil {
			t.Fatal(err)
		}
		before := seqScans(t, tx)
		conflicts(tx, 10)
		after := seqScans(t, tx)
		var mode string
		if err := tx.QueryRow(`SHOW plan_cache_mode`).Scan(&mode); err != nil || mode != "force_generic_plan" {
			t.Errorf("the transaction's plan_cache_mode after the lookups: %q, %v; want the application's force_generic_plan", mode, err)
		}
		for table, n := range after {
			if scans := n - before[table]; scans > 0 {
				t.Errorf("20 conflicting enqueues in an application's transaction scanned %s whole %d times: their lookups must use the indexes", table, scans)
			}
		}
	})
}
