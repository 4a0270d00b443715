package durable_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/ratelimit"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// An item the rate limiter refuses is parked until the next permit with no attempt charged,
// and runs once the permit has come. The limiter's MaxWait of an hour does not hold the
// scheduler's worker: a stored dispatch never waits for its permit.
func TestRateLimitedItemParksUntilThePermit(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		var mu sync.Mutex
		var ran []int
		rl := ratelimit.New(ratelimit.Config{Rate: 1, MaxWait: time.Hour, Clock: e.clock, Key: func(any) string { return "api" }})
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			mu.Lock()
			ran = append(ran, w.N)
			mu.Unlock()
			return nil
		}}, func(m *mediator.Mediator) { m.Use(rl) })
		first := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: 1})).ID
		second := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: 2})).ID
		refusedAt := e.clock.Now()
		start(t, e.q, m, durable.SchedulerConfig{Workers: 1})
		waitState(t, e.q, first, record.StateSucceeded)
		eventually(t, 20*time.Second, "the refusal of the second", func() bool {
			return rl.Snapshot()[0].Refused > 0 && item(t, e.q, second).State == record.StatePending
		})
		it := item(t, e.q, second)
		// Parked until the permit a second later (and a twentieth of it, the queue's spread
		// with Rand 0.5), with no attempt.
		if it.State != record.StatePending || it.Attempts != 0 || len(attempts(t, e.q, second)) != 0 ||
			!it.NextAt.Equal(refusedAt.Add(time.Second+50*time.Millisecond)) {
			t.Fatalf("refused item: %+v, rows %s", it, outcomes(attempts(t, e.q, second)))
		}
		mu.Lock()
		if len(ran) != 1 {
			t.Fatalf("ran %v before the permit", ran)
		}
		mu.Unlock()
		e.clock.Advance(2 * time.Second)
		waitState(t, e.q, second, record.StateSucceeded)
		if as := attempts(t, e.q, second); outcomes(as) != "1:succeeded" {
			t.Fatalf("rows %s", outcomes(as))
		}
	})
}
