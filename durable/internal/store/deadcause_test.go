package store

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable/record"
)

// Migration 21 adds the dead letter's cause: a letter written before it reads with none (not
// known), and a dead item's completion writes its cause on the letter, or none when it has none.
func TestMigrationAddsDeadLetterCause(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		db := b.pool(t)
		var before []Migration
		for _, m := range must[[]Migration](t)(Migrations(b.engine)) {
			if m.Version < 21 {
				before = append(before, m)
			}
		}
		if err := Apply(ctx, db, b.engine, before, nil); err != nil {
			t.Fatal(err)
		}
		t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
		old := New(db, b.engine, false)
		oldID := must[DeadLetterID](t)(old.InsertDeadLetter(ctx, NewDeadLetter{Source: "batch", Name: "test.work", Key: "k", Payload: []byte(`{}`),
			Error: "bad row", Now: t0}))
		if err := Migrate(ctx, db, b.engine, nil); err != nil {
			t.Fatal(err)
		}
		s := New(db, b.engine, false)
		d, found, err := s.DeadLetter(ctx, oldID)
		if err != nil || !found {
			t.Fatalf("the letter from before the migration: found %v, %v", found, err)
		}
		if d.Cause != record.DeadUnknown || d.Error != "bad row" || d.Key != "k" || d.Status != DeadLetterFailed {
			t.Fatalf("the letter from before the migration: %+v", d)
		}

		for range 2 {
			if _, _, err := s.Enqueue(ctx, NewItem{Name: "test.work", Payload: []byte(`{}`), NextAt: t0, Now: t0}); err != nil {
				t.Fatal(err)
			}
		}
		cl := must[[]Claimed](t)(s.Claim(ctx, "w", t0, time.Hour, 2))
		if len(cl) != 2 {
			t.Fatalf("claimed %d items, want 2", len(cl))
		}
		causes := []record.DeadCause{record.DeadDeadline, record.DeadUnknown}
		cs := make([]Completion, len(cl))
		ids := make([]ItemID, len(cl))
		for i, c := range cl {
			cs[i] = Completion{Fence: c.Fence(), State: StateDead, Outcome: OutcomeFailed, StartedAt: t0, EndedAt: t0, Error: "gone", Cause: causes[i]}
			ids[i] = c.ID
		}
		if errs, err := s.Complete(ctx, cs); err != nil || errs[0] != nil || errs[1] != nil {
			t.Fatalf("complete: %v %v", errs, err)
		}
		letters := must[[]DeadLetter](t)(s.DeadLettersOfItems(ctx, ids))
		if len(letters) != 2 {
			t.Fatalf("%d letters of the dead items, want 2", len(letters))
		}
		for _, l := range letters {
			want := causes[0]
			if l.ItemID == ids[1] {
				want = causes[1]
			}
			if l.Cause != want || l.Error != "gone" {
				t.Errorf("item %d's letter: cause %q (want %q), error %q", l.ItemID, l.Cause, want, l.Error)
			}
		}
	})
}
