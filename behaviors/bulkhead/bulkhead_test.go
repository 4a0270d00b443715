package bulkhead_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/bulkhead"
	"github.com/switchboard-go/switchboard/mediator"
)

func TestBulkheadLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var running, peak atomic.Int32
		bh := bulkhead.New(bulkhead.Config{Limit: 2, Key: endpointKey})
		r := breaker.NewRegistry(breaker.Config{Key: endpointKey, FailureThreshold: 1})
		m := build(t, func(ctx context.Context, q *Call) (*Reply, error) {
			n := running.Add(1)
			peak.Store(max(peak.Load(), n))
			<-release
			running.Add(-1)
			return &Reply{}, nil
		}, bh, breaker.New(r))
		var wg sync.WaitGroup
		var full atomic.Int32
		for range 10 {
			wg.Go(func() {
				_, err := mediator.Send(context.Background(), m, &Call{Endpoint: "a"})
				var be *bulkhead.FullError
				if errors.As(err, &be) {
					if be.Key != "a" || be.Limit != 2 || !errors.Is(err, bulkhead.ErrFull) {
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
		wantState(t, r, "a", breaker.StateClosed)
	})
}

func TestBulkheadWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bh := bulkhead.New(bulkhead.Config{Limit: 1, MaxWait: 2 * time.Second})
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
		if !errors.Is(err, bulkhead.ErrFull) || time.Since(start) != 2*time.Second {
			t.Fatal(err, time.Since(start))
		}
		if bh.InFlight("*testkit.Call") != 1 {
			t.Fatal(bh.InFlight("*testkit.Call"))
		}
		wg.Wait()
	})
}

func TestBulkheadValidate(t *testing.T) {
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, (&script{}).Handle)
	m.Use(bulkhead.New(bulkhead.Config{}))
	if err := m.Build(); !errors.Is(err, mediator.ErrInvalidBehavior) {
		t.Fatal(err)
	}
}

// wantState fails unless the breaker of key is in state want.
func wantState(t *testing.T, r *breaker.Registry, key string, want breaker.State) breaker.Snapshot {
	t.Helper()
	s, err := r.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	if s.State != want {
		t.Fatalf("%s is %s, want %s (%+v)", key, s.State, want, s)
	}
	return s
}
