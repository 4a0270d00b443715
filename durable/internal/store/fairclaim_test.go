package store

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// fairEnqueue enqueues n items of key due at at with priority p (head start p minutes) and
// returns their ids.
func fairEnqueue(t *testing.T, s *Store, key string, n, p int, at time.Time) []ItemID {
	t.Helper()
	ids := make([]ItemID, n)
	for i := range ids {
		ids[i] = must[ItemID](t)(first(s.Enqueue(context.Background(), NewItem{Name: "test.work", Payload: []byte("{}"), NextAt: at, Now: at,
			FairnessKey: key, Priority: p, HeadStart: time.Duration(p) * time.Minute})))
	}
	return ids
}

// claimKeys claims up to limit items at now and returns the fairness key of each, in claim
// order of id, with the ids.
func claimKeys(t *testing.T, s *Store, now time.Time, limit int) (map[ItemID]string, []Claimed) {
	t.Helper()
	cl := must[[]Claimed](t)(s.Claim(context.Background(), "w", now, time.Minute, limit))
	keys := map[ItemID]string{}
	for _, c := range cl {
		keys[c.ID] = must[Item](t)(s.Item(context.Background(), c.ID)).FairnessKey
	}
	return keys, cl
}

// A key with a backlog takes one turn in a claim like a key with one item: a hundred items of
// A due first, then five of B due later: the first claim of eight takes four of each, in due
// order within each key, and a key alone takes the whole claim.
func TestClaimTakesKeysInTurn(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		a := fairEnqueue(t, s, "A", 100, 0, pruneT0)
		bs := fairEnqueue(t, s, "B", 5, 0, pruneT0.Add(time.Second))
		now := pruneT0.Add(time.Minute)
		keys, cl := claimKeys(t, s, now, 8)
		got := map[string][]ItemID{}
		for _, c := range cl {
			got[keys[c.ID]] = append(got[keys[c.ID]], c.ID)
		}
		if fmt.Sprint(got["A"]) != fmt.Sprint(a[:4]) || fmt.Sprint(got["B"]) != fmt.Sprint(bs[:4]) {
			t.Fatalf("first claim: A %v, B %v; want A's first four %v and B's %v", got["A"], got["B"], a[:4], bs[:4])
		}
		// B has one left: the next claim of eight takes it and seven of A.
		keys, cl = claimKeys(t, s, now, 8)
		n := map[string]int{}
		for _, c := range cl {
			n[keys[c.ID]]++
		}
		if n["A"] != 7 || n["B"] != 1 {
			t.Fatalf("second claim: %v, want 7 of A and 1 of B", n)
		}
		// A alone: a claim takes as many as it asks for.
		if _, cl = claimKeys(t, s, now, 32); len(cl) != 32 {
			t.Fatalf("A alone: claimed %d of 32", len(cl))
		}
	})
}

// The items of a key that are not due, a parked backlog among them, take no turn: a key whose
// items all wait leaves the claim to the others.
func TestClaimSkipsKeysWithNothingDue(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		fairEnqueue(t, s, "parked", 50, 0, pruneT0.Add(time.Hour))
		due := fairEnqueue(t, s, "due", 10, 0, pruneT0)
		_, cl := claimKeys(t, s, pruneT0, 8)
		if len(cl) != 8 {
			t.Fatalf("claimed %d of 8", len(cl))
		}
		for _, c := range cl {
			if c.ID > due[len(due)-1] || c.ID < due[0] {
				t.Fatalf("claimed item %d, which is not due", c.ID)
			}
		}
	})
}

// Within a key a higher priority goes first by its head start: a priority 9 item (9 minutes)
// goes before priority 0 items that came due less than 9 minutes before it, and after those
// that came due longer before (they aged).
func TestClaimOrdersByPriorityWithAging(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		old := fairEnqueue(t, s, "k", 1, 0, pruneT0)                       // due 10 minutes before the urgent one
		recent := fairEnqueue(t, s, "k", 3, 0, pruneT0.Add(5*time.Minute)) // 5 minutes before
		urgent := fairEnqueue(t, s, "k", 1, 9, pruneT0.Add(10*time.Minute))
		now := pruneT0.Add(10 * time.Minute)
		var order []ItemID
		for range 5 {
			_, cl := claimKeys(t, s, now, 1)
			if len(cl) != 1 {
				t.Fatalf("claimed %d items, want 1", len(cl))
			}
			order = append(order, cl[0].ID)
		}
		want := append(append(append([]ItemID{}, old...), urgent...), recent...)
		if fmt.Sprint(order) != fmt.Sprint(want) {
			t.Fatalf("claim order %v, want %v (aged, urgent, then the rest in due order)", order, want)
		}
	})
}

// A high priority item due in the future is not claimed early: its head start orders it, the
// due time still decides when it may run.
func TestClaimKeepsAPriorityItemsDueTime(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		later := fairEnqueue(t, s, "k", 1, 9, pruneT0.Add(time.Minute))
		if _, cl := claimKeys(t, s, pruneT0, 4); len(cl) != 0 {
			t.Fatalf("claimed %d items before they were due", len(cl))
		}
		if _, cl := claimKeys(t, s, pruneT0.Add(time.Minute), 4); len(cl) != 1 || cl[0].ID != later[0] {
			t.Fatalf("at its due time: claimed %v, want %v", cl, later)
		}
	})
}

// A priority out of range and a negative head start are refused, naming them; nothing is stored.
func TestEnqueueRefusesABadPriority(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		for _, it := range []NewItem{
			{Name: "test.work", NextAt: pruneT0, Now: pruneT0, Priority: MaxPriority + 1},
			{Name: "test.work", NextAt: pruneT0, Now: pruneT0, Priority: -1},
			{Name: "test.work", NextAt: pruneT0, Now: pruneT0, HeadStart: -time.Second},
		} {
			if _, _, err := s.Enqueue(ctx, it); err == nil {
				t.Errorf("priority %d, head start %v: no error", it.Priority, it.HeadStart)
			}
		}
		if st := must[Stats](t)(s.Stats(ctx, pruneT0, 1000)); st.Counts[StatePending] != 0 {
			t.Fatalf("%d items stored", st.Counts[StatePending])
		}
	})
}

// The fairness key defaults to the guard's key, then the name.
func TestFairnessKeyDefaults(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		for _, c := range []struct {
			it   NewItem
			want string
		}{
			{NewItem{Name: "test.work", NextAt: pruneT0, Now: pruneT0, FairnessKey: "tenant-1", GuardKey: "host"}, "tenant-1"},
			{NewItem{Name: "test.work", NextAt: pruneT0, Now: pruneT0, GuardKey: "host"}, "host"},
			{NewItem{Name: "test.work", NextAt: pruneT0, Now: pruneT0}, "test.work"},
		} {
			id := must[ItemID](t)(first(s.Enqueue(ctx, c.it)))
			if got := must[Item](t)(s.Item(ctx, id)).FairnessKey; got != c.want {
				t.Errorf("%+v: fairness key %q, want %q", c.it, got, c.want)
			}
		}
	})
}

// Aging bounds the wait of a low priority item under urgent load: priority 9 items (a 9 s head
// start) arrive 8 every 100 ms and a claim of 8 is made every 100 ms, so the claims are full of
// urgent work. A priority 0 item due at the start is claimed once the urgent items ranked before
// it have run, those that came due within 9 s after it: about round 90, not before the urgent
// items of its first seconds have (it has a lower priority), not never (it ages).
func TestClaimAgingBoundsTheWaitUnderUrgentLoad(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		low := fairEnqueue(t, s, "k", 1, 0, pruneT0)[0]
		const round = 100 * time.Millisecond
		for r := range 200 {
			now := pruneT0.Add(time.Duration(r) * round)
			for range 8 {
				must[ItemID](t)(first(s.Enqueue(ctx, NewItem{Name: "test.work", Payload: []byte("{}"), NextAt: now, Now: now,
					FairnessKey: "k", Priority: 9, HeadStart: 9 * time.Second})))
			}
			cl := must[[]Claimed](t)(s.Claim(ctx, "w", now, time.Minute, 8))
			cs := make([]Completion, len(cl))
			for i, c := range cl {
				if c.ID == low {
					if r < 85 || r > 95 {
						t.Fatalf("the low priority item was claimed in round %d; want about round 90 (its 9 s of aging)", r)
					}
					return
				}
				cs[i] = Completion{Fence: c.Fence(), State: StateSucceeded, Outcome: OutcomeSucceeded, StartedAt: now, EndedAt: now}
			}
			if _, err := s.Complete(ctx, cs); err != nil {
				t.Fatal(err)
			}
		}
		t.Fatal("the low priority item was never claimed in 20 s of urgent load")
	})
}
