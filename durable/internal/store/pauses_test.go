package store

import (
	"context"
	"database/sql"
	"testing"
	"time"
)

// A paused name's items stay pending, untouched, and are never claimed (the isolated claim and
// its look included) while the others are; a pause ends by its time or by its deletion; a
// breaker key's deletion frees the items parked on the key.
func TestPausedNameNotClaimed(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		now := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
		enqueue := func(name string) ItemID {
			t.Helper()
			id, _, err := s.Enqueue(ctx, NewItem{Name: name, NextAt: now, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			return id
		}
		held, other := enqueue("held"), enqueue("other")
		until := now.Add(time.Hour)
		var sawPrev bool
		if err := s.SetPause(ctx, PauseRow{Kind: PauseName, Target: "held", Until: until, Actor: "ops", Reason: "maintenance", CreatedAt: now},
			func(_ *sql.Tx, _ PauseRow, had bool) error { sawPrev = had; return nil }); err != nil {
			t.Fatal(err)
		}
		if sawPrev {
			t.Fatal("first pause saw a previous one")
		}
		got, err := s.Claim(ctx, "w", now, time.Minute, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].ID != other {
			t.Fatalf("claim while paused: %+v, want only item %d", got, other)
		}
		it, err := s.Item(ctx, held)
		if err != nil {
			t.Fatal(err)
		}
		if it.State != StatePending || it.Attempts != 0 || !it.UpdatedAt.Equal(now) {
			t.Fatalf("paused item touched: %+v", it)
		}
		// An item to run alone of the paused name is neither seen nor claimed.
		if _, err := s.DB().ExecContext(ctx, s.Engine().rebind("UPDATE switchboard_items SET isolate = 1 WHERE id = ?"), int64(held)); err != nil {
			t.Fatal(err)
		}
		if due, err := s.IsolatedDue(ctx, now); err != nil || due {
			t.Fatalf("isolated due while paused: %v, %v", due, err)
		}
		if got, err := s.ClaimIsolated(ctx, "w", now, time.Minute); err != nil || len(got) != 0 {
			t.Fatalf("isolated claim while paused: %+v, %v", got, err)
		}
		// Paused again: the row is replaced, and the callback sees the pause it replaced.
		var prev PauseRow
		if err := s.SetPause(ctx, PauseRow{Kind: PauseName, Target: "held", Actor: "ops2", CreatedAt: now},
			func(_ *sql.Tx, p PauseRow, had bool) error { prev, sawPrev = p, had; return nil }); err != nil {
			t.Fatal(err)
		}
		if !sawPrev || !prev.Until.Equal(until) || prev.Reason != "maintenance" || prev.Actor != "ops" {
			t.Fatalf("replaced pause: had %v, %+v", sawPrev, prev)
		}
		rows, err := s.Pauses(ctx, "")
		if err != nil || len(rows) != 1 || rows[0].Actor != "ops2" || !rows[0].Until.IsZero() || rows[0].Reason != "" {
			t.Fatalf("pauses: %+v, %v", rows, err)
		}
		// A timed pause ends by its time: at until the item is claimed.
		if err := s.SetPause(ctx, PauseRow{Kind: PauseName, Target: "held", Until: until, Actor: "ops", CreatedAt: now}, nil); err != nil {
			t.Fatal(err)
		}
		if due, err := s.IsolatedDue(ctx, until.Add(-time.Microsecond)); err != nil || due {
			t.Fatalf("isolated due before the pause ends: %v, %v", due, err)
		}
		got, err = s.ClaimIsolated(ctx, "w", until, time.Minute)
		if err != nil || len(got) != 1 || got[0].ID != held {
			t.Fatalf("claim once the pause ended: %+v, %v", got, err)
		}
	})
}

func TestDeletePauseUnparksKey(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		now := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
		later := now.Add(time.Hour)
		id, _, err := s.Enqueue(ctx, NewItem{Name: "n", NextAt: later, ParkedKey: "host-a", Now: now})
		if err != nil {
			t.Fatal(err)
		}
		other, _, err := s.Enqueue(ctx, NewItem{Name: "n", NextAt: later, ParkedKey: "host-b", Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SetPause(ctx, PauseRow{Kind: PauseBreakerKey, Target: "host-a", Actor: "ops", CreatedAt: now}, nil); err != nil {
			t.Fatal(err)
		}
		rows, err := s.Pauses(ctx, PauseBreakerKey)
		if err != nil || len(rows) != 1 || rows[0].Target != "host-a" {
			t.Fatalf("key pauses: %+v, %v", rows, err)
		}
		if rows, err := s.Pauses(ctx, PauseName); err != nil || len(rows) != 0 {
			t.Fatalf("name pauses: %+v, %v", rows, err)
		}
		var had bool
		freed, err := s.DeletePause(ctx, PauseBreakerKey, "host-a", now, func(_ *sql.Tx, p PauseRow, h bool) error { had = h; return nil })
		if err != nil || freed != 1 || !had {
			t.Fatalf("delete: freed %d, had %v, %v", freed, had, err)
		}
		it, err := s.Item(ctx, id)
		if err != nil || !it.NextAt.Equal(now) || it.ParkedKey != "" {
			t.Fatalf("item of the resumed key: %+v, %v", it, err)
		}
		if it, err := s.Item(ctx, other); err != nil || !it.NextAt.Equal(later) || it.ParkedKey != "host-b" {
			t.Fatalf("item of another key: %+v, %v", it, err)
		}
		// Deleting what is not paused deletes nothing and says so.
		if _, err := s.DeletePause(ctx, PauseName, "nothing", now, func(_ *sql.Tx, p PauseRow, h bool) error { had = h; return nil }); err != nil || had {
			t.Fatalf("delete of nothing: had %v, %v", had, err)
		}
		if rows, err := s.Pauses(ctx, ""); err != nil || len(rows) != 0 {
			t.Fatalf("pauses after delete: %+v, %v", rows, err)
		}
	})
}
