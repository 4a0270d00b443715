package store

import (
	"context"
	"database/sql"
	"github.com/switchboard-go/switchboard/durable/record"
	"testing"
	"time"
)

// parkNoWait returns the claimed item id to pending, parked, as a completion that parks it
// does, on db, without waiting for a lock held on the item: it fails at once if one is.
func parkNoWait(ctx context.Context, db *sql.DB, id ItemID) error {
	return inTx(ctx, db, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `SELECT id FROM switchboard_items WHERE id = $1 FOR UPDATE NOWAIT`, int64(id)); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE switchboard_items SET state = 'pending', lease_owner = NULL, lease_until = NULL,
	attempts = attempts - 1, parked_key = 'k' WHERE id = $1 AND state = 'running'`, int64(id))
		return err
	})
}

// TestItemChangeRacingACompletion: a completion that returns a claimed item to pending (a park,
// a retry) committing while a Cancel or a RunNow of the item is being decided never makes the
// change report a pending item as left unchanged (which the caller reads as finished): the
// state the change reports is the state it was decided on. PostgreSQL only: on SQLite the
// change's transaction is the only writer.
func TestItemChangeRacingACompletion(t *testing.T) {
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	ctx := context.Background()
	now := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, change := range []struct {
		name string
		fn   func(*Store) func(context.Context, ItemChange) (Item, bool, bool, error)
	}{{"cancel", func(s *Store) func(context.Context, ItemChange) (Item, bool, bool, error) { return s.CancelItem }},
		{"run-now", func(s *Store) func(context.Context, ItemChange) (Item, bool, bool, error) { return s.RunItemNow }}} {
		t.Run(change.name, func(t *testing.T) {
			b := postgresBackend(t, dsn)
			s := b.open(t)
			other := b.pool(t) // the instance whose completion races the change
			id := must[ItemID](t)(func() (ItemID, error) {
				id, _, err := s.Enqueue(ctx, NewItem{Name: "w-" + change.name, NextAt: now, Now: now})
				return id, err
			}())
			if c, err := s.Claim(ctx, "w1", now, time.Minute, 10); err != nil || len(c) != 1 || c[0].ID != id {
				t.Fatalf("claim: %v %v", c, err)
			}
			var raced error
			c := ItemChange{ID: id, Now: now, Audit: func(changed bool, it Item, _ *PauseRow) AuditRow {
				return AuditRow{At: now, Actor: "op", Action: change.name, TargetKind: "item", Target: "x", Outcome: record.AuditOutcome(it.State)}
			}}
			decided := withDecided(ctx, func() { raced = parkNoWait(ctx, other, id) })
			it, changed, found, err := change.fn(s)(decided, c)
			if err != nil || !found {
				t.Fatalf("%s: found=%v %v", change.name, found, err)
			}
			if !changed && it.State == StatePending {
				t.Fatalf("%s reported the item %s and unchanged (the completion racing it: %v); want it running and unchanged, or changed", change.name, it.State, raced)
			}
			if !changed && it.State != StateRunning {
				t.Fatalf("%s: item %s, unchanged; want running", change.name, it.State)
			}
			if raced == nil {
				t.Fatalf("the completion committed while the %s was being decided", change.name)
			}
			// The completion goes ahead once the change is done.
			if err := parkNoWait(ctx, other, id); err != nil {
				t.Fatalf("completion after the %s: %v", change.name, err)
			}
		})
	}
}
