package budget_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/budget"
)

// TestConcurrentRetries: retries asked at once by many goroutines are never allowed past the
// allowance, and calls counted at once are all counted.
func TestConcurrentRetries(t *testing.T) {
	ctx := context.Background()
	b := budget.New(budget.Config{Ratio: 0.2, Floor: budget.NoFloor, Clock: newClock()})
	req := &GetUser{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				b.Count(ctx, req)
			}
		})
	}
	wg.Wait()
	var allowed atomic.Int64
	for range 8 {
		wg.Go(func() {
			for range 500 {
				if b.Retry(ctx, req) == nil {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	u := b.Snapshot()
	if allowed.Load() != 1600 || u[0].Calls != 8000 || u[0].Retries != 1600 || u[0].Refused != 2400 {
		t.Fatalf("allowed %d; usage %+v; want 1600 of 4000 retries allowed for 8000 calls", allowed.Load(), u)
	}
}

// TestCallsPlacedLate: calls wait uncounted in the window until the 64th call, a retry or a
// Snapshot places them, so at most 63 calls of a key are placed later than they were made.
func TestCallsPlacedLate(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	b := budget.New(budget.Config{Floor: budget.NoFloor, Window: 10 * time.Second, Clock: clk})
	busy, quiet := &GetUser{}, &GetOrder{}
	for range 64 {
		b.Count(ctx, busy) // the 64th places them, at 0 s
	}
	for range 10 {
		b.Count(ctx, quiet) // placed by the first retry or Snapshot
	}
	clk.Advance(15 * time.Second)
	u := b.Snapshot()
	if u[0].Key != "*budget_test.GetOrder" || u[0].Calls != 10 || u[1].Calls != 0 {
		t.Fatalf("usage %+v: want the quiet key's 10 calls placed now, the busy key's gone with the window", u)
	}
}

// TestIdleKeysDropped: once a budget holds 1024 keys, keys that counted nothing over a window
// are dropped, so the keys held follow the keys in use.
func TestIdleKeysDropped(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	b := budget.New(budget.Config{Window: 10 * time.Second, Clock: clk, Key: func(req any) string { return *req.(*string) }})
	for i := range 1024 {
		k := "k" + strconv.Itoa(i)
		b.Count(ctx, &k)
	}
	clk.Advance(20 * time.Second)
	k := "new"
	b.Count(ctx, &k)
	if u := b.Snapshot(); len(u) != 1 || u[0].Key != "new" {
		t.Fatalf("%d keys held after the idle ones' window, want the new one alone", len(u))
	}
}
