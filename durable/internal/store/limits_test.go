package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// limitSeed inserts n due items and claims them all for owner, returning the claims.
func limitSeed(t *testing.T, st *Store, n int, owner string, now time.Time) []Claimed {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		must[ItemID](t)(func() (ItemID, error) {
			id, _, err := st.Enqueue(ctx, NewItem{Name: "test.work", Payload: []byte(fmt.Sprint(i)), NextAt: now.Add(-time.Second), Now: now, GuardKey: "api"})
			return id, err
		}())
	}
	cs := must[[]Claimed](t)(st.Claim(ctx, owner, now, time.Minute, n))
	if len(cs) != n {
		t.Fatalf("claimed %d of %d", len(cs), n)
	}
	return cs
}

// TestAcquireConcurrentExact: 47 running items of one key on four pools (instances) take slots
// of a limit of 3 at once, each once, in many rounds: exactly 3 get one each round, whatever the
// interleaving (under READ COMMITTED on PostgreSQL, where a count read before another
// transaction's commit would let both in); completing the holders frees their slots for the
// next round; a stale fence takes none; the sweep of an expired holder frees its slot.
func TestAcquireConcurrentExact(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		stores := []*Store{b.open(t), b.open(t), b.open(t), b.open(t)}
		st := stores[0]
		now := time.Now()
		must[int](t)(0, st.SetLimit(ctx, LimitRow{Key: "api", Max: 3, Actor: "test", CreatedAt: now}, nil))
		cs := limitSeed(t, st, 47, "w", now)
		rest := cs
		for round := 0; len(rest) >= 3; round++ {
			var (
				wg    sync.WaitGroup
				got   atomic.Int32
				mu    sync.Mutex
				holds []Claimed
				lost  []Claimed
			)
			start := make(chan struct{})
			for i, c := range rest {
				wg.Go(func() {
					<-start
					ok, _, err := stores[i%len(stores)].Acquire(ctx, "api", c.Fence(), nil)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					defer mu.Unlock()
					if ok {
						got.Add(1)
						holds = append(holds, c)
					} else {
						lost = append(lost, c)
					}
				})
			}
			close(start)
			wg.Wait()
			if n := got.Load(); n != 3 {
				t.Fatalf("round %d: %d of %d items took a slot of a limit of 3", round, n, len(rest))
			}
			ls := must[[]LimitRow](t)(st.Limits(ctx))
			if len(ls) != 1 || ls[0].InUse != 3 {
				t.Fatalf("round %d: limits %+v; want 3 in use", round, ls)
			}
			// A holder asking again keeps its slot; the others still find none.
			if ok := acquired(t, st, holds[0].Fence()); !ok {
				t.Fatalf("round %d: a holder asking again was refused", round)
			}
			if len(lost) > 0 {
				if ok := acquired(t, st, lost[0].Fence()); ok {
					t.Fatalf("round %d: an item took a slot of a full key", round)
				}
			}
			var comps []Completion
			for _, c := range holds {
				comps = append(comps, Completion{Fence: c.Fence(), State: StateSucceeded, Outcome: OutcomeSucceeded, StartedAt: now, EndedAt: now})
			}
			if res := must[[]error](t)(st.Complete(ctx, comps)); res[0] != nil || res[1] != nil || res[2] != nil {
				t.Fatalf("round %d: completions %v", round, res)
			}
			rest = lost
		}
		// A stale fence (another attempt number) takes nothing.
		c := rest[0]
		stale := c.Fence()
		stale.Attempt++
		if ok := acquired(t, st, stale); ok {
			t.Fatal("a stale fence took a slot")
		}
		// A holder whose lease expires is swept, and its slot is free.
		if ok := acquired(t, st, c.Fence()); !ok {
			t.Fatal("the last item found no slot of an empty key")
		}
		if n := must[int](t)(st.Sweep(ctx, now.Add(2*time.Minute))); n != len(rest) {
			t.Fatalf("swept %d, want %d", n, len(rest))
		}
		if ls := must[[]LimitRow](t)(st.Limits(ctx)); ls[0].InUse != 0 {
			t.Fatalf("limits after the sweep: %+v", ls)
		}
	})
}

// TestWakeLimited: the items parked on a key are woken no more than the key has free slots,
// earliest due first, and none without a limit.
func TestWakeLimited(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		st := b.open(t)
		now := time.Now()
		var ids []ItemID
		for i := range 5 {
			id, _, err := st.Enqueue(ctx, NewItem{Name: "test.work", Payload: []byte("{}"), NextAt: now.Add(time.Duration(10-i) * time.Minute), Now: now, ParkedKey: "api"})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		if n := must[int](t)(st.WakeLimited(ctx, "api", now)); n != 0 {
			t.Fatalf("woke %d items of a key without a limit", n)
		}
		must[int](t)(0, st.SetLimit(ctx, LimitRow{Key: "api", Max: 2, Actor: "test", CreatedAt: now}, nil))
		if n := must[int](t)(st.WakeLimited(ctx, "api", now)); n != 2 {
			t.Fatalf("woke %d items, want the 2 free slots' worth", n)
		}
		for i, id := range ids {
			it := must[Item](t)(st.Item(ctx, id))
			woken := it.ParkedKey == "" && it.NextAt.Equal(fromMicros(micros(now)))
			if want := i >= 3; woken != want {
				t.Fatalf("item %d (due %v): woken %v, want %v (the earliest due first)", i, it.NextAt, woken, want)
			}
		}
	})
}

func acquired(t *testing.T, st *Store, f Fence) bool {
	t.Helper()
	got, _, err := st.Acquire(context.Background(), "api", f, nil)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestAcquireHoldsBackInOneTransaction: an item that finds every slot taken is parked on the
// key by the same Acquire (pending, its claim undone, its lease ended), so no crash afterwards
// can charge it an attempt; a holder is left running; a stale fence parks nothing.
func TestAcquireHoldsBackInOneTransaction(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		st := b.open(t)
		now := time.Now()
		must[int](t)(0, st.SetLimit(ctx, LimitRow{Key: "api", Max: 1, Actor: "test", CreatedAt: now}, nil))
		cs := limitSeed(t, st, 3, "w", now)
		hb := &HoldBack{NextAt: now.Add(time.Hour), Now: now}
		got, parked, err := st.Acquire(ctx, "api", cs[0].Fence(), hb)
		if err != nil || !got || parked {
			t.Fatalf("first: got %v parked %v err %v; want a slot", got, parked, err)
		}
		stale := cs[2].Fence()
		stale.Attempt++
		if got, parked, err := st.Acquire(ctx, "api", stale, hb); err != nil || got || parked {
			t.Fatalf("stale: got %v parked %v err %v; want neither", got, parked, err)
		}
		got, parked, err = st.Acquire(ctx, "api", cs[1].Fence(), hb)
		if err != nil || got || !parked {
			t.Fatalf("second: got %v parked %v err %v; want parked", got, parked, err)
		}
		it := must[Item](t)(st.Item(ctx, cs[1].ID))
		if it.State != StatePending || it.Attempts != 0 || it.ParkedKey != "api" || !it.NextAt.Equal(hb.NextAt.Truncate(time.Microsecond)) {
			t.Fatalf("held back: %+v; want pending, no attempt, parked on api, due in an hour", it)
		}
		if it := must[Item](t)(st.Item(ctx, cs[0].ID)); it.State != StateRunning {
			t.Fatalf("holder: %s, want running", it.State)
		}
		// Its completion would now find no lease: a crash or a sweep finds nothing to charge.
		if n := must[int](t)(st.Sweep(ctx, now.Add(2*time.Minute))); n != 2 {
			t.Fatalf("swept %d, want the holder and the stale-fenced item only", n)
		}
		if as := must[[]Attempt](t)(st.Attempts(ctx, cs[1].ID)); len(as) != 0 {
			t.Fatalf("the held-back item has attempts %+v; want none", as)
		}
	})
}
