package durable_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/ratelimit"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// providerCall is the request a stored item's handler sends to its provider, with its own
// pipeline: an in-process retry and a rate limit, as an HTTP call's would have.
type providerCall struct {
	mediator.Command
	N int
}

// A stored dispatch whose handler's call is retried in process, fails at the provider, and
// whose retry is then refused by the rate limiter reached its dependency: it is a failed
// attempt, charged once and retried no earlier than the next permit, never dead for it (the
// retry's error wraps a refusal, which says it is not worth another try, and that must not
// decide the item's fate). A dispatch whose call meets only the refusal made no attempt: it is
// parked on the refusal with none charged.
func TestStoredDispatchRefusedAfterAFailureIsRetriedNotDead(t *testing.T) {
	for _, tc := range []struct {
		name       string
		spend      bool // the limiter's permit is spent before the item runs
		wantCount  int  // attempts charged
		wantCalled int64
	}{
		{name: "failure then refusal", wantCount: 1, wantCalled: 1},
		{name: "refusal only", spend: true, wantCount: 0, wantCalled: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachBackend(t, func(t *testing.T, b backend) {
				e := newEnv(t, b)
				var called atomic.Int64
				rl := ratelimit.New(ratelimit.Config{Rate: 1, Clock: e.clock, Key: func(any) string { return "provider" }})
				var m *mediator.Mediator
				m = mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
					_, err := mediator.Send(ctx, m, &providerCall{N: w.N})
					return err
				}}, func(m *mediator.Mediator) {
					mediator.HandleFunc(m, func(ctx context.Context, c *providerCall) (mediator.Void, error) {
						called.Add(1)
						return mediator.Void{}, unavailable{}
					})
					m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3, BaseDelay: time.Millisecond, Jitter: behaviors.Off}}),
						mediator.ForRequest[*providerCall]())
					m.Use(rl, mediator.ForRequest[*providerCall]())
				})
				if tc.spend {
					if _, err := mediator.Send(context.Background(), m, &providerCall{N: -1}); err == nil {
						t.Fatal("the spending call succeeded")
					}
					called.Store(0)
				}
				id := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: 1})).ID
				start(t, e.q, m, durable.SchedulerConfig{Workers: 1})
				var it record.Item
				eventually(t, 20*time.Second, "the item's first claim to end", func() bool {
					it = item(t, e.q, id)
					return it.State != record.StateRunning && (it.LastError != "" || it.ParkedKey != "" || it.State != record.StatePending)
				})
				if it.State != record.StatePending {
					t.Fatalf("item is %s, want pending: %s", it.State, it.LastError)
				}
				if got := it.Counted(); got != tc.wantCount {
					t.Errorf("attempts charged %d, want %d (rows %s)", got, tc.wantCount, outcomes(attempts(t, e.q, id)))
				}
				if got := called.Load(); got != tc.wantCalled {
					t.Errorf("provider called %d times, want %d", got, tc.wantCalled)
				}
				// Due no earlier than the next permit, a second after the first.
				if min := e.clock.Now().Add(900 * time.Millisecond); it.NextAt.Before(min) {
					t.Errorf("due at %v, before the next permit (%v)", it.NextAt, min)
				}
				if dl, err := e.q.DeadLetters(context.Background(), durable.DeadLetterFilter{}); err != nil || len(dl.Letters) != 0 {
					t.Errorf("dead letters %v (%v)", dl, err)
				}
			})
		})
	}
}
