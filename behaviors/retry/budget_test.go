package retry_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/budget"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/mediator"
)

// outage sends n calls, one after another, to a dependency that fails every call, with up to
// attempts attempts each, and returns how many calls the dependency received.
func outage(t *testing.T, n, attempts int, b *budget.Budget) int {
	t.Helper()
	var received atomic.Int64
	m := build(t, func(context.Context, *Call) (*Reply, error) {
		received.Add(1)
		return nil, &statusErr{Code: 503}
	}, retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: attempts, BaseDelay: time.Millisecond}, Budget: b}))
	for range n {
		if _, err := mediator.Send(context.Background(), m, &Call{Endpoint: "down"}); err == nil {
			t.Fatal("a call to a dependency that is down succeeded")
		}
	}
	return int(received.Load())
}

// TestBudgetOutage is the outage test: a dependency that fails every call receives
// MaxAttempts× the calls without a budget, and with a 20 % budget at most 1.2× plus the
// floor's allowance over the test's duration.
func TestBudgetOutage(t *testing.T) {
	const n, ratio, floor = 400, 0.2, 1.0
	const window = 10 * time.Second
	for _, attempts := range []int{3, 5} {
		synctest.Test(t, func(t *testing.T) {
			if got := outage(t, n, attempts, nil); got != attempts*n {
				t.Fatalf("without a budget the dependency received %d calls, want %d× %d", got, attempts, n)
			}
		})
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			b := budget.New(budget.Config{Ratio: ratio, Floor: floor, Window: window})
			got := outage(t, n, attempts, b)
			took := time.Since(start)
			// The floor allows floor × window retries per window; the test's duration spans
			// ceil(took/window) windows of them, at least one.
			windows := max(1, int((took+window-1)/window))
			bound := float64(n)*(1+ratio) + floor*window.Seconds()*float64(windows)
			if float64(got) > bound {
				t.Fatalf("MaxAttempts %d, budget 20%%: the dependency received %d calls in %s, more than %.0f (1.2 × %d + the floor's %d windows of %v)",
					attempts, got, took, bound, n, windows, floor*window.Seconds())
			}
			if got <= n {
				t.Fatalf("the budget allowed no retry at all: %d calls", got)
			}
			t.Logf("MaxAttempts %d: %d calls reached the dependency for %d sent (%.3f×) in %s; bound %.0f",
				attempts, got, n, float64(got)/n, took, bound)
		})
	}
}

// TestBudgetRefusalError: a retry the budget refuses ends the call with an *ExhaustedError
// that reaches the last failure, matches budget.ErrSpent, and is no refusal of the call.
func TestBudgetRefusalError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := budget.New(budget.Config{Floor: budget.NoFloor})
		last := &statusErr{Code: 503}
		m, s, _ := retrying(t, retry.Config{Policy: retry.Policy{MaxAttempts: 3}, Budget: b}, &statusErr{Code: 502}, last)
		req := &Call{Endpoint: "e"}
		ctx := context.Background()
		_, err := mediator.Send(ctx, m, req)
		var re *retry.ExhaustedError
		var se *statusErr
		var spent *budget.SpentError
		if !errors.As(err, &re) || re.Budget == nil || re.Attempts != 1 || s.Calls != 1 {
			t.Fatalf("err %v after %d calls, want the budget to stop after 1 attempt", err, s.Calls)
		}
		if !errors.As(err, &se) || se.Code != 502 || !errors.Is(err, budget.ErrSpent) ||
			!errors.Is(err, retry.ErrExhausted) || !errors.As(err, &spent) || spent != re.Budget ||
			!errors.Is(spent, se) {
			t.Fatalf("%v does not reach the failure and the budget's refusal", err)
		}
		if behaviors.IsRefusal(err) || behaviors.Refused(err, req) || behaviors.OutcomeOf(ctx, req, err) != behaviors.OutcomeFailed {
			t.Fatalf("%v reads as a refusal of the call, whose attempt reached the handler", err)
		}
		if behaviors.RetryAfter(err) != re.Budget.Wait || re.Budget.Wait <= 0 {
			t.Fatalf("RetryAfter %s, budget wait %s", behaviors.RetryAfter(err), re.Budget.Wait)
		}
	})
}

// TestBudgetCallerCancellation: a call the caller cancels is not retried and asks nothing of
// the budget.
func TestBudgetCallerCancellation(t *testing.T) {
	var spent int
	b := budget.New(budget.Config{OnSpend: []func(context.Context, budget.Spend){func(context.Context, budget.Spend) { spent++ }}})
	ctx, cancel := context.WithCancel(context.Background())
	m := build(t, func(ctx context.Context, _ *Call) (*Reply, error) {
		cancel()
		return nil, ctx.Err()
	}, retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3}, Budget: b}))
	if _, err := mediator.Send(ctx, m, &Call{}); !errors.Is(err, context.Canceled) || spent != 0 {
		t.Fatalf("err %v, %d retries asked", err, spent)
	}
	if u := b.Snapshot(); len(u) != 1 || u[0].Calls != 1 {
		t.Fatalf("usage %+v, want the one call counted", u)
	}
}

// holder is a behavior inside retry that shares its budget, as hedging does: it counts the
// call with Call, which counts nothing when retry marked the context.
type holder struct{ b *budget.Budget }

func (h *holder) RetryBudget() *budget.Budget { return h.b }

func (h *holder) Placement() mediator.Placement {
	return mediator.Placement{Name: "holder", Order: behaviors.RetryOrder + 5}
}

func (h *holder) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	return next(h.b.Call(ctx, req), req)
}

// TestBudgetSharedInPipeline: with another behavior of the pipeline holding the same budget,
// one Send is counted once.
func TestBudgetSharedInPipeline(t *testing.T) {
	b := budget.New(budget.Config{})
	m := build(t, func(context.Context, *Call) (*Reply, error) { return &Reply{}, nil },
		retry.New(retry.Config{Budget: b}), &holder{b: b})
	for range 3 {
		if _, err := mediator.Send(context.Background(), m, &Call{}); err != nil {
			t.Fatal(err)
		}
	}
	if u := b.Snapshot(); len(u) != 1 || u[0].Calls != 3 {
		t.Fatalf("usage %+v, want 3 calls for 3 Sends", u)
	}
}

// TestBudgetSuccessAllocs: a budget adds no allocation to the retry behavior's success path.
func TestBudgetSuccessAllocs(t *testing.T) {
	ctx, req, next := context.Background(), &Ping{}, benchNext()
	rt := retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3}, Budget: budget.New(budget.Config{})})
	if n := testing.AllocsPerRun(1000, func() { sinkAny, _ = rt.Handle(ctx, req, next) }); n != 0 {
		t.Fatalf("the success path allocates %v times per call", n)
	}
}

// TestBudgetValidate: the budget's invalid configuration is reported by the behavior's Validate.
func TestBudgetValidate(t *testing.T) {
	err := retry.Config{Budget: budget.New(budget.Config{Ratio: -1})}.Validate()
	if err == nil || !strings.Contains(err.Error(), "Budget") || !strings.Contains(err.Error(), "Ratio") {
		t.Fatalf("Validate: %v", err)
	}
}

// refusal is a refusal of req that says when it may pass, as an open breaker's does.
type refusal struct {
	req   any
	after time.Duration
}

func (r *refusal) Error() string { return "refused" }
func (r *refusal) Refusal() behaviors.RefusalInfo {
	return behaviors.RefusalInfo{By: "breaker", Request: r.req}
}
func (r *refusal) RetryAfter() time.Duration { return r.after }
func retriesOf(t *testing.T, b *budget.Budget) (calls, retries int) {
	t.Helper()
	u := b.Snapshot()
	if len(u) != 1 {
		t.Fatalf("usage %+v, want one key", u)
	}
	return u[0].Calls, u[0].Retries
}

// TestBudgetRefundCancelledWait: a caller who cancels during the wait before a retry is not
// charged for the retry that was never made (regression: the retry was asked of the budget
// before the wait and kept its charge).
func TestBudgetRefundCancelledWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := budget.New(budget.Config{Ratio: 1, Floor: budget.NoFloor})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		m := build(t, func(context.Context, *Call) (*Reply, error) { return nil, &statusErr{Code: 503} },
			retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3, BaseDelay: time.Second}, Budget: b,
				OnRetry: []func(context.Context, retry.Event){func(context.Context, retry.Event) { cancel() }}}))
		if _, err := mediator.Send(ctx, m, &Call{}); !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want the caller's cancellation", err)
		}
		if calls, retries := retriesOf(t, b); calls != 1 || retries != 0 {
			t.Fatalf("%d calls, %d retries charged; want 1 call and the cancelled retry refunded", calls, retries)
		}
	})
}

// TestBudgetRefundRefusedAttempt: a retried attempt that comes back refused (an open breaker,
// with WaitForBreaker) reached no dependency: its charge is given back, and a first attempt
// refused is no call (regression: each refused retry kept its charge, and a refused call grew
// the allowance).
func TestBudgetRefundRefusedAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := budget.New(budget.Config{Ratio: 5, Floor: budget.NoFloor})
		req := &Call{}
		var n int
		m := build(t, func(context.Context, *Call) (*Reply, error) {
			n++
			if n == 2 {
				return nil, &refusal{req: req, after: time.Second}
			}
			return nil, &statusErr{Code: 503}
		}, retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3, WaitForBreaker: behaviors.On}, Budget: b}))
		if _, err := mediator.Send(context.Background(), m, req); err == nil || n != 3 {
			t.Fatalf("err %v after %d attempts, want a failure after 3", err, n)
		}
		if calls, retries := retriesOf(t, b); calls != 1 || retries != 1 {
			t.Fatalf("%d calls, %d retries charged; want 1 call and 1 retry (the refused one refunded)", calls, retries)
		}

		// A call refused at its first attempt reached nothing: it is not counted.
		refused := &Call{}
		m = build(t, func(context.Context, *Call) (*Reply, error) { return nil, &refusal{req: refused} },
			retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3}, Budget: b}))
		if _, err := mediator.Send(context.Background(), m, refused); !behaviors.Refused(err, refused) {
			t.Fatalf("err %v, want the refusal", err)
		}
		if calls, _ := retriesOf(t, b); calls != 1 {
			t.Fatalf("%d calls counted, want the refused call not counted", calls)
		}
	})
}
