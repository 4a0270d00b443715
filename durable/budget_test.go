package durable_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/budget"
	"github.com/switchboard-go/switchboard/behaviors/ratelimit"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/mediator"
)

// budgetOutage sends n requests to a dependency that fails every call, through a pipeline of
// the durable deferral and retry (3 attempts in process, budget b when not nil), and runs the
// scheduler (5 attempts per stored item) for run of virtual time. It returns how many calls
// the dependency received, the queue, the ids of the items, and b's usage 5 s into the run
// (within the window of the calls).
func budgetOutage(t *testing.T, n int, run time.Duration, b *budget.Budget, opts ...durable.RegisterOption) (int, *durable.Queue, []record.ItemID, []budget.Usage) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "q.db")
	q, err := durable.Open(context.Background(), sqlite.Open(path), durable.Config{
		Policy: retry.Policy{MaxAttempts: 5, BaseDelay: 100 * time.Millisecond, Jitter: behaviors.Off},
		Rand:   func() float64 { return 0.5 },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	durable.Register[*Work](q, "test.work", opts...)
	var received atomic.Int64
	m := mediatorFor(t, handlers{work: func(context.Context, *Work) error {
		received.Add(1)
		return retryableErr{"down"}
	}}, func(m *mediator.Mediator) {
		m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3, BaseDelay: 10 * time.Millisecond}, Budget: b}))
		m.Use(durable.NewDeferral(q, durable.DeferralConfig{}))
	})
	var ids []record.ItemID
	for i := range n {
		_, err := mediator.Send(context.Background(), m, &Work{N: i})
		var de *durable.DeferredError
		if !errors.As(err, &de) {
			t.Fatalf("send %d: %v, want it deferred", i, err)
		}
		ids = append(ids, de.ItemID)
	}
	s, err := durable.NewScheduler(q, m, durable.SchedulerConfig{PollInterval: time.Second, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	// Virtual time: the bubble's clock moves when every goroutine waits.
	time.Sleep(5 * time.Second)
	var usage []budget.Usage
	if b != nil {
		usage = b.Snapshot()
	}
	time.Sleep(run - 5*time.Second)
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	return int(received.Load()), q, ids, usage
}

// TestBudgetRetriesAndRedispatchesShareOne: in-process retries and the scheduler's
// re-dispatches of deferred items draw on one budget, so a dependency that is down receives
// at most 1.2× the calls plus the floor's allowance over the run; without the budget it
// receives every attempt both policies allow.
func TestBudgetRetriesAndRedispatchesShareOne(t *testing.T) {
	const n, ratio, floor = 100, 0.2, 1.0
	const window, run = 10 * time.Second, 60 * time.Second
	synctest.Test(t, func(t *testing.T) {
		got, _, _, _ := budgetOutage(t, n, run, nil)
		if got != n*(3+5) {
			t.Fatalf("without a budget the dependency received %d calls, want %d (3 in process and 5 stored attempts each)", got, n*8)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		b := budget.New(budget.Config{Ratio: ratio, Floor: floor, Window: window})
		got, q, ids, u := budgetOutage(t, n, run, b)
		// Every call was made at the start; the floor gives floor × window retries in each
		// window of the run, the first included.
		windows := int(run/window) + 1
		bound := float64(n)*(1+ratio) + floor*window.Seconds()*float64(windows)
		if float64(got) > bound {
			t.Fatalf("the dependency received %d calls, more than %.0f (1.2 × %d + the floor's %d windows of %v)", got, bound, n, windows, floor*window.Seconds())
		}
		if got <= n+int(ratio*n) {
			t.Fatalf("the dependency received %d calls: the floor allowed no durable retry", got)
		}
		if len(u) != 1 || u[0].Calls != n || u[0].Refused == 0 {
			t.Fatalf("usage %+v: want %d calls (a re-dispatch is no call) and refusals", u, n)
		}
		// Over budget the items park (the default): none is dead but by its attempts running
		// out, and each is charged only the attempts made.
		charged, parked := 0, 0
		for _, id := range ids {
			it := item(t, q, id)
			switch {
			case it.State == record.StatePending:
				parked++
			case it.State != record.StateDead || it.Attempts != 5 || strings.Contains(it.LastError, "retry budget"):
				t.Fatalf("item %d is %s after %d attempts (%s), want pending (parked over budget) or dead after 5", id, it.State, it.Attempts, it.LastError)
			}
			charged += it.Attempts
		}
		if parked == 0 {
			t.Fatal("no item is parked over budget")
		}
		if inProcess := got - charged; inProcess < n || inProcess > 3*n {
			t.Fatalf("%d calls, %d stored attempts charged: the charges do not match the calls", got, charged)
		}
		t.Logf("%d calls reached the dependency for %d sent (%.2f×), bound %.0f; %d stored attempts; %d items parked", got, n, float64(got)/n, bound, charged, parked)
	})
}

// TestBudgetFailOverBudget: with FailOverBudget, an item whose re-dispatch the budget refuses
// is a dead letter naming the budget.
func TestBudgetFailOverBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := budget.New(budget.Config{Floor: budget.NoFloor})
		got, q, ids, _ := budgetOutage(t, 10, 30*time.Second, b, durable.WithRetryBudget(nil, durable.FailOverBudget))
		if got > 10+2 {
			t.Fatalf("%d calls for 10 sent at 20%% and no floor", got)
		}
		dead := 0
		for _, id := range ids {
			it := item(t, q, id)
			if it.State == record.StateDead {
				dead++
				if !strings.Contains(it.LastError, "retry budget") {
					t.Fatalf("dead letter %q does not name the budget", it.LastError)
				}
				lp, err := q.DeadLetters(context.Background(), durable.DeadLetterFilter{})
				ls := lp.Letters
				if err != nil {
					t.Fatal(err)
				}
				for _, l := range ls {
					if l.ItemID == id && l.Cause != record.DeadOverBudget {
						t.Fatalf("item %d's letter: cause %q, want %q", id, l.Cause, record.DeadOverBudget)
					}
				}
			}
		}
		if dead < 8 {
			t.Fatalf("%d of 10 items dead, want those the budget refused (at least 8)", dead)
		}
	})
}

// An item enqueued directly that the rate limiter refuses before its first attempt is not a
// retry when it runs: the refusal set its last error, but no call was made, so the budget
// counts the attempt as a call and charges no retry. (Regression: the last error alone made
// it a re-dispatch.)
func TestBudgetRefusedFirstAttemptIsACall(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		bud := budget.New(budget.Config{Clock: e.clock})
		rl := ratelimit.New(ratelimit.Config{Rate: 1, Clock: e.clock, Key: func(any) string { return "api" }})
		var ran atomic.Int64
		m := mediatorFor(t, handlers{work: func(context.Context, *Work) error {
			ran.Add(1)
			return nil
		}}, func(m *mediator.Mediator) {
			m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3, BaseDelay: 10 * time.Millisecond}, Budget: bud, Clock: e.clock}))
			m.Use(rl)
		})
		first := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: 1})).ID
		second := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: 2})).ID
		start(t, e.q, m, durable.SchedulerConfig{Workers: 1})
		waitState(t, e.q, first, record.StateSucceeded)
		eventually(t, 20*time.Second, "the refusal of the second", func() bool {
			return rl.Snapshot()[0].Refused > 0 && item(t, e.q, second).State == record.StatePending
		})
		if it := item(t, e.q, second); it.Attempts != 0 || it.LastError == "" {
			t.Fatalf("refused item: %d attempts, last error %q; want none and the refusal", it.Attempts, it.LastError)
		}
		e.clock.Advance(2 * time.Second)
		waitState(t, e.q, second, record.StateSucceeded)
		if n := ran.Load(); n != 2 {
			t.Fatalf("the handler ran %d times, want 2", n)
		}
		// Two calls: the first item's and the second's first attempt (the retry behavior counts
		// no call of a Send the limiter inside it refused).
		if u := bud.Snapshot(); len(u) != 1 || u[0].Calls != 2 || u[0].Retries != 0 {
			t.Fatalf("budget usage %+v: want 2 calls and no retry (the refused item's first attempt is a call)", u)
		}
	})
}

// A registration's own retry budget counts its items' first attempts as calls when the
// pipeline has no retry behavior holding it (nothing else would count them, and its retries
// would be held to the floor alone), and only once when the pipeline's retry behavior holds
// the same budget. (Regression: with no retry behavior no call was counted.)
func TestBudgetOwnCountsFirstAttempts(t *testing.T) {
	for _, withRetry := range []bool{false, true} {
		name := "no retry behavior"
		if withRetry {
			name = "retry behavior holds it"
		}
		t.Run(name, func(t *testing.T) {
			b := sqliteBackend(t)
			clock := newFakeClock()
			bud := budget.New(budget.Config{Clock: clock})
			q := b.queue(t, durable.Config{Policy: fastPolicy, Clock: clock, Rand: func() float64 { return 0.5 }},
				durable.WithRetryBudget(bud, durable.ParkOverBudget))
			failed := map[int]bool{}
			var mu sync.Mutex
			m := mediatorFor(t, handlers{work: func(_ context.Context, w *Work) error {
				mu.Lock()
				defer mu.Unlock()
				if !failed[w.N] {
					failed[w.N] = true
					return retryableErr{"once"}
				}
				return nil
			}}, func(m *mediator.Mediator) {
				if withRetry {
					m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 1}, Budget: bud, Clock: clock}))
				}
			})
			const n = 20
			var ids []record.ItemID
			for i := range n {
				ids = append(ids, must[durable.Enqueued](t)(q.Enqueue(context.Background(), &Work{N: i})).ID)
			}
			start(t, q, m, durable.SchedulerConfig{Workers: 1})
			eventually(t, 20*time.Second, "every first attempt", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(failed) == n
			})
			u := bud.Snapshot()
			if len(u) != 1 || u[0].Calls != n {
				t.Fatalf("budget usage %+v: want the %d first attempts counted as calls, once each", u, n)
			}
		})
	}
}

// A re-dispatch the budget allowed that the pipeline then refuses (a behaviors.Refusal) did
// not reach the dependency: its retry is given back. (Regression: it kept the charge.)
func TestBudgetRefusedRedispatchIsRefunded(t *testing.T) {
	b := sqliteBackend(t)
	clock := newFakeClock()
	bud := budget.New(budget.Config{Clock: clock})
	q := b.queue(t, durable.Config{Policy: fastPolicy, Clock: clock, Rand: func() float64 { return 0.5 }},
		durable.WithRetryBudget(bud, durable.ParkOverBudget))
	var refusing atomic.Bool
	var refused, calls atomic.Int64
	m := mediatorFor(t, handlers{work: func(context.Context, *Work) error {
		calls.Add(1)
		refusing.Store(true) // from now on the pipeline refuses
		return retryableErr{"down"}
	}}, func(m *mediator.Mediator) {
		m.Use(mediator.BehaviorFunc(func(ctx context.Context, req any, next mediator.Next) (any, error) {
			if refusing.Load() {
				refused.Add(1)
				return nil, &pausedError{req: req}
			}
			return next(ctx, req)
		}), mediator.WithOrder(behaviors.BulkheadOrder))
	})
	id := must[durable.Enqueued](t)(q.Enqueue(context.Background(), &Work{N: 1})).ID
	start(t, q, m, durable.SchedulerConfig{Workers: 1})
	eventually(t, 20*time.Second, "the failed first attempt", func() bool {
		it := item(t, q, id)
		return it.State == record.StatePending && it.Attempts == 1 && it.LastError == "down"
	})
	clock.Advance(2 * time.Second) // its retry is due
	eventually(t, 20*time.Second, "the refusal of the re-dispatch", func() bool {
		return refused.Load() > 0 && item(t, q, id).State == record.StatePending
	})
	if n := calls.Load(); n != 1 {
		t.Fatalf("the dependency got %d calls, want 1", n)
	}
	if u := bud.Snapshot(); len(u) != 1 || u[0].Calls != 1 || u[0].Retries != 0 {
		t.Fatalf("budget usage %+v: want the one call and no retry (the refused re-dispatch's retry given back)", u)
	}
}
