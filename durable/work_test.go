package durable_test

import (
	"context"
	"testing"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/durabletest"
	"github.com/switchboard-go/switchboard/durable/record"
)

// durabletest.Work runs the scheduler's per-item code in the test's goroutine: the handler runs
// once per due item, a failure is retried after its backoff (due when the clock says so), and
// the item is dead after MaxAttempts, with one attempt row per try. No scheduler, no sleep.
func TestWorkWithoutScheduler(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		calls := 0
		fail := false
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			calls++
			if d, ok := durable.FromContext(ctx, w); !ok || d.Instance != "durabletest" {
				t.Errorf("dispatch %+v, %v", d, ok)
			}
			if fail {
				return retryableErr{"downstream down"}
			}
			return nil
		}})
		ok := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 1})).ID
		if got := durabletest.Work(ctx, t, e.q, m); got != (durabletest.Result{Succeeded: 1}) || calls != 1 {
			t.Fatalf("Work = %v, %d calls", got, calls)
		}
		if it := item(t, e.q, ok); it.State != record.StateSucceeded || outcomes(attempts(t, e.q, ok)) != "1:succeeded" {
			t.Fatalf("item %+v", it)
		}

		fail, calls = true, 0
		id := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 2})).ID
		for n := 1; n < fastPolicy.MaxAttempts; n++ {
			if got := durabletest.Work(ctx, t, e.q, m); got != (durabletest.Result{Retried: 1}) {
				t.Fatalf("attempt %d: Work = %v", n, got)
			}
			it := item(t, e.q, id)
			delay := fastPolicy.Delay(n, 0.5)
			if it.State != record.StatePending || !it.NextAt.Equal(e.clock.Now().Add(delay)) {
				t.Fatalf("after attempt %d: %+v, want due in %v", n, it, delay)
			}
			if got := durabletest.Work(ctx, t, e.q, m); got != (durabletest.Result{}) {
				t.Fatalf("before its backoff: Work = %v", got)
			}
			e.clock.Advance(delay)
		}
		if got := durabletest.Work(ctx, t, e.q, m); got != (durabletest.Result{Dead: 1}) {
			t.Fatalf("last attempt: Work = %v", got)
		}
		it := item(t, e.q, id)
		if it.State != record.StateDead || it.Attempts != fastPolicy.MaxAttempts || calls != fastPolicy.MaxAttempts ||
			outcomes(attempts(t, e.q, id)) != "1:failed 2:failed 3:failed 4:failed 5:failed" {
			t.Fatalf("dead letter %+v rows %s, %d calls", it, outcomes(attempts(t, e.q, id)), calls)
		}
	})
}
