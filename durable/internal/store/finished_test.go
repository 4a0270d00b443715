package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable/record"
)

// tableOf returns the table that holds item id on PostgreSQL: "live", "finished" or "" (none).
func tableOf(t *testing.T, s *Store, id ItemID) string {
	t.Helper()
	var live, finished int
	if err := s.DB().QueryRow(`SELECT (SELECT COUNT(*) FROM switchboard_items WHERE id = $1),
	(SELECT COUNT(*) FROM switchboard_finished_items WHERE id = $1)`, int64(id)).Scan(&live, &finished); err != nil {
		t.Fatal(err)
	}
	switch {
	case live == 1 && finished == 0:
		return "live"
	case live == 0 && finished == 1:
		return "finished"
	case live == 0 && finished == 0:
		return ""
	}
	t.Fatalf("item %d is in both tables", id)
	return ""
}

// TestFinishedItemsLeaveTheClaimsTable: on PostgreSQL a succeeded, a dead and a cancelled item
// are moved out of the claim's table by the statement that finishes them, while a pending item
// backing off and a succeeded item holding its dedupe key's window stay; on every engine each
// is read as before (by id, token and reference, listed, counted, its attempts and its dead
// letter), and a finished item's token and a held key still refuse a second enqueue.
func TestFinishedItemsLeaveTheClaimsTable(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := b.open(t)
		now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
		enqueue := func(n NewItem) ItemID {
			t.Helper()
			n.Name, n.Payload, n.NextAt, n.Now = "w", []byte(`{}`), now, now
			id, existed, err := s.Enqueue(ctx, n)
			if err != nil || existed {
				t.Fatalf("enqueue %+v: existed %v, %v", n, existed, err)
			}
			return id
		}
		ok := enqueue(NewItem{Token: "t-ok", Reference: "order-1"})
		held := enqueue(NewItem{Token: "t-held", DedupeKey: "k-held", UniqueFor: time.Hour})
		dies := enqueue(NewItem{Token: "t-dies", Reference: "order-3", DedupeKey: "k-dies"})
		retried := enqueue(NewItem{Token: "t-retried"})
		cancelled := enqueue(NewItem{Token: "t-cancelled", DedupeKey: "k-cancelled"})
		if _, changed, _, err := s.CancelItem(ctx, ItemChange{ID: cancelled, Now: now, Audit: func(changed bool, it Item, _ *PauseRow) AuditRow {
			return AuditRow{At: now, Actor: "op", Action: "cancel", TargetKind: "item", Target: fmt.Sprint(it.ID), Outcome: record.AuditOutcome(fmt.Sprint(changed))}
		}}); err != nil || !changed {
			t.Fatalf("cancel: changed %v, %v", changed, err)
		}
		cl := must[[]Claimed](t)(s.Claim(ctx, "w1", now, time.Hour, 10))
		if len(cl) != 4 {
			t.Fatalf("claimed %d items, want 4", len(cl))
		}
		end := now.Add(time.Second)
		var cs []Completion
		for _, c := range cl {
			cp := Completion{Fence: c.Fence(), State: StateSucceeded, Outcome: OutcomeSucceeded, StartedAt: now, EndedAt: end}
			switch c.ID {
			case dies:
				cp.State, cp.Outcome, cp.Error, cp.Cause = StateDead, OutcomeFailed, "boom", record.DeadPermanent
			case retried:
				cp.State, cp.Outcome, cp.Error, cp.NextAt = StatePending, OutcomeFailed, "again", end.Add(time.Minute)
			}
			cs = append(cs, cp)
		}
		errs, err := s.Complete(ctx, cs)
		if err != nil {
			t.Fatal(err)
		}
		for i, err := range errs {
			if err != nil {
				t.Fatalf("completion %d: %v", i, err)
			}
		}

		if b.name == "postgres" {
			for id, want := range map[ItemID]string{ok: "finished", held: "live", dies: "finished", retried: "live", cancelled: "finished"} {
				if got := tableOf(t, s, id); got != want {
					t.Errorf("item %d is in the %s table, want %s", id, got, want)
				}
			}
		}
		for id, want := range map[ItemID]State{ok: StateSucceeded, held: StateSucceeded, dies: StateDead, retried: StatePending, cancelled: StateCancelled} {
			it := must[Item](t)(s.Item(ctx, id))
			if it.State != want || it.LeaseOwner != "" {
				t.Errorf("item %d: state %s, lease owner %q; want %s and none", id, it.State, it.LeaseOwner, want)
			}
		}
		if it := must[Item](t)(s.Item(ctx, dies)); it.LastError != "boom" || it.Attempts != 1 || !it.UpdatedAt.Equal(end) {
			t.Errorf("dead item: last error %q, %d attempts, updated %v", it.LastError, it.Attempts, it.UpdatedAt)
		}
		if it := must[Item](t)(s.ItemByToken(ctx, "t-ok")); it.ID != ok || it.Reference != "order-1" {
			t.Errorf("by token: %+v", it)
		}
		att := must[[]Attempt](t)(s.Attempts(ctx, ok))
		if len(att) != 1 || att[0].Outcome != OutcomeSucceeded || att[0].Instance != "w1" || !att[0].EndedAt.Equal(end) {
			t.Errorf("attempts of the succeeded item: %+v", att)
		}
		items, letters, err := s.FindItems(ctx, "order-3", 10)
		if err != nil || len(items) != 1 || items[0].ID != dies || len(letters) != 1 || letters[0].Error != "boom" {
			t.Errorf("find order-3: %d items, %d letters, %v", len(items), len(letters), err)
		}
		listed := must[[]Item](t)(s.ListItems(ctx, ItemQuery{State: StateSucceeded, Limit: 10}))
		if len(listed) != 2 {
			t.Errorf("listed %d succeeded items, want 2", len(listed))
		}
		st := must[Stats](t)(s.Stats(ctx, end, 1000))
		if st.Counts[StateSucceeded] != 2 || st.Counts[StateDead] != 1 || st.Counts[StateCancelled] != 1 || st.Counts[StatePending] != 1 {
			t.Errorf("stats: %v", st.Counts)
		}
		// A token is unique among finished items too; a key in its window stays held.
		if id, existed, err := s.Enqueue(ctx, NewItem{Name: "w", Payload: []byte(`{}`), NextAt: end, Now: end, Token: "t-ok"}); err != nil || !existed || id != ok {
			t.Errorf("enqueue of a finished item's token: id %d (want %d), existed %v, %v", id, ok, existed, err)
		}
		if id, existed, err := s.Enqueue(ctx, NewItem{Name: "w", Payload: []byte(`{}`), NextAt: end, Now: end, DedupeKey: "k-held"}); err != nil || !existed || id != held {
			t.Errorf("enqueue of a held key: id %d (want %d), existed %v, %v", id, held, existed, err)
		}
		// A dead or cancelled item holds no key.
		for _, k := range []string{"k-dies", "k-cancelled"} {
			if _, existed, err := s.Enqueue(ctx, NewItem{Name: "w", Payload: []byte(`{}`), NextAt: end, Now: end, DedupeKey: k}); err != nil || existed {
				t.Errorf("enqueue of key %s: existed %v, %v", k, existed, err)
			}
		}
	})
}

// TestFinishedColumnsAreTheItemsColumns: the finished items' table has the claim's table's
// columns in its order, and the statements that move items list them all.
func TestFinishedColumnsAreTheItemsColumns(t *testing.T) {
	s := postgresOnly(t)
	columns := func(table string) string {
		rows, err := s.DB().Query(`SELECT column_name FROM information_schema.columns
	WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`, table)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var cols []string
		for rows.Next() {
			var c string
			if err := rows.Scan(&c); err != nil {
				t.Fatal(err)
			}
			cols = append(cols, c)
		}
		return strings.Join(cols, ", ")
	}
	for _, table := range []string{"switchboard_items", "switchboard_finished_items", "switchboard_items_all"} {
		if got := columns(table); got != finishedColumns {
			t.Errorf("%s has columns\n%s\nwant (finishedColumns)\n%s", table, got, finishedColumns)
		}
	}
	insert := squeeze("INSERT INTO switchboard_finished_items (" + finishedColumns + ")")
	for name, q := range map[string]string{"postgresComplete": postgresComplete, "postgresCancel": postgresCancel, "postgresMoveFinished": postgresMoveFinished} {
		if !strings.Contains(squeeze(q), insert) {
			t.Errorf("%s does not insert every column of the finished items", name)
		}
	}
}

// postgresOnly returns a store on a schema of its own of the PostgreSQL test server; the test
// skips without one.
func postgresOnly(t *testing.T) *Store {
	t.Helper()
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	return postgresBackend(t, dsn).open(t)
}

func squeeze(s string) string { return strings.Join(strings.Fields(s), " ") }

// TestMoveFinishedMovesWhatFinishedBefore: the items that finished in the claim's table (before
// the migration that moves them, or by an instance of an earlier version) are moved a batch at
// a time, but for a succeeded item holding its key; they read the same before and after.
func TestMoveFinishedMovesWhatFinishedBefore(t *testing.T) {
	s, ctx, now := postgresOnly(t), context.Background(), time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	var ids []ItemID
	for i := range PruneBatch + 3 {
		n := NewItem{Name: "w", Payload: []byte(`{}`), NextAt: now, Now: now, Token: fmt.Sprint("t", i)}
		if i == 0 {
			n.DedupeKey, n.UniqueFor = "k", time.Hour
		}
		ids = append(ids, must[ItemID](t)(func() (ItemID, error) { id, _, err := s.Enqueue(ctx, n); return id, err }()))
	}
	// As an instance of the version before left them: finished in place.
	if _, err := s.DB().Exec(`UPDATE switchboard_items SET state = CASE WHEN id % 3 = 0 THEN 'dead' WHEN id % 3 = 1 THEN 'cancelled' ELSE 'succeeded' END`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().Exec(`UPDATE switchboard_items SET state = 'succeeded' WHERE id = $1`, int64(ids[0])); err != nil {
		t.Fatal(err)
	}
	before := must[Item](t)(s.Item(ctx, ids[1]))
	if n, busy, err := s.MoveFinished(ctx); err != nil || busy || n != PruneBatch {
		t.Fatalf("first batch: moved %d, busy %v, %v; want %d", n, busy, err, PruneBatch)
	}
	if n, busy, err := s.MoveFinished(ctx); err != nil || busy || n != 2 {
		t.Fatalf("second batch: moved %d, busy %v, %v; want 2", n, busy, err)
	}
	if n, _, err := s.MoveFinished(ctx); err != nil || n != 0 {
		t.Fatalf("third batch: moved %d, %v; want 0", n, err)
	}
	if got := tableOf(t, s, ids[0]); got != "live" {
		t.Errorf("the item holding its key is in the %s table", got)
	}
	for _, id := range ids[1:] {
		if got := tableOf(t, s, id); got != "finished" {
			t.Fatalf("item %d is in the %s table", id, got)
		}
	}
	after := must[Item](t)(s.Item(ctx, ids[1]))
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Errorf("moved item reads\n%+v\nwas\n%+v", after, before)
	}
	// Held by another instance's prune lock: busy, nothing moved.
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	var locked bool
	if err := tx.QueryRow(pruneLockSQL).Scan(&locked); err != nil || !locked {
		t.Fatalf("prune lock: %v %v", locked, err)
	}
	if n, busy, err := s.MoveFinished(ctx); err != nil || !busy || n != 0 {
		t.Errorf("while another holds the lock: moved %d, busy %v, %v", n, busy, err)
	}
}

// TestTokenOfAnItemBeingMovedIsNotTakenTwice: an enqueue whose token is held by an item a
// completion is moving out of the claim's table (the move not committed yet) inserts nothing
// and reports that item without waiting for the move; once the move committed, the same.
func TestTokenOfAnItemBeingMovedIsNotTakenTwice(t *testing.T) {
	s, ctx, now := postgresOnly(t), context.Background(), time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	id, _, err := s.Enqueue(ctx, NewItem{Name: "w", Payload: []byte(`{}`), NextAt: now, Now: now, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	// The move, left uncommitted: as a completion's statement would make it.
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.Exec(postgresCancel, micros(now), int64(id)); err != nil {
		t.Fatal(err)
	}
	enqueue := func() {
		t.Helper()
		// Bounded: an insert that waited for the mover would wait for this test.
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		got, existed, err := s.Enqueue(wctx, NewItem{Name: "w", Payload: []byte(`{}`), NextAt: now, Now: now, Token: "tok"})
		if err != nil || !existed || got != id {
			t.Fatalf("enqueue of the moved item's token: id %d (want %d), existed %v, %v", got, id, existed, err)
		}
	}
	enqueue()
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	enqueue()
	var n int
	if err := s.DB().QueryRow(`SELECT COUNT(*) FROM switchboard_items_all WHERE token = 'tok'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d items hold the token, %v", n, err)
	}
}

// TestOpenTransactionWithATakenTokenHoldsNoCompletion: an application's transaction that
// enqueued the token of a running item and stays open does not hold up that item's completion
// (which moves it out of the claim's table) nor a cancel of a pending item with a taken token.
func TestOpenTransactionWithATakenTokenHoldsNoCompletion(t *testing.T) {
	s, ctx, now := postgresOnly(t), context.Background(), time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	run, _, err := s.Enqueue(ctx, NewItem{Name: "w", Payload: []byte(`{}`), NextAt: now, Now: now, Token: "run"})
	if err != nil {
		t.Fatal(err)
	}
	cl := must[[]Claimed](t)(s.Claim(ctx, "w1", now, time.Hour, 1))
	pending, _, err := s.Enqueue(ctx, NewItem{Name: "w", Payload: []byte(`{}`), NextAt: now.Add(time.Hour), Now: now, Token: "later"})
	if err != nil || len(cl) != 1 || cl[0].ID != run {
		t.Fatalf("claim: %v, %v", cl, err)
	}
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	for tok, want := range map[string]ItemID{"run": run, "later": pending} {
		if got, existed, err := s.EnqueueTx(ctx, tx, NewItem{Name: "w", Payload: []byte(`{}`), NextAt: now, Now: now, Token: tok}); err != nil || !existed || got != want {
			t.Fatalf("EnqueueTx of token %s: %d (want %d), existed %v, %v", tok, got, want, existed, err)
		}
	}
	// With the transaction still open: a lock it held would make these wait for it.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	errs, err := s.Complete(wctx, []Completion{{Fence: cl[0].Fence(), State: StateSucceeded, Outcome: OutcomeSucceeded, StartedAt: now, EndedAt: now}})
	if err != nil || errs[0] != nil {
		t.Fatalf("completion while the transaction is open: %v %v", errs, err)
	}
	if _, changed, _, err := s.CancelItem(wctx, ItemChange{ID: pending, Now: now, Audit: func(changed bool, it Item, _ *PauseRow) AuditRow {
		return AuditRow{At: now, Actor: "op", Action: "cancel", TargetKind: "item", Target: fmt.Sprint(it.ID), Outcome: record.AuditOutcome(fmt.Sprint(changed))}
	}}); err != nil || !changed {
		t.Fatalf("cancel while the transaction is open: changed %v, %v", changed, err)
	}
	for _, id := range []ItemID{run, pending} {
		if got := tableOf(t, s, id); got != "finished" {
			t.Errorf("item %d is in the %s table", id, got)
		}
	}
}

// TestMoveFinishedReadsOnlyFinishedItems: a batch of the move finds the finished items through
// their states' partial indexes, beside a backlog of pending items; it read the whole claim's
// table at every pass (the three states at once matched none of the indexes).
func TestMoveFinishedReadsOnlyFinishedItems(t *testing.T) {
	s, ctx := postgresOnly(t), context.Background()
	db := s.DB()
	const pending = 20_000
	mustExec(t, db, `INSERT INTO switchboard_items (name, payload, state, next_at, created_at, updated_at, token)
		SELECT 'w', '\x7b7d', 'pending', g, g, g, 'p' || g FROM generate_series(1, $1) g`, pending)
	// As an instance of a version before the finished items' table left them: finished in place.
	mustExec(t, db, `INSERT INTO switchboard_items (name, payload, state, next_at, created_at, updated_at, token)
		SELECT 'w', '\x7b7d', s, 1, 1, 1, 'f' || s FROM unnest(ARRAY['succeeded', 'dead', 'cancelled']) s`)
	mustExec(t, db, `VACUUM ANALYZE switchboard_items`)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`SET LOCAL plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	buffers, _ := planBuffers(t, tx, postgresMoveFinished, PruneBatch)
	_ = tx.Rollback()
	// Three partial indexes' pages, the three rows and their indexes, and the finished table's
	// (the whole table is some four hundred pages).
	if buffers > 80 {
		t.Errorf("a batch of the move read %d buffers beside %d pending items; want the three finished rows through their indexes", buffers, pending)
	}
	if n, busy, err := s.MoveFinished(ctx); err != nil || busy || n != 3 {
		t.Errorf("MoveFinished: moved %d, busy %v, %v; want the 3 finished items", n, busy, err)
	}
}
