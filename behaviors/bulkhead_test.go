package behaviors_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/mediator"
)

func TestBulkheadLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var running, peak atomic.Int32
		bh := behaviors.NewBulkhead(behaviors.BulkheadConfig{Limit: 2, Key: endpointKey})
		r := behaviors.NewBreakerRegistry(behaviors.BreakerConfig{FailureThreshold: 1})
		m := build(t, func(ctx context.Context, q *Call) (*Reply, error) {
			n := running.Add(1)
			peak.Store(max(peak.Load(), n))
			<-release
			running.Add(-1)
			return &Reply{}, nil
		}, bh, behaviors.NewCircuitBreaker(r, endpointKey))
		var wg sync.WaitGroup
		var full atomic.Int32
		for range 10 {
			wg.Go(func() {
				_, err := mediator.Send(context.Background(), m, &Call{Endpoint: "a"})
				var be *behaviors.BulkheadFullError
				if errors.As(err, &be) {
					if be.Key != "a" || be.Limit != 2 || !errors.Is(err, behaviors.ErrBulkheadFull) {
						t.Error(err)
					}
					full.Add(1)
				} else if err != nil {
					t.Error(err)
				}
			})
		}
		// Another key has its own slots.
		wg.Go(func() {
			if _, err := mediator.Send(context.Background(), m, &Call{Endpoint: "b"}); err != nil {
				t.Error(err)
			}
		})
		synctest.Wait()
		if full.Load() != 8 || bh.InFlight("a") != 2 || bh.InFlight("b") != 1 {
			t.Fatalf("full %d, in flight a %d b %d", full.Load(), bh.InFlight("a"), bh.InFlight("b"))
		}
		close(release)
		wg.Wait()
		if peak.Load() != 3 || bh.InFlight("a") != 0 {
			t.Fatal(peak.Load(), bh.InFlight("a"))
		}
		// Rejections are not counted by the breaker (threshold 1).
		wantState(t, r, "a", behaviors.StateClosed)
	})
}

func TestBulkheadWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bh := behaviors.NewBulkhead(behaviors.BulkheadConfig{Limit: 1, MaxWait: 2 * time.Second})
		m := build(t, func(ctx context.Context, q *Call) (*Reply, error) {
			time.Sleep(time.Duration(len(q.Endpoint)) * time.Second)
			return &Reply{}, nil
		}, bh)
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = mediator.Send(context.Background(), m, &Call{Endpoint: "x"}) }) // holds 1 s
		synctest.Wait()
		start := time.Now()
		if _, err := mediator.Send(context.Background(), m, &Call{Endpoint: "yyy"}); err != nil || time.Since(start) != 4*time.Second {
			t.Fatal(err, time.Since(start)) // waited 1 s, ran 3 s
		}
		wg.Go(func() { _, _ = mediator.Send(context.Background(), m, &Call{Endpoint: "zzzzz"}) }) // holds 5 s
		synctest.Wait()
		start = time.Now()
		_, err := mediator.Send(context.Background(), m, &Call{})
		if !errors.Is(err, behaviors.ErrBulkheadFull) || time.Since(start) != 2*time.Second {
			t.Fatal(err, time.Since(start))
		}
		if bh.InFlight("*behaviors_test.Call") != 1 {
			t.Fatal(bh.InFlight("*behaviors_test.Call"))
		}
		wg.Wait()
	})
}

func TestBulkheadValidate(t *testing.T) {
	m := mediator.New(nil)
	_ = mediator.HandleFunc(m, (&script{}).handle)
	_ = m.Use(behaviors.NewBulkhead(behaviors.BulkheadConfig{}))
	if err := m.Build(); !errors.Is(err, mediator.ErrInvalidBehavior) {
		t.Fatal(err)
	}
}
