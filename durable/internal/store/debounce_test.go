package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var debounceT0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// debounced returns a debounced item of name and key enqueued at now with payload, due window
// after now, at the latest maxDelay after now.
func debounced(name, key, payload string, now time.Time, window, maxDelay time.Duration) NewItem {
	return NewItem{Name: name, Payload: []byte(payload), NextAt: now.Add(window), Now: now, DebounceKey: key,
		DebounceUntil: now.Add(maxDelay), Token: newTestToken()}
}

var testTokens struct {
	sync.Mutex
	n int
}

// newTestToken returns a token no other call returned.
func newTestToken() string {
	testTokens.Lock()
	defer testTokens.Unlock()
	testTokens.n++
	return fmt.Sprintf("debounce-token-%d", testTokens.n)
}

// An enqueue with a debounce key updates the pending, never claimed item of its name and key:
// its payload, token and due time (never past the bound its first enqueue set), keeping its
// id; another name's key is another item. Once the item was claimed, the next enqueue inserts
// a new item, which no claim takes while the claimed one is pending or running.
func TestDebounceUpdatesThePendingItem(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		enqueue := func(it NewItem) (ItemID, bool) {
			t.Helper()
			id, existed, err := s.Enqueue(ctx, it)
			if err != nil {
				t.Fatal(err)
			}
			return id, existed
		}
		const window, maxDelay = 10 * time.Second, time.Minute
		initial := debounced("test.work", "k", `{"n":1}`, debounceT0, window, maxDelay)
		initial.OrderingKey, initial.GuardKey = "o1", "api-1"
		first, existed := enqueue(initial)
		if existed {
			t.Fatal("the first enqueue of the key reported an existing item")
		}
		second := debounced("test.work", "k", `{"n":2}`, debounceT0.Add(5*time.Second), window, maxDelay)
		second.OrderingKey, second.GuardKey, second.Deadline, second.Metadata = "o2", "api-2", debounceT0.Add(time.Hour), []byte(`{"a":"b"}`)
		if id, existed := enqueue(second); id != first || !existed {
			t.Fatalf("the second enqueue: item %d existed=%v, want item %d updated", id, existed, first)
		}
		it := must[Item](t)(s.Item(ctx, first))
		if string(it.Payload) != `{"n":2}` || it.Token != second.Token || !it.NextAt.Equal(second.NextAt) || it.Debounces != 1 ||
			it.DebounceKey != "k" || !it.DebounceUntil.Equal(debounceT0.Add(maxDelay)) || !it.CreatedAt.Equal(debounceT0) ||
			it.GuardKey != "api-2" || !it.Deadline.Equal(second.Deadline) || strings.ReplaceAll(string(it.Metadata), " ", "") != `{"a":"b"}` || it.OrderingKey != "o1" {
			t.Fatalf("the updated item: %+v; want the second enqueue's payload, token, due time, breaker key, deadline and metadata, the first's ordering key", it)
		}
		// An update whose window ends after the bound makes the item due at the bound.
		late := debounced("test.work", "k", `{"n":3}`, debounceT0.Add(58*time.Second), window, maxDelay)
		enqueue(late)
		if it := must[Item](t)(s.Item(ctx, first)); !it.NextAt.Equal(debounceT0.Add(maxDelay)) || it.Debounces != 2 {
			t.Fatalf("an update 58 s after the first enqueue: due %v after %d updates, want the bound %v after 2", it.NextAt, it.Debounces, debounceT0.Add(maxDelay))
		}
		other, existed := enqueue(debounced("test.other", "k", `{}`, debounceT0, window, maxDelay))
		if other == first || existed {
			t.Fatalf("another name's key: item %d existed=%v, want a new item", other, existed)
		}

		claim := func(at time.Time) []Claimed {
			t.Helper()
			return must[[]Claimed](t)(s.Claim(ctx, "w", at, time.Hour, 10))
		}
		complete := func(c Claimed, state State) {
			t.Helper()
			res := must[[]error](t)(s.Complete(ctx, []Completion{{Fence: c.Fence(), State: state, NextAt: debounceT0.Add(time.Hour),
				Outcome: OutcomeFailed, StartedAt: debounceT0, EndedAt: debounceT0}}))
			if res[0] != nil {
				t.Fatal(res[0])
			}
		}
		far := debounceT0.Add(24 * time.Hour)
		cl := claim(debounceT0.Add(maxDelay))
		if len(cl) != 2 || cl[0].ID != first || string(cl[0].Payload) != `{"n":3}` || cl[1].ID != other {
			t.Fatalf("the claim at the bound: %+v, want item %d with the last payload and the other name's", cl, first)
		}
		complete(cl[1], StateSucceeded)
		next, existed := enqueue(debounced("test.work", "k", `{"n":4}`, debounceT0.Add(maxDelay), window, maxDelay))
		if existed || next == first {
			t.Fatalf("an enqueue while the item runs: item %d existed=%v, want a new item", next, existed)
		}
		if cl := claim(far); len(cl) != 0 {
			t.Fatalf("a claim while the key's first item runs: %+v, want none", cl)
		}
		// A retry of the claimed item: pending again, but it takes no updates, and the newer
		// item waits for it.
		complete(Claimed{ItemRow: Item{ID: first, LeaseOwner: "w", Attempts: 1}}, StatePending)
		if id, existed := enqueue(debounced("test.work", "k", `{"n":5}`, debounceT0.Add(maxDelay), window, maxDelay)); id != next || !existed {
			t.Fatalf("an enqueue while the first item waits for its retry: item %d existed=%v, want item %d updated", id, existed, next)
		}
		cl = claim(far)
		if len(cl) != 1 || cl[0].ID != first {
			t.Fatalf("the claim after the retry's due time: %+v, want the first item alone", cl)
		}
		complete(cl[0], StateSucceeded)
		cl = claim(far)
		if len(cl) != 1 || cl[0].ID != next || string(cl[0].Payload) != `{"n":5}` {
			t.Fatalf("the claim once the first item succeeded: %+v, want item %d with the last payload", cl, next)
		}
	})
}

// A debounced item has no dedupe key, and is never due after its bound.
func TestDebounceRefusesWhatCannotBe(t *testing.T) {
	s := sqliteBackend(t).open(t)
	ctx := context.Background()
	dedupe := debounced("test.work", "k", `{}`, debounceT0, time.Second, time.Minute)
	dedupe.DedupeKey = "d"
	late := debounced("test.work", "k", `{}`, debounceT0, time.Minute, time.Second)
	for _, c := range []struct {
		it   NewItem
		want string
	}{{dedupe, "no dedupe key"}, {late, "after its DebounceUntil"}} {
		if _, _, err := s.Enqueue(ctx, c.it); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Enqueue: %v, want an error saying %q", err, c.want)
		}
	}
}

// Many enqueues of one key at once, from several pools (PostgreSQL: several connections at
// once), leave one item, which every enqueue names and all but one updated.
func TestDebounceConcurrentEnqueues(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		stores := []*Store{b.open(t), b.open(t), b.open(t), b.open(t)}
		ctx := context.Background()
		const goroutines, each = 16, 10
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			ids     = map[ItemID]int{}
			updated int
			start   = make(chan struct{})
		)
		for g := range goroutines {
			wg.Go(func() {
				<-start
				for i := range each {
					id, existed, err := stores[g%len(stores)].Enqueue(ctx,
						debounced("test.work", "k", fmt.Sprintf(`{"g":%d,"i":%d}`, g, i), debounceT0, time.Second, time.Minute))
					mu.Lock()
					if err != nil {
						t.Error(err)
					}
					ids[id]++
					if existed {
						updated++
					}
					mu.Unlock()
				}
			})
		}
		close(start)
		wg.Wait()
		if len(ids) != 1 || updated != goroutines*each-1 {
			t.Fatalf("%d enqueues of one key at once: items %v, %d updates; want one item, %d updates", goroutines*each, ids, updated, goroutines*each-1)
		}
		var n int
		if err := stores[0].DB().QueryRow("SELECT COUNT(*) FROM switchboard_items").Scan(&n); err != nil || n != 1 {
			t.Fatalf("%d items stored (%v), want 1", n, err)
		}
	})
}

// TestDebounceRacesClaims: one producer enqueues 300 updates of one key, one after another,
// while three instances claim and complete the key's items as fast as they can. Every update
// an enqueue reported as made to an item is in the payload that item's claim read (the last
// of them), or the enqueue inserted a new item: none is lost, none delivered twice, and the
// items of the key are delivered one at a time, in order.
func TestDebounceRacesClaims(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		producer := b.open(t)
		claimers := []*Store{producer, producer, producer}
		if b.name == "postgres" {
			// Each on a pool of its own. SQLite has one writer: sharing the pool's one
			// connection, the statements take turns in the order they come, where pools of
			// their own would take turns through the busy timeout's sleeps.
			claimers = []*Store{b.open(t), b.open(t), b.open(t)}
		}
		ctx := context.Background()
		const updates = 300
		last := map[ItemID]int{} // the last update each item took, by the producer's answers
		var (
			mu        sync.Mutex
			delivered = map[ItemID]int{} // the update each claim read
			order     []ItemID           // the items in the order their claims were made
			running   int                // claims of the key not yet completed
			overlap   bool               // two items of the key ran at once
			done      = make(chan struct{})
			wg        sync.WaitGroup
		)
		far := debounceT0.Add(24 * time.Hour)
		claimOnce := func(s *Store, owner string) (int, error) {
			cl, err := s.Claim(ctx, owner, far, time.Hour, 5)
			if err != nil {
				return 0, err
			}
			mu.Lock()
			for _, c := range cl {
				n, err := strconv.Atoi(string(c.Payload))
				if err != nil {
					mu.Unlock()
					return 0, err
				}
				if _, again := delivered[c.ID]; again {
					mu.Unlock()
					return 0, fmt.Errorf("item %d delivered twice", c.ID)
				}
				delivered[c.ID], order = n, append(order, c.ID)
				if running++; running > 1 {
					overlap = true
				}
			}
			mu.Unlock()
			for _, c := range cl {
				mu.Lock()
				running--
				mu.Unlock()
				res, err := s.Complete(ctx, []Completion{{Fence: c.Fence(), State: StateSucceeded, Outcome: OutcomeSucceeded, StartedAt: far, EndedAt: far}})
				if err != nil {
					return 0, err
				}
				if res[0] != nil {
					return 0, res[0]
				}
			}
			return len(cl), nil
		}
		for i, s := range claimers {
			wg.Go(func() {
				for {
					select {
					case <-done:
						return
					default:
					}
					if _, err := claimOnce(s, fmt.Sprintf("w%d", i)); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		for n := 1; n <= updates; n++ {
			id, _, err := producer.Enqueue(ctx, debounced("test.work", "k", strconv.Itoa(n), debounceT0, time.Second, time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			last[id] = n
		}
		close(done)
		wg.Wait()
		for { // what the claimers left
			n, err := claimOnce(claimers[0], "w0")
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
		}
		for id, n := range last {
			if got, ok := delivered[id]; !ok || got != n {
				t.Errorf("item %d: the last update the producer made to it is %d, its claim read %d (claimed: %v)", id, n, got, ok)
			}
		}
		if len(delivered) != len(last) {
			t.Errorf("%d items delivered, %d made", len(delivered), len(last))
		}
		for i := 1; i < len(order); i++ {
			if order[i] < order[i-1] || delivered[order[i]] <= delivered[order[i-1]] {
				t.Errorf("item %d (update %d) delivered after item %d (update %d)", order[i], delivered[order[i]], order[i-1], delivered[order[i-1]])
			}
		}
		if overlap {
			t.Error("two items of the key ran at once")
		}
		t.Logf("%d updates became %d deliveries", updates, len(delivered))
	})
}

// TestDebounceClaimSQLitePlan: SQLite tests a debounced item's earlier items through the
// debounce order index, not by reading the items of every state.
func TestDebounceClaimSQLitePlan(t *testing.T) {
	db := sqliteBackend(t).open(t).DB()
	plan := sqlitePlan(t, db, SQLite.stmts().claim, append(claimArgs("w", debounceT0, time.Minute, 10, false), "a", "z")...)
	if text := strings.Join(plan, "; "); !strings.Contains(text, "switchboard_items_debounce_order") {
		t.Fatalf("the claim's plan %s does not read switchboard_items_debounce_order", text)
	}
}
