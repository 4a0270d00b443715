package drivertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

// testDebounce: enqueues of one debounce key at once store one item, which takes each
// update's payload and is due a window after the last one, never later than the maximum delay
// after the first; it runs once, with the last payload, and an enqueue of the key after it
// ran stores a new item.
func testDebounce(t *testing.T, open OpenFunc) {
	e := newEnv(t, open)
	ctx := context.Background()
	t0 := e.clock.Now()
	opt := durable.WithDebounce("d", 10*time.Second, 30*time.Second)
	first := enqueue(t, e.q, 0, opt)
	if first.Debounced {
		t.Fatalf("the first enqueue of the key: %+v; want a new item", first)
	}
	var wg sync.WaitGroup
	results := make([]durable.Enqueued, 8)
	errs := make([]error, 8)
	for i := range results {
		wg.Go(func() { results[i], errs[i] = e.q.Enqueue(ctx, &work{N: i + 1}, opt) })
	}
	wg.Wait()
	for i, r := range results {
		if errs[i] != nil || r.ID != first.ID || !r.Debounced {
			t.Fatalf("concurrent enqueue %d of the key: %+v, %v; want item %d debounced", i, r, errs[i], first.ID)
		}
	}
	e.clock.Advance(25 * time.Second)
	if last := enqueue(t, e.q, 9, opt); last.ID != first.ID || !last.Debounced {
		t.Fatalf("an update 25 s later: %+v; want item %d debounced", last, first.ID)
	}
	it := item(t, e.q, first.ID)
	if string(it.Payload) != `{"n":9}` || !it.NextAt.Equal(t0.Add(30*time.Second)) || it.Debounces != 9 || it.DebounceKey != "d" {
		t.Fatalf("the item after 10 enqueues: payload %s due %v, %d updates, key %q; want the last payload, due at the maximum delay (%v), 9 updates",
			it.Payload, it.NextAt, it.Debounces, it.DebounceKey, t0.Add(30*time.Second))
	}
	ran := make(chan int, 4)
	start(t, e.q, sender(t, func(_ context.Context, w *work) error { ran <- w.N; return nil }))
	e.clock.Advance(5 * time.Second)
	eventually(t, 20*time.Second, "the debounced item to succeed", func() bool {
		return item(t, e.q, first.ID).State == record.StateSucceeded
	})
	if len(ran) != 1 {
		t.Fatalf("the handler ran %d times; want once", len(ran))
	}
	if n := <-ran; n != 9 {
		t.Fatalf("the handler ran with %d; want the last payload, 9", n)
	}
	if next := enqueue(t, e.q, 10, opt); next.Debounced || next.ID == first.ID {
		t.Fatalf("an enqueue of the key after its item ran: %+v; want a new item", next)
	}
}
