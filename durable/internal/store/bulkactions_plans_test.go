package store

import (
	"strings"
	"testing"
)

// The statements a bulk action runs for every poll and every batch probe indexes in their
// generic plans: the claim of an unfinished action (every instance, every poll) reads the
// partial index of unfinished actions, and the next letters, the live totals and the cursor's
// advance read a range of ids, over tables that grow without bound.
func TestBulkActionPlans(t *testing.T) {
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	s := postgresBackend(t, dsn).open(t)
	db := s.DB()
	f := DeadLetterFilter{Status: DeadLetterFailed, Source: "src3", ErrorContains: "err"}
	where, _ := deadLetterWhere(f)
	rb := func(q string) string { return s.e.rebind(q) }
	for _, q := range []string{
		`INSERT INTO switchboard_dead_letters (source, name, payload, error, status, created_at, updated_at)
		SELECT 'src' || (g % 20), 'n', '\x7b7d'::bytea, 'err ' || g, CASE WHEN g % 10 = 0 THEN 'failed' ELSE 'replayed' END, g, g
		FROM generate_series(1, 200000) g`,
		`INSERT INTO switchboard_bulk_actions (kind, filter, actor, state, rate, in_flight, max_letter, matched, created_at, updated_at, finished_at)
		SELECT 'replay', '{}', 'a', CASE WHEN g = 2000 THEN 'running' ELSE 'done' END, 50, 4, 200000, 100, g, g, CASE WHEN g = 2000 THEN NULL ELSE g END
		FROM generate_series(1, 2000) g`,
		`INSERT INTO switchboard_dead_letter_events (dead_letter_id, kind, actor, started_at, ended_at, outcome, bulk_action_id)
		SELECT g, 'replay', 'a', g, g, 'replayed', 1 + g / 100 FROM generate_series(1, 200000) g`,
		"ANALYZE switchboard_dead_letters", "ANALYZE switchboard_bulk_actions", "ANALYZE switchboard_dead_letter_events",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	// The claim reads the partial index of the unfinished actions whole, and that is its point:
	// it holds only them, however many actions have finished.
	claim := rb(`UPDATE switchboard_bulk_actions SET lease_owner = ?, lease_until = ?, updated_at = ?
	WHERE id = (SELECT id FROM switchboard_bulk_actions WHERE finished_at IS NULL AND (lease_until IS NULL OR lease_until <= ?) ORDER BY id LIMIT 1)
	  AND finished_at IS NULL AND (lease_until IS NULL OR lease_until <= ?) RETURNING ` + bulkActionColumns)
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	for _, q := range []string{"SET LOCAL plan_cache_mode = force_generic_plan", "PREPARE bulkclaim AS " + claim} {
		if _, err := tx.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	var plan string
	rows, err := tx.Query("EXPLAIN EXECUTE bulkclaim('o', 1, 1, 1, 1)")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan += line + "\n"
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plan, "Seq Scan") || strings.Count(plan, "switchboard_bulk_actions_open") != 2 {
		t.Errorf("bulk_claim: the generic plan does not read the index of unfinished actions:\n%s", plan)
	}
	for _, table := range []string{"switchboard_dead_letters", "switchboard_dead_letter_events", "switchboard_bulk_actions"} {
		planGuarded[table] = true
		defer delete(planGuarded, table)
	}
	assertIndexPlans(t, db, []planCase{
		{"bulk_letters", rb("SELECT " + deadLetterColumns + " FROM switchboard_dead_letters d" + where + ` AND id > ? AND id <= ?
	AND NOT EXISTS (SELECT 1 FROM switchboard_dead_letter_events e WHERE e.bulk_action_id = ? AND e.dead_letter_id = d.id AND e.outcome = ?)
	ORDER BY id LIMIT ?`), []any{"failed", "src3", "%err%", int64(150000), int64(200000), int64(2000), "still_failed", 100}, false, false, false},
		{"bulk_tally", rb(bulkTally), []any{int64(2000), int64(150000)}, false, false, false},
	}, nil)
}
