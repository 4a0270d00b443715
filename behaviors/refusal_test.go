package behaviors_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/mediator"
)

// pausedError is the refusal of a user's own behavior: the endpoint is paused by an operator.
// wait, when set, is a Retry-After hint: the pause says when it ends.
type pausedError struct {
	req  any
	wait time.Duration
}

func (e *pausedError) Error() string { return "paused" }
func (e *pausedError) Refusal() behaviors.RefusalInfo {
	return behaviors.RefusalInfo{By: "pause", Key: "api", Request: e.req}
}

// hintedPause is a pause that says when it ends.
type hintedPause struct{ pausedError }

func (e *hintedPause) RetryAfter() time.Duration { return e.wait }

// pause is a user's behavior that refuses every call while paused.
type pause struct {
	paused  atomic.Bool
	hint    time.Duration
	refused atomic.Int64
}

func (p *pause) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	if p.paused.Load() {
		p.refused.Add(1)
		if p.hint > 0 {
			return nil, &hintedPause{pausedError{req: req, wait: p.hint}}
		}
		return nil, &pausedError{req: req}
	}
	return next(ctx, req)
}

// A user's own refusal is a refusal like a breaker's: retry does not retry it (whatever its
// Classifier says), the breaker does not count it, and its outcome is refused.
func TestUserRefusalIsARefusal(t *testing.T) {
	// The breaker's Classifier counts everything: a refusal is not counted whatever it says.
	reg := breaker.NewRegistry(breaker.Config{Key: endpointKey, FailureThreshold: 1,
		Classifier: func(error) bool { return true }})
	p := &pause{}
	p.paused.Store(true)
	calls := 0
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *Call) (*Reply, error) { calls++; return &Reply{}, nil })
	m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3, BaseDelay: time.Millisecond,
		Classifier: func(error) bool { return true }}}))
	m.Use(breaker.New(reg))
	m.Use(p, mediator.WithOrder(behaviors.BulkheadOrder))
	mustBuild(m)
	req := &Call{Endpoint: "api"}
	_, err := mediator.Send(context.Background(), m, req)
	if !behaviors.IsRefusal(err) || !behaviors.Refused(err, req) {
		t.Fatalf("error %v is not a refusal of the request", err)
	}
	if got := behaviors.OutcomeOf(context.Background(), req, err); got != behaviors.OutcomeRefused {
		t.Fatalf("outcome %q, want refused", got)
	}
	if n := p.refused.Load(); n != 1 || calls != 0 {
		t.Fatalf("%d refusals, %d handler calls; want 1 (not retried), 0", n, calls)
	}
	if s, err := reg.Get("api"); err != nil || s.State != breaker.StateClosed || s.Failures != 0 {
		t.Fatalf("breaker %+v %v: the refusal was counted", s, err)
	}
	if breaker.CountsAsFailure(err) {
		t.Fatal("CountsAsFailure counts a refusal")
	}
	if (retry.Policy{MaxAttempts: 3, WaitForBreaker: behaviors.On}).Retries(err) {
		t.Fatal("a refusal without a Retry-After hint is retried")
	}
	// Refused names the request: a refusal of another request is not this one's.
	if behaviors.Refused(err, &Call{Endpoint: "api"}) {
		t.Fatal("Refused matches another request")
	}
}

// A user's refusal that says when it ends is waited for, as an open breaker is, when the
// policy waits for the breaker; and not retried when it does not.
func TestUserRefusalWithHintWaitsForBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, wait := range []behaviors.Switch{behaviors.Off, behaviors.On} {
			p := &pause{hint: 2 * time.Second}
			p.paused.Store(true)
			m := mediator.New(nil, mediator.Config{})
			mediator.HandleFunc(m, func(context.Context, *Call) (*Reply, error) { return &Reply{Text: "ok"}, nil })
			var delays []time.Duration
			m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3, BaseDelay: time.Millisecond, WaitForBreaker: wait},
				OnRetry: []func(context.Context, retry.Event){func(_ context.Context, e retry.Event) {
					delays = append(delays, e.Delay)
					p.paused.Store(false)
				}}}))
			m.Use(p, mediator.WithOrder(behaviors.BulkheadOrder))
			mustBuild(m)
			r, err := mediator.Send(context.Background(), m, &Call{Endpoint: "api"})
			switch wait {
			case behaviors.Off:
				if !behaviors.IsRefusal(err) || len(delays) != 0 {
					t.Fatalf("WaitForBreaker off: %v, delays %v", err, delays)
				}
			case behaviors.On:
				if err != nil || r.Text != "ok" || fmt.Sprint(delays) != "[2s]" {
					t.Fatalf("WaitForBreaker on: %v %v, delays %v", r, err, delays)
				}
			}
		}
	})
}
