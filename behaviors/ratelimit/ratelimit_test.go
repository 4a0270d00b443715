package ratelimit_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/ratelimit"
	"github.com/switchboard-go/switchboard/mediator"
)

func ok(context.Context, *Call) (*Reply, error) { return &Reply{}, nil }

func TestRateLimitRefusal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var refused []ratelimit.RefusedEvent
		rl := ratelimit.New(ratelimit.Config{Rate: 10, Burst: 2, Key: endpointKey,
			OnRefused: []func(context.Context, ratelimit.RefusedEvent){func(_ context.Context, e ratelimit.RefusedEvent) { refused = append(refused, e) }}})
		m := build(t, ok, rl)
		for i := range 2 { // the burst
			if _, err := mediator.Send(context.Background(), m, &Call{Endpoint: "a"}); err != nil {
				t.Fatal(i, err)
			}
		}
		req := &Call{Endpoint: "a"}
		_, err := mediator.Send(context.Background(), m, req)
		le, isLimited := errors.AsType[*ratelimit.LimitedError](err)
		if !isLimited || !errors.Is(err, ratelimit.ErrLimited) || le.Key != "a" || le.Wait != 100*time.Millisecond {
			t.Fatalf("%v", err)
		}
		if behaviors.RetryAfter(err) != 100*time.Millisecond || !behaviors.Refused(err, req) || le.Refusal().By != "rate-limit" {
			t.Fatal(behaviors.RetryAfter(err), behaviors.Refused(err, req), le.Refusal())
		}
		if len(refused) != 1 || refused[0].Key != "a" || refused[0].Request != req || refused[0].RetryAfter != 100*time.Millisecond {
			t.Fatal(refused)
		}
		// Another key has its own limit.
		if _, err := mediator.Send(context.Background(), m, &Call{Endpoint: "b"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // fake time: the next permit's
		if _, err := mediator.Send(context.Background(), m, &Call{Endpoint: "a"}); err != nil {
			t.Fatal(err)
		}
		if _, err := mediator.Send(context.Background(), m, &Call{Endpoint: "a"}); !errors.Is(err, ratelimit.ErrLimited) {
			t.Fatal(err)
		}
		snap := rl.Snapshot()
		if len(snap) != 2 || snap[0].Key != "a" || snap[0].Refused != 2 || snap[0].Available != 0 || snap[1].Available != 2 || snap[1].Burst != 2 {
			t.Fatalf("%+v", snap)
		}
	})
}

func TestRateLimitWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var waits []time.Duration
		var mu sync.Mutex
		rl := ratelimit.New(ratelimit.Config{Rate: 10, MaxWait: 250 * time.Millisecond,
			OnPermit: []func(context.Context, ratelimit.PermitEvent){func(_ context.Context, e ratelimit.PermitEvent) {
				mu.Lock()
				waits = append(waits, e.Wait)
				mu.Unlock()
			}}})
		m := build(t, ok, rl)
		start := time.Now()
		var done []time.Duration
		var wg sync.WaitGroup
		var limited atomic.Int32
		for range 5 {
			wg.Go(func() {
				_, err := mediator.Send(context.Background(), m, &Call{})
				if errors.Is(err, ratelimit.ErrLimited) {
					limited.Add(1)
					return
				} else if err != nil {
					t.Error(err)
				}
				mu.Lock()
				done = append(done, time.Since(start))
				mu.Unlock()
			})
		}
		wg.Wait()
		// Permits at 0, 100 and 200 ms; the two that would wait 300 and 400 ms are refused.
		if limited.Load() != 2 || len(done) != 3 || done[0] != 0 || done[1] != 100*time.Millisecond || done[2] != 200*time.Millisecond {
			t.Fatal(limited.Load(), done)
		}
		if len(waits) != 3 || max(waits[0], waits[1], waits[2]) != 200*time.Millisecond {
			t.Fatal(waits)
		}
	})
}

func TestRateLimitCancelSpendsNoPermit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rl := ratelimit.New(ratelimit.Config{Rate: 1, MaxWait: 10 * time.Second})
		m := build(t, ok, rl)
		if _, err := mediator.Send(context.Background(), m, &Call{}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := mediator.Send(ctx, m, &Call{})
			errc <- err
		}()
		synctest.Wait()
		if s := rl.Snapshot(); s[0].Waiting != 1 {
			t.Fatalf("%+v", s)
		}
		time.Sleep(300 * time.Millisecond)
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) || behaviors.IsRefusal(err) {
			t.Fatal(err)
		}
		// The cancelled call's permit (at 1 s) is the next call's.
		start := time.Now()
		if _, err := mediator.Send(context.Background(), m, &Call{}); err != nil || time.Since(start) != 700*time.Millisecond {
			t.Fatal(err, time.Since(start))
		}
		if s := rl.Snapshot(); s[0].Waiting != 0 || s[0].Refused != 0 {
			t.Fatalf("%+v", s)
		}
	})
}

func TestRateLimitStoredDoesNotWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rl := ratelimit.New(ratelimit.Config{Rate: 2, MaxWait: 10 * time.Second})
		m := build(t, ok, rl)
		if _, err := mediator.Send(context.Background(), m, &Call{}); err != nil {
			t.Fatal(err)
		}
		req := &Call{}
		start := time.Now()
		_, err := mediator.Send(mediator.WithMarks(context.Background(), req, mediator.Stored), m, req)
		if !errors.Is(err, ratelimit.ErrLimited) || time.Since(start) != 0 || behaviors.RetryAfter(err) != 500*time.Millisecond || !behaviors.Refused(err, req) {
			t.Fatal(err, time.Since(start))
		}
		// A caller whose deadline comes before the permit is refused at once too.
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if _, err := mediator.Send(ctx, m, &Call{}); !errors.Is(err, ratelimit.ErrLimited) || time.Since(start) != 0 {
			t.Fatal(err, time.Since(start))
		}
		// An ordinary caller waits.
		if _, err := mediator.Send(context.Background(), m, &Call{}); err != nil || time.Since(start) != 500*time.Millisecond {
			t.Fatal(err, time.Since(start))
		}
	})
}

func TestRateLimitNotCountedByBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := breaker.NewRegistry(breaker.Config{Key: endpointKey, FailureThreshold: 1})
		m := build(t, ok, breaker.New(reg), ratelimit.New(ratelimit.Config{Rate: 1, Key: endpointKey}))
		for i := range 5 {
			_, err := mediator.Send(context.Background(), m, &Call{Endpoint: "a"})
			if (i == 0) != (err == nil) {
				t.Fatal(i, err)
			}
		}
		if s, err := reg.Get("a"); err != nil || s.State != breaker.StateClosed {
			t.Fatal(s, err)
		}
	})
}

func TestRateLimitPlacement(t *testing.T) {
	m := build(t, ok, ratelimit.New(ratelimit.Config{Rate: 1}), breaker.New(breaker.NewRegistry(breaker.Config{})))
	ex, err := m.Explain(reflect.TypeFor[*Call]())
	if err != nil {
		t.Fatal(err)
	}
	s := ex.String()
	if !strings.Contains(s, "rate-limit") || strings.Index(s, "circuit-breaker") > strings.Index(s, "rate-limit") {
		t.Fatal(s)
	}
}

func TestRateLimitValidate(t *testing.T) {
	err := ratelimit.Config{Rate: -1, Burst: -2, MaxWait: -time.Second}.Validate()
	for _, want := range []string{"Rate", "Burst", "MaxWait"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%v lacks %s", err, want)
		}
	}
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, (&script{}).Handle)
	m.Use(ratelimit.New(ratelimit.Config{}))
	if err := m.Build(); !errors.Is(err, mediator.ErrInvalidBehavior) {
		t.Fatal(err)
	}
	if err := (ratelimit.Config{Rate: 1e12}).Validate(); err == nil {
		t.Fatal("a rate above one a nanosecond passed")
	}
}

func TestRateLimitSuccessAllocatesNothing(t *testing.T) {
	for _, cfg := range []ratelimit.Config{{Rate: 1e9, Burst: 1 << 30}, {Rate: 1e9, Burst: 1 << 30, Key: endpointKey, MaxWait: time.Second}} {
		rl := ratelimit.New(cfg)
		if err := rl.Validate(); err != nil {
			t.Fatal(err)
		}
		next := func(context.Context, any) (any, error) { return nil, nil }
		b, err := rl.Bind(mediator.RequestInfo{Request: reflect.TypeFor[*Call]()})
		if err != nil {
			t.Fatal(err)
		}
		req, ctx := &Call{Endpoint: "a"}, context.Background()
		if n := testing.AllocsPerRun(1000, func() {
			if _, err := b.Handle(ctx, req, next); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Fatalf("%+v: %v allocations a call", cfg, n)
		}
	}
}

// Stored dispatches refused one after another are told distinct slots, one interval apart from
// the next permit on, so that a parked backlog comes back one item a permit rather than all at
// once; the promises older than now are forgotten.
func TestRateLimitStoredRefusalsGetDistinctSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rl := ratelimit.New(ratelimit.Config{Rate: 20, MaxWait: time.Second})
		m := build(t, ok, rl)
		if _, err := mediator.Send(context.Background(), m, &Call{}); err != nil {
			t.Fatal(err)
		}
		stored := func() time.Duration {
			req := &Call{}
			_, err := mediator.Send(mediator.WithMarks(context.Background(), req, mediator.Stored), m, req)
			if !errors.Is(err, ratelimit.ErrLimited) {
				t.Fatalf("stored dispatch: %v", err)
			}
			return behaviors.RetryAfter(err)
		}
		for i := range 5 {
			if got, want := stored(), time.Duration(i+1)*50*time.Millisecond; got != want {
				t.Fatalf("refusal %d: RetryAfter %v, want %v", i, got, want)
			}
		}
		// A call not stored is told the next permit, and takes no slot.
		if _, err := mediator.Send(context.Background(), m, &Call{}); err != nil {
			t.Fatal(err) // it waits for the next permit (MaxWait 1 s)
		}
		// 50 ms on: the slots promised run to 250 ms from the start; the next is 300 ms.
		if got := stored(); got != 250*time.Millisecond {
			t.Fatalf("after the promises: %v", got)
		}
		time.Sleep(time.Second) // promises in the past are forgotten
		if _, err := mediator.Send(context.Background(), m, &Call{}); err != nil {
			t.Fatal(err)
		}
		if got := stored(); got != 50*time.Millisecond {
			t.Fatalf("after a quiet second: %v", got)
		}
	})
}

// The refusal's text gives the wait as a person reads it, to the millisecond (to the
// microsecond under one), not to the nanosecond; RetryAfter keeps the exact wait.
func TestLimitedErrorWaitReadable(t *testing.T) {
	for _, c := range []struct {
		wait time.Duration
		want string
	}{
		{12465473241 * time.Nanosecond, "next permit in 12.465s"},
		{20*time.Millisecond + 417*time.Microsecond + 3, "next permit in 20ms"},
		{417*time.Microsecond + 3, "next permit in 417µs"},
		{0, "next permit in 0s"},
	} {
		e := &ratelimit.LimitedError{Key: "k", Rate: 50, Wait: c.wait}
		if !strings.Contains(e.Error(), c.want) {
			t.Errorf("wait %v: %q, want it to say %q", c.wait, e.Error(), c.want)
		}
		if e.RetryAfter() != c.wait {
			t.Errorf("wait %v: RetryAfter %v", c.wait, e.RetryAfter())
		}
	}
}

// An urgent stored dispatch (mediator.Urgent: an item of a priority above the default) is told
// the next permit, ahead of the slots promised to the routine backlog, and takes no slot.
func TestRateLimitUrgentStoredRefusalGoesFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rl := ratelimit.New(ratelimit.Config{Rate: 20})
		m := build(t, ok, rl)
		if _, err := mediator.Send(context.Background(), m, &Call{}); err != nil {
			t.Fatal(err)
		}
		stored := func(marks mediator.Mark) time.Duration {
			req := &Call{}
			_, err := mediator.Send(mediator.WithMarks(context.Background(), req, marks), m, req)
			if !errors.Is(err, ratelimit.ErrLimited) {
				t.Fatalf("stored dispatch: %v", err)
			}
			return behaviors.RetryAfter(err)
		}
		for range 5 {
			stored(mediator.Stored)
		}
		if got := stored(mediator.Stored | mediator.Urgent); got != 50*time.Millisecond {
			t.Fatalf("urgent: RetryAfter %v, want the next permit, 50ms", got)
		}
		if got := stored(mediator.Stored); got != 300*time.Millisecond {
			t.Fatalf("routine after the urgent one: RetryAfter %v, want the sixth slot, 300ms", got)
		}
	})
}
