package durable_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/driver"
	"github.com/switchboard-go/switchboard/durable/record"
)

// recordingEnv is newEnv with a scheduler whose Work handler records the N of each call, in
// order, and whether two calls ever ran at once; before, when set, runs at the start of each
// call.
type recordingEnv struct {
	*env
	mu      sync.Mutex
	calls   []int
	running int
	overlap bool
}

func newRecordingEnv(t *testing.T, b backend, before func(w *Work)) *recordingEnv {
	t.Helper()
	r := &recordingEnv{env: newEnv(t, b)}
	start(t, r.q, mediatorFor(t, handlers{work: func(_ context.Context, w *Work) error {
		r.mu.Lock()
		r.calls = append(r.calls, w.N)
		if r.running++; r.running > 1 {
			r.overlap = true
		}
		r.mu.Unlock()
		if before != nil {
			before(w)
		}
		r.mu.Lock()
		r.running--
		r.mu.Unlock()
		return nil
	}}))
	return r
}

func (r *recordingEnv) handled() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.calls...)
}

// 100 enqueues of one key within the window store one item, which runs once, with the last
// payload, a window after the last enqueue.
func TestDebounceBurstRunsOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newRecordingEnv(t, b, nil)
		ctx := context.Background()
		const window, maxDelay = 10 * time.Second, time.Minute
		var first durable.Enqueued
		for n := range 100 {
			res := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: n}, durable.WithDebounce("account:7", window, maxDelay)))
			if n == 0 {
				first = res
			}
			if res.ID != first.ID || res.Debounced != (n > 0) || res.Duplicate {
				t.Fatalf("enqueue %d: %+v, want item %d, debounced from the second enqueue on", n, res, first.ID)
			}
			e.clock.Advance(50 * time.Millisecond)
		}
		pending := item(t, e.q, first.ID)
		if pending.State != record.StatePending || pending.Debounces != 99 || pending.DebounceKey != "account:7" ||
			!pending.NextAt.Equal(e.clock.Now().Add(window-50*time.Millisecond)) {
			t.Fatalf("the item after 100 enqueues: %+v, want pending, 99 updates, due a window after the last", pending)
		}
		e.clock.Advance(window)
		waitState(t, e.q, first.ID, record.StateSucceeded)
		if got := e.handled(); len(got) != 1 || got[0] != 99 {
			t.Fatalf("the handler ran with %v, want once with the last payload (99)", got)
		}
		if st := stats(t, e.q); st.Counts[record.StateSucceeded] != 1 || st.Counts[record.StatePending] != 0 {
			t.Fatalf("items by state: %v, want the one item, succeeded", st.Counts)
		}
	})
}

// A steady stream of updates, each within the window of the one before, cannot put the item
// off past the maximum delay after the first enqueue: it runs then, with the payload of the
// last update before it, and the updates after it make a new item.
func TestDebounceMaxDelayHonoured(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newRecordingEnv(t, b, nil)
		ctx := context.Background()
		const window, maxDelay = 10 * time.Second, 30 * time.Second
		t0 := e.clock.Now()
		enqueue := func(n int) durable.Enqueued {
			t.Helper()
			return must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: n}, durable.WithDebounce("feed", window, maxDelay)))
		}
		first := enqueue(0)
		for n := 1; n <= 5; n++ { // every 5 s, up to 25 s after the first
			e.clock.Advance(5 * time.Second)
			if res := enqueue(n); !res.Debounced || res.ID != first.ID {
				t.Fatalf("update %d: %+v, want item %d debounced", n, res, first.ID)
			}
			want := e.clock.Now().Add(window)
			if bound := t0.Add(maxDelay); want.After(bound) {
				want = bound
			}
			if it := item(t, e.q, first.ID); !it.NextAt.Equal(want) || !it.DebounceUntil.Equal(t0.Add(maxDelay)) {
				t.Fatalf("after update %d the item is due %v (bound %v), want %v", n, it.NextAt, it.DebounceUntil, want)
			}
		}
		e.clock.Advance(5 * time.Second) // 30 s: the maximum delay, though the last update was 5 s ago
		waitState(t, e.q, first.ID, record.StateSucceeded)
		if got := e.handled(); len(got) != 1 || got[0] != 5 {
			t.Fatalf("the handler ran with %v, want once with the last payload (5)", got)
		}
		next := enqueue(6)
		if next.Debounced || next.ID == first.ID {
			t.Fatalf("an enqueue after the item ran: %+v, want a new item", next)
		}
		if it := item(t, e.q, next.ID); !it.DebounceUntil.Equal(e.clock.Now().Add(maxDelay)) {
			t.Fatalf("the new item's bound: %v, want the maximum delay after its own first enqueue", it.DebounceUntil)
		}
	})
}

// Enqueues of one key from several goroutines, on two instances' pools on PostgreSQL, at once
// store one item: every enqueue answers it, all but one as debounced, and it runs once.
func TestDebounceConcurrentEnqueuesOneItem(t *testing.T) {
	eachBackendAndBouncer(t, func(t *testing.T, b backend) {
		e := newRecordingEnv(t, b, nil)
		queues := []*durable.Queue{e.q}
		if b.name == "postgres" {
			queues = append(queues, b.queue(t, durable.Config{Clock: e.clock}))
		}
		const goroutines, each = 8, 10
		var (
			wg        sync.WaitGroup
			mu        sync.Mutex
			ids       = map[record.ItemID]int{}
			inserted  int
			startLine = make(chan struct{})
		)
		for g := range goroutines {
			q := queues[g%len(queues)]
			wg.Go(func() {
				<-startLine
				for i := range each {
					res, err := q.Enqueue(context.Background(), &Work{N: 100*g + i}, durable.WithDebounce("account:7", time.Minute, time.Hour))
					mu.Lock()
					if err != nil {
						t.Error(err)
					}
					ids[res.ID]++
					if !res.Debounced {
						inserted++
					}
					mu.Unlock()
				}
			})
		}
		close(startLine)
		wg.Wait()
		if len(ids) != 1 || inserted != 1 {
			t.Fatalf("%d enqueues of one key at once: items %v, %d inserted; want one item, inserted once", goroutines*each, ids, inserted)
		}
		var id record.ItemID
		for id = range ids {
		}
		if it := item(t, e.q, id); it.Debounces != goroutines*each-1 {
			t.Fatalf("the item took %d updates, want %d", it.Debounces, goroutines*each-1)
		}
		e.clock.Advance(time.Minute)
		waitState(t, e.q, id, record.StateSucceeded)
		if got := e.handled(); len(got) != 1 {
			t.Fatalf("the handler ran %d times (%v), want once", len(got), got)
		}
	})
}

// An enqueue of the key while its item runs stores a new item, which runs after the first one
// ended, with its own payload: the update is not lost in the item already running.
func TestDebounceWhileRunningMakesASecondItem(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		started, release := make(chan int, 2), make(chan struct{})
		e := newRecordingEnv(t, b, func(w *Work) {
			started <- w.N
			if w.N == 1 {
				<-release
			}
		})
		ctx := context.Background()
		const window = 10 * time.Second
		enqueue := func(n int) durable.Enqueued {
			t.Helper()
			return must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: n}, durable.WithDebounce("doc:3", window, time.Minute)))
		}
		first := enqueue(1)
		e.clock.Advance(window)
		if n := <-started; n != 1 {
			t.Fatalf("the first call had %d", n)
		}
		second := enqueue(2)
		if second.Debounced || second.ID == first.ID {
			t.Fatalf("an enqueue while the item runs: %+v, want a new item", second)
		}
		if third := enqueue(3); !third.Debounced || third.ID != second.ID {
			t.Fatalf("the next enqueue: %+v, want the new item %d debounced", third, second.ID)
		}
		e.clock.Advance(window)
		// Due, the second item waits for the first: no claim takes it while the first runs.
		if cl := must[[]driver.Claimed](t)(durable.StoreOf(e.q).Claim(ctx, "probe", e.clock.Now().Add(time.Hour), time.Minute, 10)); len(cl) != 0 {
			t.Fatalf("a claim while the key's first item runs took %+v", cl)
		}
		close(release)
		waitState(t, e.q, second.ID, record.StateSucceeded)
		if got := e.handled(); len(got) != 2 || got[0] != 1 || got[1] != 3 {
			t.Fatalf("the handler ran with %v, want 1 then 3", got)
		}
		e.mu.Lock()
		overlap := e.overlap
		e.mu.Unlock()
		if overlap {
			t.Fatal("the two items of the key ran at once")
		}
		if it := item(t, e.q, first.ID); it.State != record.StateSucceeded {
			t.Fatalf("the first item: %s", it.State)
		}
	})
}

// A WithDebounce that is wrong in itself, or beside an option that would decide what it
// decides, is refused with an error naming it and what is wrong, and nothing is stored.
func TestDebounceBadInput(t *testing.T) {
	q := typesQueue(t)
	ctx := context.Background()
	ok := durable.WithDebounce("k", time.Second, time.Minute)
	for _, c := range []struct {
		name string
		req  any
		opts []durable.EnqueueOption
		want string
	}{
		{"empty key", &Work{}, []durable.EnqueueOption{durable.WithDebounce("", time.Second, time.Minute)}, "the key is empty"},
		{"zero window", &Work{}, []durable.EnqueueOption{durable.WithDebounce("k", 0, time.Minute)}, "the window 0s is not positive"},
		{"negative window", &Work{}, []durable.EnqueueOption{durable.WithDebounce("k", -time.Second, time.Minute)}, "the window -1s is not positive"},
		{"max delay under the window", &Work{}, []durable.EnqueueOption{durable.WithDebounce("k", time.Minute, time.Second)},
			"the maximum delay 1s is shorter than the window 1m0s"},
		{"invalid key", &Work{}, []durable.EnqueueOption{durable.WithDebounce("k\xff", time.Second, time.Minute)}, "not valid UTF-8"},
		{"NUL in key", &Work{}, []durable.EnqueueOption{durable.WithDebounce("k\x00", time.Second, time.Minute)}, "NUL"},
		{"dedupe key", &Work{}, []durable.EnqueueOption{ok, durable.WithDedupeKey("d")}, `WithDedupeKey("d")`},
		{"request's dedupe key", &Unique{ID: "u"}, []durable.EnqueueOption{ok}, `the dedupe key "unique:u" of the request's DedupeKey method`},
		{"uniqueness window", &Work{}, []durable.EnqueueOption{ok, durable.WithUniqueFor(time.Hour)}, "WithUniqueFor(1h0m0s)"},
		{"token", &Work{}, []durable.EnqueueOption{ok, durable.WithToken("evt-1")}, `WithToken("evt-1")`},
		{"delay", &Work{}, []durable.EnqueueOption{ok, durable.WithDelay(time.Hour)}, "WithDelay(1h0m0s)"},
		{"run at", &Work{}, []durable.EnqueueOption{ok, durable.WithRunAt(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))}, "WithRunAt(2030-01-01T00:00:00Z)"},
	} {
		_, err := q.Enqueue(ctx, c.req, c.opts...)
		if err == nil || !strings.Contains(err.Error(), "WithDebounce") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming WithDebounce and saying %q", c.name, err, c.want)
		}
	}
	// Every problem is named at once, not the first alone.
	_, err := q.Enqueue(ctx, &Work{}, durable.WithDebounce("", time.Second, -time.Second), durable.WithDelay(time.Hour))
	for _, want := range []string{"the key is empty", "the maximum delay -1s is shorter than the window 1s", "WithDelay(1h0m0s)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("three problems at once: %v, want it to say %q", err, want)
		}
	}
	if st := stats(t, q); st.Counts[record.StatePending] != 0 {
		t.Fatalf("%d items stored by refused enqueues", st.Counts[record.StatePending])
	}
	// The request's dedupe key dropped, the enqueue is debounced.
	if res, err := q.Enqueue(ctx, &Unique{ID: "u"}, ok, durable.WithDedupeKey("")); err != nil || res.Duplicate {
		t.Fatalf("a debounced enqueue with the request's dedupe key dropped: %+v, %v", res, err)
	}
}
