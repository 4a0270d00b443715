package store

import (
	"context"
	"testing"
	"time"
)

// A claim returns whether the deferral stored the item (NewItem.Deferred), whatever its last
// error says, and a claim undone (a refusal) leaves it as it was.
func TestClaimReturnsDeferred(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := b.open(t)
		deferred := must[ItemID](t)(first(s.Enqueue(ctx, NewItem{Name: "test.work", Payload: []byte("{}"), NextAt: pruneT0, Now: pruneT0,
			LastError: "down", Deferred: true})))
		refused := must[ItemID](t)(first(s.Enqueue(ctx, NewItem{Name: "test.work", Payload: []byte("{}"), NextAt: pruneT0, Now: pruneT0})))
		want := map[ItemID]bool{deferred: true, refused: false}
		for round := range 2 {
			cl, err := s.Claim(ctx, "w", pruneT0, time.Minute, 10)
			if err != nil || len(cl) != 2 {
				t.Fatalf("round %d: claimed %d items, %v", round, len(cl), err)
			}
			cs := make([]Completion, len(cl))
			for i, c := range cl {
				if c.Deferred != want[c.ID] || c.Attempts != 1 {
					t.Fatalf("round %d: item %d claimed deferred %v after %d attempts, want %v after 1", round, c.ID, c.Deferred, c.Attempts, want[c.ID])
				}
				// Refused before any attempt: the claim is undone, the refusal kept as the last error.
				cs[i] = Completion{Fence: c.Fence(), State: StatePending, NextAt: pruneT0, Error: "rate limited", EndedAt: pruneT0}
			}
			if res, err := s.Complete(ctx, cs); err != nil || res[0] != nil || res[1] != nil {
				t.Fatalf("round %d: complete: %v %v", round, res, err)
			}
		}
		if it := must[Item](t)(s.Item(ctx, refused)); it.LastError != "rate limited" || it.Attempts != 0 {
			t.Fatalf("refused item: last error %q after %d attempts", it.LastError, it.Attempts)
		}
	})
}

// Migration 19 takes the items stored before it and not yet attempted as deferred when they
// have a last error, as the scheduler judged them before it; the others are not.
func TestMigrationMarksUnattemptedItemsDeferred(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		db := b.pool(t)
		ms := must[[]Migration](t)(Migrations(b.engine))
		var before []Migration
		for _, m := range ms {
			if m.Version < 19 {
				before = append(before, m)
			}
		}
		if err := Apply(ctx, db, b.engine, before, nil); err != nil {
			t.Fatal(err)
		}
		insert := b.engine.rebind(`INSERT INTO switchboard_items (name, payload, state, attempts, next_at, last_error, created_at, updated_at)
			VALUES ('test.work', ?, ?, ?, ?, ?, ?, ?)`)
		now := micros(pruneT0)
		for _, r := range []struct {
			state    State
			attempts int
			lastErr  any
		}{
			{StatePending, 0, "down"},        // deferred, or refused before its first attempt
			{StatePending, 0, nil},           // enqueued, never attempted
			{StatePending, 1, "attempt one"}, // attempted: its next attempt is a retry anyway
		} {
			if _, err := db.ExecContext(ctx, insert, []byte("{}"), string(r.state), r.attempts, now, r.lastErr, now, now); err != nil {
				t.Fatal(err)
			}
		}
		if err := Migrate(ctx, db, b.engine, nil); err != nil {
			t.Fatal(err)
		}
		cl, err := New(db, b.engine, false).Claim(ctx, "w", pruneT0, time.Minute, 10)
		if err != nil || len(cl) != 3 {
			t.Fatalf("claimed %d items, %v", len(cl), err)
		}
		for i, want := range []bool{true, false, false} {
			if cl[i].Deferred != want {
				t.Fatalf("item %d (last error %q, %d attempts) claimed deferred %v, want %v", cl[i].ID, cl[i].LastError, cl[i].Attempts, cl[i].Deferred, want)
			}
		}
	})
}

// first drops Enqueue's existed.
func first(id ItemID, _ bool, err error) (ItemID, error) { return id, err }
