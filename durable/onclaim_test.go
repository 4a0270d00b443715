package durable_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

// OnClaim hears every claim round trip, with its time, the items it claimed and its error:
// the claims of an idle scheduler (none claimed) and the claim that took an enqueued item. An
// observer before it that panics is recovered and logged, and does not stop it or the
// scheduler.
func TestSchedulerOnClaim(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		q := b.queue(t, durable.Config{})
		m := mediatorFor(t, handlers{})
		var mu sync.Mutex
		var calls, claimed int
		var failed error
		var took time.Duration
		logs := &logRecorder{}
		var panicked atomic.Bool
		start(t, q, m, durable.SchedulerConfig{Logger: logs.logger(), OnClaim: []func(time.Duration, int, error){func(time.Duration, int, error) {
			if panicked.CompareAndSwap(false, true) {
				panic("observer broke")
			}
		}, func(d time.Duration, n int, err error) {
			mu.Lock()
			defer mu.Unlock()
			calls, claimed, took = calls+1, claimed+n, took+d
			if err != nil {
				failed = err
			}
		}}})
		e, err := q.Enqueue(context.Background(), &Work{N: 1})
		if err != nil {
			t.Fatal(err)
		}
		waitState(t, q, e.ID, record.StateSucceeded)
		eventually(t, 10*time.Second, "an idle claim after the item", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return claimed == 1 && calls >= 2
		})
		mu.Lock()
		defer mu.Unlock()
		if failed != nil || took <= 0 || !logs.has("durable: OnClaim panicked") {
			t.Fatal(failed, took, logs.has("durable: OnClaim panicked"))
		}
	})
}
