package store

import (
	"context"
	"encoding/json"
	"maps"
	"testing"
	"time"
)

var pruneT0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// finish enqueues n items, claims them and completes them into state (succeeded or dead) at
// at, each with one attempt row; it returns their ids.
func finish(t *testing.T, s *Store, n int, state State, at time.Time) []ItemID {
	t.Helper()
	ctx := context.Background()
	for range n {
		if _, _, err := s.Enqueue(ctx, NewItem{Name: "test.work", Payload: []byte("{}"), NextAt: pruneT0, Now: pruneT0}); err != nil {
			t.Fatal(err)
		}
	}
	var ids []ItemID
	for len(ids) < n {
		cl, err := s.Claim(ctx, "w", pruneT0, time.Hour, n-len(ids))
		if err != nil || len(cl) == 0 {
			t.Fatalf("claim: %d items, %v", len(cl), err)
		}
		cs := make([]Completion, len(cl))
		for i, c := range cl {
			outcome := OutcomeSucceeded
			if state != StateSucceeded {
				outcome = OutcomeFailed
			}
			// Successes with rows of their own, so that Prune has them to delete.
			cs[i] = Completion{Fence: c.Fence(), State: state, Outcome: outcome, StartedAt: at, EndedAt: at, SuccessRow: true}
			ids = append(ids, c.ID)
		}
		if _, err := s.Complete(ctx, cs); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

func countRows(t *testing.T, s *Store, q string) int {
	t.Helper()
	var n int
	if err := s.DB().QueryRow(q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPruneOnlyOldSucceeded: Prune deletes the succeeded items older than its cutoff, and their
// attempt rows, in batches of PruneBatch; newer succeeded items and items in every other state
// keep their rows and their attempt rows.
func TestPruneOnlyOldSucceeded(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := b.open(t)
		old, recent, cutoff := pruneT0.Add(time.Minute), pruneT0.Add(3*time.Hour), pruneT0.Add(2*time.Hour)
		finish(t, s, PruneBatch+120, StateSucceeded, old)
		keptSucceeded := finish(t, s, 3, StateSucceeded, recent)
		dead := finish(t, s, 2, StateDead, old)
		// A running item with an earlier failed attempt, and a pending one backing off.
		finish(t, s, 2, StatePending, old)
		if _, err := s.Claim(ctx, "w", pruneT0.Add(time.Hour), time.Hour, 1); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Enqueue(ctx, NewItem{Name: "test.work", Payload: []byte("{}"), NextAt: old, Now: old}); err != nil {
			t.Fatal(err)
		}
		otherItems := countRows(t, s, "SELECT COUNT(*) FROM switchboard_items_all WHERE state <> 'succeeded'")
		otherAttempts := countRows(t, s, "SELECT COUNT(*) FROM switchboard_attempts a JOIN switchboard_items_all i ON i.id = a.item_id WHERE i.state <> 'succeeded'")
		if otherItems != 5 || otherAttempts != 4 {
			t.Fatalf("fixture: %d other items, %d of their attempts", otherItems, otherAttempts)
		}

		var passes []int
		for {
			n, busy, err := s.Prune(ctx, cutoff, cutoff)
			if err != nil || busy {
				t.Fatalf("prune: %v (busy %v)", err, busy)
			}
			passes = append(passes, n)
			if n < PruneBatch {
				break
			}
		}
		if len(passes) != 2 || passes[0] != PruneBatch || passes[1] != 120 {
			t.Fatalf("batches %v, want [%d 120]", passes, PruneBatch)
		}
		if n := countRows(t, s, "SELECT COUNT(*) FROM switchboard_items_all WHERE state = 'succeeded'"); n != len(keptSucceeded) {
			t.Fatalf("%d succeeded items left, want the %d recent ones", n, len(keptSucceeded))
		}
		for _, id := range append(keptSucceeded, dead...) {
			if as, err := s.Attempts(ctx, id); err != nil || len(as) != 1 {
				t.Fatalf("item %d: attempts %v, %v", id, as, err)
			}
		}
		if n := countRows(t, s, "SELECT COUNT(*) FROM switchboard_items_all WHERE state <> 'succeeded'"); n != otherItems {
			t.Fatalf("%d items in other states, want %d", n, otherItems)
		}
		if n := countRows(t, s, "SELECT COUNT(*) FROM switchboard_attempts"); n != otherAttempts+len(keptSucceeded) {
			t.Fatalf("%d attempt rows, want %d", n, otherAttempts+len(keptSucceeded))
		}
		// Nothing older is left: a pass finds nothing.
		if n, _, err := s.Prune(ctx, cutoff, cutoff); err != nil || n != 0 {
			t.Fatalf("second pass: %d, %v", n, err)
		}
	})
}

// TestPruneSkipsWhileLocked: while another transaction holds the prune lock (another instance's
// pass), Prune deletes nothing and reports busy; a queue in another schema of the same database
// is not held up by it.
func TestPruneSkipsWhileLocked(t *testing.T) {
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	ctx := context.Background()
	be := postgresBackend(t, dsn)
	s, other := be.open(t), be.open(t)
	finish(t, s, 10, StateSucceeded, pruneT0)
	elsewhere := postgresBackend(t, dsn).open(t)
	finish(t, elsewhere, 3, StateSucceeded, pruneT0)

	tx, err := other.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var locked bool
	if err := tx.QueryRow(pruneLockSQL).Scan(&locked); err != nil || !locked {
		t.Fatalf("lock: %v, %v", locked, err)
	}
	n, busy, err := s.Prune(ctx, pruneT0.Add(time.Hour), pruneT0.Add(time.Hour))
	if err != nil || !busy || n != 0 {
		t.Fatalf("prune while locked: %d, busy %v, %v", n, busy, err)
	}
	if n, busy, err := elsewhere.Prune(ctx, pruneT0.Add(time.Hour), pruneT0.Add(time.Hour)); err != nil || busy || n != 3 {
		t.Fatalf("prune in another schema: %d, busy %v, %v", n, busy, err)
	}
	if err := tx.Commit(); err != nil { // the lock ends with the transaction
		t.Fatal(err)
	}
	if n, busy, err := s.Prune(ctx, pruneT0.Add(time.Hour), pruneT0.Add(time.Hour)); err != nil || busy || n != 10 {
		t.Fatalf("prune after the lock: %d, busy %v, %v", n, busy, err)
	}
}

// TestMetadataRoundTrip: an item's metadata is stored as given and read back by Item, List and
// the claim; an item without metadata has none.
func TestMetadataRoundTrip(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := b.open(t)
		md := `{"tenant":"\"acme\"","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`
		with, _, err := s.Enqueue(ctx, NewItem{Name: "test.work", Payload: []byte("{}"), NextAt: pruneT0, Now: pruneT0, Metadata: []byte(md)})
		if err != nil {
			t.Fatal(err)
		}
		without, _, err := s.Enqueue(ctx, NewItem{Name: "test.work", Payload: []byte("{}"), NextAt: pruneT0, Now: pruneT0})
		if err != nil {
			t.Fatal(err)
		}
		it := must[Item](t)(s.Item(ctx, with))
		if !jsonEqual(t, it.Metadata, md) {
			t.Fatalf("Item: metadata %s, want %s", it.Metadata, md)
		}
		if it := must[Item](t)(s.Item(ctx, without)); it.Metadata != nil {
			t.Fatalf("Item without metadata: %q", it.Metadata)
		}
		cl := must[[]Claimed](t)(s.Claim(ctx, "w", pruneT0, time.Minute, 2))
		if len(cl) != 2 || !jsonEqual(t, cl[0].Metadata, md) || cl[1].Metadata != nil {
			t.Fatalf("claimed %+v", cl)
		}
		// The combined completion and claim reads the metadata too (a pgx batch on PostgreSQL).
		id3, _, _ := s.Enqueue(ctx, NewItem{Name: "test.work", Payload: []byte("{}"), NextAt: pruneT0, Now: pruneT0, Metadata: []byte(md)})
		_, cl2, err := s.CompleteAndClaim(ctx, []Completion{{Fence: cl[0].Fence(), State: StateSucceeded, Outcome: OutcomeSucceeded,
			StartedAt: pruneT0, EndedAt: pruneT0}}, "w", pruneT0, time.Minute, 1, false)
		if err != nil || len(cl2) != 1 || cl2[0].ID != id3 || !jsonEqual(t, cl2[0].Metadata, md) {
			t.Fatalf("complete and claim: %+v, %v", cl2, err)
		}
	})
}

// jsonEqual compares a stored JSON object with want, ignoring the formatting PostgreSQL's jsonb
// gives it.
func jsonEqual(t *testing.T, got []byte, want string) bool {
	t.Helper()
	var a, b map[string]string
	if err := json.Unmarshal(got, &a); err != nil {
		return false
	}
	if err := json.Unmarshal([]byte(want), &b); err != nil {
		t.Fatal(err)
	}
	return maps.Equal(a, b)
}
