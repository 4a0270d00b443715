package store

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"
)

// TestStatsCountsEachStateUpToItsLimit: Stats counts each state up to its limit and names the
// states over it, CountStates counts them in full, and both refuse what is not a count, on
// every engine.
func TestStatsCountsEachStateUpToItsLimit(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := b.open(t)
		now := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
		for range 9 {
			if _, _, err := s.Enqueue(ctx, NewItem{Name: "w", NextAt: now, Now: now}); err != nil {
				t.Fatal(err)
			}
		}
		claimed := must[[]Claimed](t)(s.Claim(ctx, "w1", now, time.Minute, 5))
		for _, c := range claimed[:4] {
			must[[]error](t)(s.Complete(ctx, []Completion{{Fence: c.Fence(), State: StateSucceeded, Outcome: OutcomeSucceeded, StartedAt: now, EndedAt: now}}))
		}
		// 4 pending, 1 running, 4 succeeded.
		st := must[Stats](t)(s.Stats(ctx, now, 3))
		want := map[State]int64{StatePending: 4, StateRunning: 1, StateSucceeded: 4, StateDead: 0, StateCancelled: 0}
		for state, n := range want {
			if st.Counts[state] != n {
				t.Errorf("Stats(limit 3) counts %s %d, want %d (the limit plus one over it)", state, st.Counts[state], n)
			}
		}
		if len(st.Over) != 2 || !st.Over[StatePending] || !st.Over[StateSucceeded] {
			t.Errorf("Stats(limit 3) Over = %v, want pending and succeeded", st.Over)
		}
		st = must[Stats](t)(s.Stats(ctx, now, 4))
		if st.Counts[StatePending] != 4 || len(st.Over) != 0 {
			t.Errorf("Stats(limit 4): %v over %v, want 4 pending and none over", st.Counts, st.Over)
		}
		full := must[map[State]int64](t)(s.CountStates(ctx, []State{StatePending, StateSucceeded, StateDead}))
		if len(full) != 3 || full[StatePending] != 4 || full[StateSucceeded] != 4 || full[StateDead] != 0 {
			t.Errorf("CountStates = %v, want 4 pending, 4 succeeded, 0 dead", full)
		}
		if _, err := s.Stats(ctx, now, 0); err == nil || !strings.Contains(err.Error(), "limit is 0") {
			t.Errorf("Stats(limit 0): %v, want an error naming the limit", err)
		}
		if _, err := s.CountStates(ctx, []State{"finished"}); err == nil || !strings.Contains(err.Error(), `"finished" is not an item state`) {
			t.Errorf("CountStates(finished): %v, want an error naming the state", err)
		}
	})
}

// TestStatsReadsAtMostItsLimit: beside thousands of finished items, Stats' bounded count reads
// a few pages of each state's index, not the tables, in the plan PostgreSQL keeps for it
// (generic) and in SQLite's. Through the view of both tables, the pending and running counts
// scanned the finished table whole: it has no index for them.
func TestStatsReadsAtMostItsLimit(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := b.open(t)
		db := s.DB()
		const finished = 20_000
		if b.engine == Postgres {
			mustExec(t, db, `INSERT INTO switchboard_finished_items (id, name, payload, state, next_at, created_at, updated_at, token)
				SELECT g, 'w', '\x7b7d', CASE WHEN g % 10 = 0 THEN 'dead' ELSE 'succeeded' END, g, g, g, 'f' || g
				FROM generate_series(1, $1) g`, finished)
			mustExec(t, db, `VACUUM ANALYZE switchboard_finished_items`)
		} else {
			mustExec(t, db, `WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?)
				INSERT INTO switchboard_items (name, payload, state, next_at, created_at, updated_at, token)
				SELECT 'w', x'7b7d', CASE WHEN n % 10 = 0 THEN 'dead' ELSE 'succeeded' END, n, n, n, 'f' || n FROM g`, finished)
			mustExec(t, db, `ANALYZE`)
		}
		const limit = 10
		st := must[Stats](t)(s.Stats(ctx, time.Now(), limit))
		if st.Counts[StateSucceeded] != limit+1 || st.Counts[StateDead] != limit+1 || !st.Over[StateSucceeded] || !st.Over[StateDead] {
			t.Errorf("Stats: %v over %v, want succeeded and dead over the limit", st.Counts, st.Over)
		}
		args := []any{limit + 1, limit + 1, limit + 1, limit + 1, limit + 1}
		if b.engine == Postgres {
			conn := must[*sql.Conn](t)(db.Conn(ctx))
			defer conn.Close()
			mustExecConn(t, conn, "SET plan_cache_mode = force_generic_plan")
			buffers, _ := planBuffers(t, conn, Postgres.rebind(boundedCountsSQL), args...)
			// Each of the five counts reads its index's root and a leaf or two, on each table.
			if buffers > 40 {
				t.Errorf("the bounded count read %d buffers beside %d finished items, want a few per state", buffers, finished)
			}
			return
		}
		plan := sqlitePlan(t, db, boundedCountsSQL, args...)
		for _, detail := range plan {
			if strings.HasPrefix(detail, "SCAN switchboard_items") && !strings.Contains(detail, "INDEX") {
				t.Errorf("the bounded count scans the table: %s", detail)
			}
		}
		t.Logf("plan: %s", strings.Join(plan, "; "))
	})
}

// mustExec runs a statement of a test's setup on db.
func mustExec(t testing.TB, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// mustExecConn runs a statement of a test's setup on conn.
func mustExecConn(t *testing.T, conn *sql.Conn, q string) {
	t.Helper()
	if _, err := conn.ExecContext(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// TestDeadLetterCountsUpToTheirLimit: DeadLetterCounts counts each status up to its limit and
// names those over it, CountLetterStatuses counts them in full, on every engine.
func TestDeadLetterCountsUpToTheirLimit(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := b.open(t)
		now := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
		for range 5 {
			must[DeadLetterID](t)(s.InsertDeadLetter(ctx, NewDeadLetter{Source: "batch", Name: "w", Payload: []byte(`{}`), Error: "boom", Now: now}))
		}
		counts, over, err := s.DeadLetterCounts(ctx, 4)
		if err != nil || counts[DeadLetterFailed] != 5 || counts[DeadLetterReplayed] != 0 || len(counts) != 3 || len(over) != 1 || !over[DeadLetterFailed] {
			t.Errorf("DeadLetterCounts(limit 4) of 5 failed: %v over %v, %v; want 5 (the limit plus one), failed over, every status counted", counts, over, err)
		}
		if counts, over, err := s.DeadLetterCounts(ctx, 5); err != nil || counts[DeadLetterFailed] != 5 || len(over) != 0 {
			t.Errorf("DeadLetterCounts(limit 5): %v over %v, %v; want 5, none over", counts, over, err)
		}
		full := must[map[DeadLetterStatus]int](t)(s.CountLetterStatuses(ctx, []DeadLetterStatus{DeadLetterFailed, DeadLetterDiscarded}))
		if len(full) != 2 || full[DeadLetterFailed] != 5 || full[DeadLetterDiscarded] != 0 {
			t.Errorf("CountLetterStatuses = %v, want 5 failed, 0 discarded", full)
		}
		if _, _, err := s.DeadLetterCounts(ctx, 0); err == nil || !strings.Contains(err.Error(), "limit is 0") {
			t.Errorf("DeadLetterCounts(limit 0): %v, want an error naming the limit", err)
		}
		if _, err := s.CountLetterStatuses(ctx, []DeadLetterStatus{"lost"}); err == nil || !strings.Contains(err.Error(), `"lost" is not a letter status`) {
			t.Errorf("CountLetterStatuses(lost): %v, want an error naming the status", err)
		}
		if b.engine == Postgres {
			// Through the listing index, which leads with the status: a few pages, not the table.
			buffers, _ := planBuffers(t, s.DB(), Postgres.rebind(boundedLetterCountsSQL), 2, 2, 2)
			if buffers > 12 {
				t.Errorf("the bounded letter count read %d buffers, want a few", buffers)
			}
		} else if plan := strings.Join(sqlitePlan(t, s.DB(), boundedLetterCountsSQL, 2, 2, 2), "; "); strings.Count(plan, "INDEX switchboard_dead_letters_list") != 3 {
			t.Errorf("the bounded letter count's plan %s, want the listing index for each status", plan)
		}
	})
}
