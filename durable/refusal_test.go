package durable_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// pausedError is the refusal of a user's own behavior: an operator paused the work.
type pausedError struct{ req any }

func (e *pausedError) Error() string { return "paused" }
func (e *pausedError) Refusal() behaviors.RefusalInfo {
	return behaviors.RefusalInfo{By: "pause", Request: e.req}
}

// A refusal of a user's own behavior is no attempt, as a breaker's or a bulkhead's: the
// claim is undone, and the item runs once the behavior lets it through.
func TestUserRefusalIsNoAttempt(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		var paused atomic.Bool
		var refused atomic.Int64
		paused.Store(true)
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error { return nil }}, func(m *mediator.Mediator) {
			m.Use(mediator.BehaviorFunc(func(ctx context.Context, req any, next mediator.Next) (any, error) {
				if paused.Load() {
					refused.Add(1)
					return nil, &pausedError{req: req}
				}
				return next(ctx, req)
			}), mediator.WithOrder(behaviors.BulkheadOrder))
		})
		id := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: 1})).ID
		start(t, e.q, m)
		eventually(t, 20*time.Second, "a refusal", func() bool { return refused.Load() > 0 && item(t, e.q, id).State == record.StatePending })
		if it := item(t, e.q, id); it.Attempts != 0 || len(attempts(t, e.q, id)) != 0 {
			t.Fatalf("after the refusal: %+v rows %s", it, outcomes(attempts(t, e.q, id)))
		}
		paused.Store(false)
		e.clock.Advance(time.Minute)
		waitState(t, e.q, id, record.StateSucceeded)
		if as := attempts(t, e.q, id); outcomes(as) != "1:succeeded" {
			t.Fatalf("rows %s", outcomes(as))
		}
	})
}
