package durable_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/bulkhead"
	"github.com/switchboard-go/switchboard/behaviors/fallback"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/behaviors/timeout"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// The whole chain around a durable handler under the scheduler: fallback, deferral, retry,
// circuit breaker, timeout and bulkhead. The handler fails, hangs, succeeds; is refused by a
// full bulkhead, then fails for good; is refused by an open breaker, then succeeds. Every
// attempt row is what the handler did, and refusals leave none.
func TestChainUnderTheScheduler(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		reg := breaker.NewRegistry(breaker.Config{Key: func(any) string { return "dep" }, FailureThreshold: 3, OpenDuration: 30 * time.Second, Clock: e.clock})

		var mu sync.Mutex
		scripts := map[int][]string{
			1:  {"fail", "hang", "ok"}, // A
			2:  {"bad"},                // B (after a bulkhead refusal)
			3:  {"ok"},                 // C (after a breaker refusal)
			51: {"bad"},                // a waiting caller's request
		}
		hold, held := make(chan struct{}), make(chan struct{})
		var holdOnce sync.Once
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			if w.N == 99 { // holds the bulkhead's only slot, ignoring its context
				holdOnce.Do(func() { close(held) })
				<-hold
				return nil
			}
			mu.Lock()
			script := scripts[w.N]
			if len(script) == 0 {
				mu.Unlock()
				return errors.New("unscripted call")
			}
			step := script[0]
			scripts[w.N] = script[1:]
			mu.Unlock()
			switch step {
			case "fail":
				return statusError{code: 503}
			case "bad":
				return statusError{code: 400}
			case "hang":
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		}}, func(m *mediator.Mediator) {
			m.Use(fallback.NewFor(func(context.Context, *Work, error) (mediator.Void, error) { return void, nil }, fallback.Config{}))
			m.Use(durable.NewDeferral(e.q, durable.DeferralConfig{}))
			m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3, BaseDelay: time.Millisecond}}))
			m.Use(breaker.New(reg))
			m.Use(timeout.New(timeout.Config{Duration: 50 * time.Millisecond}))
			m.Use(bulkhead.New(bulkhead.Config{Limit: 1}))
		})
		chain := must[mediator.Chain](t)(mediator.Explain[*Work](m))
		want := "fallback (default, 30)\n  durable-deferral (default, 40)\n    retry (default, 50)\n      circuit-breaker (default, 60)\n" +
			"        timeout (default, 70)\n          bulkhead (default, 80)\n            handler\n"
		if chain.String() != want {
			t.Fatalf("chain:\n%s", chain)
		}
		// A caller that waits gets the fallback's answer for a failure that is not deferred.
		if _, err := mediator.Send(ctx, m, &Work{N: 51}); err != nil {
			t.Fatalf("waiting caller: %v", err)
		}

		t0 := e.clock.Now()
		a := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 1})).ID
		bID := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 2}, durable.WithRunAt(t0.Add(time.Hour)))).ID
		c := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 3}, durable.WithRunAt(t0.Add(2*time.Hour)))).ID
		start(t, e.q, m, durable.SchedulerConfig{Workers: 1})

		// A: fails (503), hangs (timeout), succeeds; one scheduler dispatch per attempt.
		rows := func(id record.ItemID, n int) []record.Attempt {
			t.Helper()
			var as []record.Attempt
			eventually(t, 20*time.Second, "attempt rows", func() bool {
				as = attempts(t, e.q, id)
				return len(as) >= n && item(t, e.q, id).State != record.StateRunning
			})
			return as
		}
		rows(a, 1)
		e.clock.Advance(time.Second)
		rows(a, 2)
		e.clock.Advance(2 * time.Second)
		waitState(t, e.q, a, record.StateSucceeded)
		as := attempts(t, e.q, a)
		if outcomes(as) != "1:failed 2:failed 3:succeeded" || as[0].Error != "status 503" || !strings.Contains(as[1].Error, "timeout: exceeded after 50ms") {
			t.Fatalf("A rows %s %+v", outcomes(as), as)
		}

		// B: refused by the full bulkhead (no row), then fails for good (dead).
		go func() { _, _ = mediator.Send(ctx, m, &Work{N: 99}) }()
		<-held
		e.clock.Set(t0.Add(time.Hour))
		eventually(t, 20*time.Second, "B's refusal", func() bool {
			it := item(t, e.q, bID)
			return it.State == record.StatePending && it.NextAt.After(t0.Add(time.Hour))
		})
		if it := item(t, e.q, bID); it.Attempts != 0 || len(attempts(t, e.q, bID)) != 0 {
			t.Fatalf("B after the bulkhead refusal: %+v", it)
		}
		close(hold)
		e.clock.Advance(time.Minute)
		it := waitState(t, e.q, bID, record.StateDead)
		if as := attempts(t, e.q, bID); outcomes(as) != "1:failed" || as[0].Error != "status 400" || it.Attempts != 1 {
			t.Fatalf("B: %+v rows %s", it, outcomes(as))
		}

		// C: refused by the open breaker (no row, parked on it), then succeeds as the probe.
		e.clock.Set(t0.Add(2*time.Hour - time.Second))
		if err := reg.Trip("dep"); err != nil { // open until 2h29s
			t.Fatal(err)
		}
		e.clock.Advance(time.Second)
		eventually(t, 20*time.Second, "C's refusal", func() bool { return item(t, e.q, c).ParkedKey == "dep" })
		if it := item(t, e.q, c); it.Attempts != 0 || len(attempts(t, e.q, c)) != 0 || !it.NextAt.Equal(t0.Add(2*time.Hour+probeDue(29*time.Second))) {
			t.Fatalf("C after the breaker refusal: %+v", it)
		}
		e.clock.Advance(probeDue(29 * time.Second))
		waitState(t, e.q, c, record.StateSucceeded)
		if as := attempts(t, e.q, c); outcomes(as) != "1:succeeded" {
			t.Fatalf("C rows %s", outcomes(as))
		}
		mu.Lock()
		defer mu.Unlock()
		for n, left := range scripts {
			if len(left) != 0 {
				t.Errorf("item %d: steps left %v", n, left)
			}
		}
		if st := stats(t, e.q); st.Counts[record.StateSucceeded] != 2 || st.Counts[record.StateDead] != 1 || st.Counts[record.StatePending] != 0 {
			t.Fatalf("final %+v", st.Counts)
		}
	})
}
