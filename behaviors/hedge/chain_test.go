package hedge_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/budget"
	"github.com/switchboard-go/switchboard/behaviors/hedge"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/behaviors/timeout"
	"github.com/switchboard-go/switchboard/mediator"
)

var attemptID = mediator.NewContextKey[int]("test.attempt")

// The full chain, concurrent calls: retry → hedge → breaker → timeout → handler. Every
// attempt has its own per-attempt deadline, the losers the hedge cancels are not counted by
// the breaker (a threshold of one would trip on the first), a value bound to the request
// (WithFor) reaches every attempt, and the breaker still counts a real failure of a hedged
// attempt.
func TestFullChainConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := breaker.NewRegistry(breaker.Config{FailureThreshold: 1, Key: endpointKey})
		var n atomic.Int32
		var mu sync.Mutex
		var deadlines []time.Duration
		seen := map[*Call]bool{}
		var unbound atomic.Int32
		handler := func(ctx context.Context, q *Call) (*Reply, error) {
			n.Add(1)
			if v, ok := attemptID.GetFor(ctx, q); !ok || v != 7 {
				unbound.Add(1)
			}
			dl, _ := ctx.Deadline()
			mu.Lock()
			deadlines = append(deadlines, time.Until(dl))
			first := !seen[q]
			seen[q] = true
			mu.Unlock()
			took := 2 * time.Millisecond
			if q.Endpoint == "slow-first" && first {
				took = time.Second // the primary hangs until cancelled
			}
			tm := time.NewTimer(took)
			defer tm.Stop()
			select {
			case <-tm.C:
				if q.Endpoint == "broken" {
					return nil, &statusErr{Code: 500}
				}
				return &Reply{Text: q.Endpoint}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		h := hedge.New(hedge.Config{Delay: 10 * time.Millisecond, Key: endpointKey})
		m := build(t, handler,
			timeout.New(timeout.Config{Duration: 50 * time.Millisecond}),
			breaker.New(reg),
			h,
			retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 2, BaseDelay: time.Millisecond}}))
		chain, err := mediator.Explain[*Call](m)
		var names []string
		for _, st := range chain {
			names = append(names, st.Name)
		}
		if err != nil || fmt.Sprint(names) != "[retry hedge circuit-breaker timeout handler]" {
			t.Fatalf("%v %v", chain, err)
		}
		var wg sync.WaitGroup
		var failed atomic.Int32
		for range 40 {
			wg.Go(func() {
				q := &Call{Endpoint: "slow-first"}
				r, err := mediator.Send(attemptID.WithFor(context.Background(), q, 7), m, q)
				if err != nil || r.Text != "slow-first" {
					failed.Add(1)
				}
			})
		}
		wg.Wait()
		if failed.Load() != 0 || unbound.Load() != 0 {
			t.Fatalf("%d calls failed, %d attempts missed the request's bound value", failed.Load(), unbound.Load())
		}
		for _, d := range deadlines {
			if d != 50*time.Millisecond {
				t.Fatalf("an attempt started with %s to its deadline, want its own 50ms", d)
			}
		}
		if s := reg.Snapshot(); len(s) != 1 || s[0].State != breaker.StateClosed || s[0].Failures != 0 {
			t.Fatalf("breaker %+v: cancelled losers must not count", s)
		}
		snap := h.Snapshot()
		if len(snap) != 1 || snap[0].Sent == 0 || snap[0].Won == 0 {
			t.Fatalf("%+v", snap)
		}
		t.Logf("%d attempts for 40 calls, %+v", n.Load(), snap[0])

		// A counted failure still trips the breaker.
		_, err = mediator.Send(context.Background(), m, &Call{Endpoint: "broken"})
		if !errors.Is(err, breaker.ErrTripped) {
			t.Fatalf("%v", err)
		}
		if behaviors.IsRefusal(err) {
			t.Fatal("the trip is the handler's failure, not a refusal")
		}
	})
}

// A hedge the breaker refuses (it opened meanwhile) reached no dependency: it is reported
// refused after its Sent, and the call waits for the primary.
func TestHedgeRefusedByOpenBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := breaker.NewRegistry(breaker.Config{FailureThreshold: 1, Key: endpointKey})
		var n atomic.Int32
		handler := func(ctx context.Context, q *Call) (*Reply, error) {
			if n.Add(1) == 1 {
				if err := reg.Trip(q.Endpoint); err != nil { // opens after the primary passed
					return nil, err
				}
				time.Sleep(30 * time.Millisecond) // fake time: the primary's latency
			}
			return &Reply{Text: fmt.Sprint("attempt ", n.Load())}, nil
		}
		nt := &notes{}
		m := build(t, handler, breaker.New(reg), hedge.New(hedge.Config{Delay: 10 * time.Millisecond,
			OnHedge: []func(context.Context, hedge.Notice){nt.on}}))
		start := time.Now()
		r, err := mediator.Send(context.Background(), m, &Call{Endpoint: "b"})
		if err != nil || r.Text != "attempt 1" || time.Since(start) != 30*time.Millisecond || n.Load() != 1 ||
			nt.String() != "sent 1, refused 1, won 0" {
			t.Fatalf("%v %v after %s, %d handler calls, notices %q", r, err, time.Since(start), n.Load(), nt)
		}
	})
}

// Calls that end around their delay, many at once: each gets its own answer, whether a hedge
// was sent or not (the state of calls that sent none is reused).
func TestConcurrentCallsAroundTheDelay(t *testing.T) {
	var n atomic.Int64
	handler := func(ctx context.Context, q *Call) (*Reply, error) {
		d := time.Duration(n.Add(1)%7) * 300 * time.Microsecond
		tm := time.NewTimer(d)
		defer tm.Stop()
		select {
		case <-tm.C:
			return &Reply{Text: q.Endpoint}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	b := budget.New(budget.Config{Ratio: 0.5})
	h := hedge.New(hedge.Config{Delay: time.Millisecond, MaxHedges: 2, Budget: b, Key: endpointKey})
	m := build(t, handler, h)
	var wg sync.WaitGroup
	var wrong atomic.Int32
	for w := range 8 {
		wg.Go(func() {
			for i := range 150 {
				q := &Call{Endpoint: fmt.Sprint(w, "/", i%3)}
				r, err := mediator.Send(context.Background(), m, q)
				if err != nil || r.Text != q.Endpoint {
					wrong.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if wrong.Load() != 0 {
		t.Fatalf("%d calls got another call's answer or failed", wrong.Load())
	}
	var sent, refused uint64
	for _, k := range h.Snapshot() {
		sent += k.Sent
		refused += k.Refused
	}
	if sent == 0 {
		t.Fatal("no hedge was sent: the test did not cross the delay")
	}
	t.Logf("%d attempts for 1,200 calls: %d hedges sent, %d refused by the budget", n.Load(), sent, refused)
}

// Retry outside and hedging inside share one budget: each Send is counted once, and the
// hedges and retries together draw on it.
func TestRetryAndHedgeShareABudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := budget.New(budget.Config{Ratio: 0.5, Floor: budget.NoFloor})
		s := &scripted{steps: []step{
			{took: 30 * time.Millisecond}, {took: 30 * time.Millisecond}, // call 1: hedged, the primary wins
			{}, {}, {}, {}, // calls 2-5: fast
		}}
		m := build(t, s.Handle,
			hedge.New(hedge.Config{Delay: 10 * time.Millisecond, Budget: b}),
			retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 2}, Budget: b}))
		for range 5 {
			if _, err := mediator.Send(context.Background(), m, &Call{}); err != nil {
				t.Fatal(err)
			}
		}
		if u := b.Snapshot(); len(u) != 1 || u[0].Calls != 5 || u[0].Retries != 1 {
			t.Fatalf("budget %+v: want 5 calls (each Send once) and the one hedge", u)
		}
	})
}
