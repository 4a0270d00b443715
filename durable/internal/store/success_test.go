package store

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// TestSuccessRecordedOnItem: a success's attempt is recorded on its item, with an attempt id of
// its own, and Attempts lists it after the item's failed attempts as it listed the row; with
// SuccessRow the row is written too and listed once. On a fresh SQLite file the first attempt
// recorded is a success (the attempts' sequence has no row yet), and a later row still gets an
// id after it.
func TestSuccessRecordedOnItem(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := b.open(t)
		t0 := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
		claim := func(at time.Time) Claimed {
			t.Helper()
			cl, err := s.Claim(ctx, "w1", at, time.Minute, 1)
			if err != nil || len(cl) != 1 {
				t.Fatalf("claim at %v: %v, %v", at, cl, err)
			}
			return cl[0]
		}
		complete := func(c Completion) {
			t.Helper()
			res, err := s.Complete(ctx, []Completion{c})
			if err != nil || res[0] != nil {
				t.Fatalf("complete: %v, %v", res, err)
			}
		}
		rows := func(id ItemID) int {
			return countRows(t, s, "SELECT COUNT(*) FROM switchboard_attempts WHERE item_id = "+strconv.FormatInt(int64(id), 10))
		}

		// First: an item that succeeds at once, before any attempt row exists.
		first, _, err := s.Enqueue(ctx, NewItem{Name: "test.work", Payload: []byte(`{}`), NextAt: t0, Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		c := claim(t0)
		complete(Completion{Fence: c.Fence(), State: StateSucceeded, Outcome: OutcomeSucceeded, StartedAt: t0, EndedAt: t0.Add(3 * time.Millisecond)})
		as, err := s.Attempts(ctx, first)
		if err != nil || len(as) != 1 {
			t.Fatalf("attempts of the first item: %+v, %v", as, err)
		}
		a := as[0]
		if a.ID <= 0 || a.ItemID != first || a.Number != 1 || a.Instance != "w1" || a.Outcome != OutcomeSucceeded || a.Error != "" ||
			!a.StartedAt.Equal(t0) || !a.EndedAt.Equal(t0.Add(3*time.Millisecond)) {
			t.Fatalf("the first item's success: %+v", a)
		}
		if n := rows(first); n != 0 {
			t.Fatalf("%d attempt rows for a success; want it on its item", n)
		}

		// Second: a failed attempt (a row), then a success on the item.
		second, _, err := s.Enqueue(ctx, NewItem{Name: "test.work", Payload: []byte(`{}`), NextAt: t0, Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		t1 := t0.Add(time.Second)
		c = claim(t1)
		complete(Completion{Fence: c.Fence(), State: StatePending, NextAt: t1, Outcome: OutcomeFailed, Error: "boom", StartedAt: t1, EndedAt: t1})
		c = claim(t1.Add(time.Millisecond))
		complete(Completion{Fence: c.Fence(), State: StateSucceeded, Outcome: OutcomeSucceeded, StartedAt: t1, EndedAt: t1})
		as, err = s.Attempts(ctx, second)
		if err != nil || len(as) != 2 || as[0].Outcome != OutcomeFailed || as[0].Error != "boom" || as[1].Outcome != OutcomeSucceeded ||
			as[0].Number != 1 || as[1].Number != 2 {
			t.Fatalf("attempts of the second item: %+v, %v", as, err)
		}
		ids := map[int64]bool{a.ID: true}
		for _, x := range as {
			if ids[x.ID] {
				t.Fatalf("attempt id %d given twice: %+v and the first item's %+v", x.ID, as, a)
			}
			ids[x.ID] = true
		}
		if n := rows(second); n != 1 {
			t.Fatalf("%d attempt rows for a failure and a success; want the failure's", n)
		}

		// Third: a success asked to have its row (SuccessRow) is listed once.
		third, _, err := s.Enqueue(ctx, NewItem{Name: "test.work", Payload: []byte(`{}`), NextAt: t0, Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		c = claim(t1.Add(time.Second))
		complete(Completion{Fence: c.Fence(), State: StateSucceeded, Outcome: OutcomeSucceeded, StartedAt: t1, EndedAt: t1, SuccessRow: true})
		as, err = s.Attempts(ctx, third)
		if err != nil || len(as) != 1 || as[0].Outcome != OutcomeSucceeded || ids[as[0].ID] {
			t.Fatalf("attempts of the third item: %+v, %v", as, err)
		}
		if n := rows(third); n != 1 {
			t.Fatalf("%d attempt rows for a success with SuccessRow; want 1", n)
		}
	})
}

// TestAttemptIDBlocks: a SQLite pool reserves its successes' attempt ids a block at a time, the
// block becoming its own only when the transaction that reserved it commits: one rolled back
// leaves nothing reserved (the next reservation gets the same ids, which nothing used), one
// committed serves the next completions without a statement, and one that needs more than is
// left reserves a new block past the sequence.
func TestAttemptIDBlocks(t *testing.T) {
	ctx := context.Background()
	s := sqliteBackend(t).open(t)
	db := s.DB()
	var ids attemptIDs
	take := func(n int64, commit bool) int64 {
		t.Helper()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		first, done, err := ids.take(ctx, tx, n)
		if err != nil {
			t.Fatal(err)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
		done(commit)
		return first
	}
	seq := func() int64 {
		return int64(countRows(t, s, "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'switchboard_attempts'), 0)"))
	}
	if first := take(1, false); first != 1 || seq() != 0 {
		t.Fatalf("one id of no block: first %d, sequence %d; want 1 and nothing reserved", first, seq())
	}
	if first := take(2, false); first != 1 || seq() != 0 {
		t.Fatalf("a rolled back reservation: first %d, sequence %d; want 1 and nothing reserved", first, seq())
	}
	if first := take(2, true); first != 1 || seq() != 2+attemptIDBlock {
		t.Fatalf("a committed reservation: first %d, sequence %d; want 1 and %d", first, seq(), 2+attemptIDBlock)
	}
	if first := take(3, true); first != 3 || seq() != 2+attemptIDBlock {
		t.Fatalf("from the block: first %d, sequence %d; want 3, no new reservation", first, seq())
	}
	// 253 left of the block: more than that reserves a new block after the sequence.
	if first := take(attemptIDBlock, true); first != 3+attemptIDBlock || seq() != 2+3*attemptIDBlock {
		t.Fatalf("past the block: first %d, sequence %d; want %d and %d", first, seq(), 3+attemptIDBlock, 2+3*attemptIDBlock)
	}
}
