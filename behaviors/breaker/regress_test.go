package breaker_test

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/validation"
	"github.com/switchboard-go/switchboard/mediator"
)

// probes takes n probe permits of key, failing the test when one is refused or is not a probe.
func probes(t *testing.T, r *breaker.Registry, key string, n int) []breaker.Permit {
	t.Helper()
	ps := make([]breaker.Permit, n)
	for i := range ps {
		p, err := r.Gate(key)
		if err != nil || !p.Probe() {
			t.Fatalf("probe %d of %s: probe=%v, %v", i+1, key, p.Probe(), err)
		}
		ps[i] = p
	}
	return ps
}

// wantRefused checks that key's breaker refuses a call now.
func wantRefused(t *testing.T, r *breaker.Registry, key string) *breaker.OpenError {
	t.Helper()
	p, err := r.Gate(key)
	var co *breaker.OpenError
	if !errors.As(err, &co) {
		t.Fatalf("gate %s: got permit (probe=%v), %v; want a refusal", key, p.Probe(), err)
	}
	return co
}

// With K probes, one success does not close the breaker while the other probes still
// run; K successes close it, and a failure of any probe re-opens it at once with a fresh full
// open duration. The later results of the other probes are stale.
func TestBreakerHalfOpenNeedsKSuccesses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := breaker.NewRegistry(breaker.Config{HalfOpenProbes: 3})
		fail(t, r, "k", 5)
		time.Sleep(30 * time.Second)
		ps := probes(t, r, "k", 3)
		ps[0].Success()
		wantState(t, r, "k", breaker.StateHalfOpen) // two probes still run
		time.Sleep(2 * time.Second)
		ps[1].Done(context.Background(), errBoom)
		if s := wantState(t, r, "k", breaker.StateOpen); s.Failures != 6 {
			t.Fatalf("probe failure not counted: %+v", s)
		}
		wantOpen(t, r, "k", 30*time.Second) // fresh, full open duration
		ps[2].Success()                     // stale: its half-open period is over
		wantState(t, r, "k", breaker.StateOpen)

		time.Sleep(30 * time.Second)
		ps = probes(t, r, "k", 3)
		ps[0].Success()
		ps[1].Success()
		wantState(t, r, "k", breaker.StateHalfOpen)
		ps[2].Success()
		if s := wantState(t, r, "k", breaker.StateClosed); s.Failures != 0 {
			t.Fatalf("closed with failures: %+v", s)
		}
	})
}

// Through the behavior: K concurrent probes, the first to finish succeeds, the others
// then fail. The breaker must end open, not closed with 0 failures.
func TestBreakerHalfOpenFirstSuccessDoesNotDecide(t *testing.T) {
	const k = 3
	synctest.Test(t, func(t *testing.T) {
		r := breaker.NewRegistry(breaker.Config{Key: endpointKey, HalfOpenProbes: k})
		var n atomic.Int32
		m := build(t, func(ctx context.Context, q *Call) (*Reply, error) {
			i := n.Add(1)
			time.Sleep(time.Duration(i) * time.Second) // probe 1 ends first
			if i == 1 {
				return &Reply{}, nil
			}
			return nil, errBoom
		}, breaker.New(r))
		fail(t, r, "x", 5)
		time.Sleep(30 * time.Second)
		start := time.Now()
		var wg sync.WaitGroup
		for range k {
			wg.Go(func() { _, _ = mediator.Send(context.Background(), m, &Call{Endpoint: "x"}) })
		}
		wg.Wait() // probe 1 succeeded at +1s, probe 2 failed at +2s, probe 3 at +3s
		if got := n.Load(); got != k {
			t.Fatalf("%d probes ran", got)
		}
		s := wantState(t, r, "x", breaker.StateOpen)
		if !s.OpenedAt.Equal(start.Add(2*time.Second)) || s.Remaining != 29*time.Second {
			t.Fatalf("want re-opened by probe 2 for a fresh open duration: %+v", s)
		}
	})
}

// A half-open period admits at most K probes in total: a probe that succeeded keeps
// its slot; a probe whose outcome is not counted (released, or an error the classifier ignores)
// frees it for another probe.
func TestBreakerHalfOpenAdmitsKInTotal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := breaker.NewRegistry(breaker.Config{HalfOpenProbes: 2})
		fail(t, r, "t", 5)
		time.Sleep(30 * time.Second)
		first := probes(t, r, "t", 1)[0]
		first.Success()
		second := probes(t, r, "t", 1)[0]
		wantRefused(t, r, "t") // first's slot stays used, second's is in flight
		second.Release()
		third := probes(t, r, "t", 1)[0]
		third.Done(context.Background(), &validation.Error{Err: errBoom}) // not counted
		fourth := probes(t, r, "t", 1)[0]
		wantRefused(t, r, "t")
		if s := wantState(t, r, "t", breaker.StateHalfOpen); s.Probes != 1 {
			t.Fatalf("probes in flight %d, want 1", s.Probes)
		}
		fourth.Success()
		wantState(t, r, "t", breaker.StateClosed)
	})
}

// A probe hung past ProbeTimeout re-opens the breaker even when another probe of the
// same half-open period already succeeded.
func TestBreakerHalfOpenHungProbeAfterSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := breaker.NewRegistry(breaker.Config{HalfOpenProbes: 2, ProbeTimeout: 5 * time.Second})
		fail(t, r, "h", 5)
		time.Sleep(30 * time.Second)
		ps := probes(t, r, "h", 2)
		ps[0].Success()
		time.Sleep(5 * time.Second)
		wantOpen(t, r, "h", 30*time.Second)
		ps[1].Success() // too late
		if s := wantState(t, r, "h", breaker.StateOpen); s.Failures != 6 {
			t.Fatalf("the hung probe did not count as failed: %+v", s)
		}
	})
}

// A half-open breaker whose probe slots are all taken reports 0 remaining, both in
// the refusal's CircuitOpenError and from OpenFor.
func TestBreakerBusyHalfOpenRemainingAgrees(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := breaker.NewRegistry(breaker.Config{Key: endpointKey})
		cb := breaker.New(r)
		fail(t, r, "b", 5)
		time.Sleep(30 * time.Second)
		probe := probes(t, r, "b", 1)[0]
		time.Sleep(10 * time.Second)
		if co := wantRefused(t, r, "b"); co.Remaining != 0 {
			t.Errorf("Gate refusal Remaining = %s, want 0", co.Remaining)
		}
		_, err := cb.Handle(context.Background(), &Call{Endpoint: "b"}, func(context.Context, any) (any, error) {
			t.Fatal("handler called while the probe slot is taken")
			return nil, nil
		})
		var co *breaker.OpenError
		if !errors.As(err, &co) || co.Remaining != 0 {
			t.Errorf("behavior refusal %v, want Remaining 0", err)
		}
		if rem, open := r.OpenFor("b"); !open || rem != 0 {
			t.Errorf("OpenFor = %s, %v; want 0, true", rem, open)
		}
		probe.Success()
		wantState(t, r, "b", breaker.StateClosed)
	})
}

// stepClock is a Clock that moves only when told.
type stepClock struct{ ns atomic.Int64 }

func (c *stepClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *stepClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
func (c *stepClock) After(time.Duration) (<-chan time.Time, func() bool) {
	return nil, func() bool { return false } // the registry never waits
}

// 200,000 keys whose breakers opened: once the open time has passed and a sweep
// interval went by without a call, sweeps evict them, so the registry stays bounded.
func TestBreakerEvictionBoundedOpenKeys(t *testing.T) {
	n := 200_000
	if testing.Short() {
		n = 50_000
	}
	const bound = 10_000
	clock := &stepClock{}
	clock.Advance(time.Hour)
	r := breaker.NewRegistry(breaker.Config{MaxBreakers: bound, FailureThreshold: 1, Clock: clock})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	buf := make([]byte, 0, 32)
	key := func(i int) string {
		return string(strconv.AppendInt(append(buf[:0], "https://down-"...), int64(i), 10))
	}
	for i := range n {
		fail(t, r, key(i), 1)
	}
	// Inside their open duration they all stay: each one refuses calls.
	if got := r.Len(); got != n {
		t.Fatalf("%d breakers held while all %d are open", got, n)
	}
	wantOpen(t, r, key(0), 30*time.Second)
	clock.Advance(31 * time.Second)
	first := r.Sweep()  // clears the marks of the breakers used since the last sweep
	second := r.Sweep() // evicts those unused since
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d opened keys, open time passed, two sweeps: evicted %d + %d, %d held; heap before %d KiB, after %d KiB (grown %d KiB)",
		n, first, second, r.Len(), before.HeapAlloc>>10, after.HeapAlloc>>10, grown>>10)
	if got := r.Len(); got > bound {
		t.Fatalf("the registry holds %d breakers after the open time passed and two sweeps, want at most %d", got, bound)
	}
	if grown > 16<<20 {
		t.Fatalf("heap grew by %d MiB", grown>>20)
	}
	// An evicted breaker is gone: the key starts afresh, closed.
	if p, err := r.Gate(key(1)); err != nil || p.Probe() {
		t.Fatalf("evicted key: probe=%v, %v", p.Probe(), err)
	}
}

// What may and may not be evicted among breakers that are not closed: an open one
// still inside its open duration and a half-open one with a probe in flight stay; an open one
// past its open time and a half-open one without probes, unused for a sweep interval, go. A
// call that began before its breaker opened does not count on the key's next breaker.
func TestBreakerEvictionOpenRules(t *testing.T) {
	clock := &stepClock{}
	r := breaker.NewRegistry(breaker.Config{FailureThreshold: 2, ProbeTimeout: time.Hour, Clock: clock})
	early, _ := r.Gate("stale")
	fail(t, r, "stale", 2)   // open from 0 s to 30 s
	fail(t, r, "probing", 2) // open from 0 s to 30 s
	clock.Advance(20 * time.Second)
	fail(t, r, "young", 2) // open from 20 s to 50 s
	clock.Advance(15 * time.Second)
	probe := probes(t, r, "probing", 1)[0] // half-open from 35 s, its probe in flight
	r.Sweep()                              // clears the marks
	clock.Advance(5 * time.Second)
	r.Sweep() // 40 s: evicts what was unused since 35 s and may go
	if _, err := r.Get("stale"); !errors.Is(err, breaker.ErrUnknown) {
		t.Fatalf("open breaker past its open time, unused for a sweep interval, kept: %v", err)
	}
	wantState(t, r, "young", breaker.StateOpen) // inside its open duration
	if s := wantState(t, r, "probing", breaker.StateHalfOpen); s.Probes != 1 {
		t.Fatalf("%+v", s)
	}
	early.Failure() // began before "stale" opened: stale, not forwarded to a new breaker
	if s, err := r.Get("stale"); err == nil {
		t.Fatalf("a call from before the trip was counted on the key's next breaker: %+v", s)
	}
	probe.Release()
	clock.Advance(15 * time.Second) // 55 s: "young" is past its open time too
	r.Sweep()
	r.Sweep()
	for _, k := range []string{"probing", "young"} {
		if _, err := r.Get(k); !errors.Is(err, breaker.ErrUnknown) {
			t.Fatalf("%s kept: %v", k, err)
		}
	}
	if r.Len() != 0 {
		t.Fatalf("%d breakers held", r.Len())
	}
}

// The call whose own counted failure opens the breaker gets a *CircuitTrippedError
// instead of the handler's error; the handler's error stays reachable.
func TestBreakerTrippedError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := breaker.NewRegistry(breaker.Config{Key: endpointKey, FailureThreshold: 2})
		m := build(t, func(context.Context, *Call) (*Reply, error) { return nil, errBoom },
			breaker.New(r))
		_, err := mediator.Send(context.Background(), m, &Call{Endpoint: "t"})
		if err != errBoom {
			t.Fatalf("first failure (breaker still closed) returned %v, want the handler's error as is", err)
		}
		_, err = mediator.Send(context.Background(), m, &Call{Endpoint: "t"})
		var te *breaker.TrippedError
		if !errors.As(err, &te) {
			t.Fatalf("tripping failure returned %T %v, want *CircuitTrippedError", err, err)
		}
		if te.Key != "t" || te.Remaining != 30*time.Second || te.RetryAfter() != 30*time.Second || te.Err != errBoom {
			t.Fatalf("tripped error %+v", te)
		}
		if !errors.Is(err, breaker.ErrTripped) || !errors.Is(err, errBoom) || errors.Is(err, breaker.ErrOpen) {
			t.Fatalf("Is: tripped %v, handler %v, open %v", errors.Is(err, breaker.ErrTripped),
				errors.Is(err, errBoom), errors.Is(err, breaker.ErrOpen))
		}
		if got, want := err.Error(), `boom (circuit "t" opened for 30s)`; got != want {
			t.Fatalf("Error() = %q, want %q", got, want)
		}
		// The next call is refused, not tripped.
		if _, err := mediator.Send(context.Background(), m, &Call{Endpoint: "t"}); !errors.Is(err, breaker.ErrOpen) ||
			errors.Is(err, breaker.ErrTripped) {
			t.Fatalf("refusal %v", err)
		}
		// A failed probe re-opens the breaker: tripped again, with a fresh open duration.
		time.Sleep(30 * time.Second)
		_, err = mediator.Send(context.Background(), m, &Call{Endpoint: "t"})
		if !errors.As(err, &te) || te.Remaining != 30*time.Second || !errors.Is(err, errBoom) {
			t.Fatalf("failed probe returned %v", err)
		}
		// A probe whose error is not counted trips nothing and passes the error on as is.
		time.Sleep(30 * time.Second)
		vErr := &validation.Error{Err: errBoom}
		m2 := build(t, func(context.Context, *Call) (*Reply, error) { return nil, vErr }, breaker.New(r))
		if _, err := mediator.Send(context.Background(), m2, &Call{Endpoint: "t"}); err != vErr {
			t.Fatalf("uncounted probe failure returned %v", err)
		}
	})
}

// A trip by failure rate is reported the same way.
func TestBreakerTrippedErrorByFailureRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := breaker.NewRegistry(breaker.Config{
			Key:              endpointKey,
			FailureThreshold: 100, FailureRate: 0.5, RateMinCalls: 4, OpenDuration: time.Minute,
		})
		cb := breaker.New(r)
		results := []error{nil, errBoom, nil, errBoom}
		var err error
		for _, res := range results {
			_, err = cb.Handle(context.Background(), &Call{Endpoint: "r"}, func(context.Context, any) (any, error) { return nil, res })
		}
		var te *breaker.TrippedError
		if !errors.As(err, &te) || te.Remaining != time.Minute || !errors.Is(err, errBoom) {
			t.Fatalf("rate trip returned %v", err)
		}
	})
}

// The behavior's refusal names the request it refused; Gate's does not (code outside
// the pipeline has no request).
func TestBreakerRefusalNamesRequest(t *testing.T) {
	r := breaker.NewRegistry(breaker.Config{Key: endpointKey})
	cb := breaker.New(r)
	req := &Call{Endpoint: "r"}
	if _, err := cb.Handle(context.Background(), req, func(context.Context, any) (any, error) { return &Reply{}, nil }); err != nil {
		t.Fatal(err)
	}
	if err := r.Trip("r"); err != nil {
		t.Fatal(err)
	}
	_, err := cb.Handle(context.Background(), req, func(context.Context, any) (any, error) {
		t.Fatal("handler called while open")
		return nil, nil
	})
	if !errors.Is(err, breaker.ErrOpen) || !behaviors.Refused(err, req) {
		t.Fatalf("refusal %v does not name its request (Refused = %v)", err, behaviors.Refused(err, req))
	}
	if behaviors.Refused(err, &Call{Endpoint: "r"}) {
		t.Fatal("refusal names another request")
	}
	if _, err := r.Gate("r"); !errors.Is(err, breaker.ErrOpen) || behaviors.Refused(err, req) {
		t.Fatalf("Gate refusal %v names a request", err)
	}
}

type change struct {
	to     breaker.State
	reason breaker.ChangeReason
}

// Every state change says why it happened.
func TestBreakerChangeReasons(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []change
		cfg := breaker.Config{
			FailureThreshold: 2, ProbeTimeout: 5 * time.Second,
			OnStateChange: []func(breaker.StateChange){func(c breaker.StateChange) { got = append(got, change{c.To, c.Reason}) }},
		}
		r := breaker.NewRegistry(cfg)
		fail(t, r, "k", 2)
		time.Sleep(30 * time.Second)
		probes(t, r, "k", 1)[0].Failure()
		time.Sleep(30 * time.Second)
		_ = probes(t, r, "k", 1)[0] // hangs
		time.Sleep(5 * time.Second)
		wantState(t, r, "k", breaker.StateOpen)
		time.Sleep(30 * time.Second)
		probes(t, r, "k", 1)[0].Success()
		_ = r.Trip("k")
		_ = r.Reset("k")
		r.Apply(breaker.Snapshot{Key: "k", State: breaker.StateOpen, Remaining: time.Second})
		r.Apply(breaker.Snapshot{Key: "k", State: breaker.StateClosed})
		cfg.FailureThreshold, cfg.FailureRate, cfg.RateMinCalls = 100, 0.5, 2
		rr := breaker.NewRegistry(cfg)
		p, _ := rr.Gate("k")
		p.Success()
		fail(t, rr, "k", 1)
		want := []change{
			{breaker.StateOpen, breaker.ReasonFailureThreshold},
			{breaker.StateHalfOpen, breaker.ReasonOpenDurationElapsed},
			{breaker.StateOpen, breaker.ReasonProbeFailed},
			{breaker.StateHalfOpen, breaker.ReasonOpenDurationElapsed},
			{breaker.StateOpen, breaker.ReasonProbeTimedOut},
			{breaker.StateHalfOpen, breaker.ReasonOpenDurationElapsed},
			{breaker.StateClosed, breaker.ReasonProbesSucceeded},
			{breaker.StateOpen, breaker.ReasonManualTrip},
			{breaker.StateClosed, breaker.ReasonManualReset},
			{breaker.StateOpen, breaker.ReasonApplied},
			{breaker.StateClosed, breaker.ReasonApplied},
			{breaker.StateOpen, breaker.ReasonFailureRate},
		}
		if len(got) != len(want) {
			t.Fatalf("changes %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("change %d is %v, want %v (all: %v)", i, got[i], want[i], got)
			}
		}
	})
}

// A probe slower than ProbeTimeout is announced: the breaker re-opens with
// ReasonProbeTimedOut, and OnLateProbe hears how long the probe took, outside locks.
func TestBreakerLateProbeReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r *breaker.Registry
		var late []breaker.LateProbe
		var reasons []breaker.ChangeReason
		r = breaker.NewRegistry(breaker.Config{
			Key: endpointKey,
			OnLateProbe: []func(breaker.LateProbe){func(l breaker.LateProbe) {
				_, _ = r.Get(l.Key) // outside locks: may call the registry
				late = append(late, l)
			}},
			OnStateChange: []func(breaker.StateChange){func(c breaker.StateChange) { reasons = append(reasons, c.Reason) }},
		})
		latency, result := 45*time.Second, error(nil)
		m := build(t, func(context.Context, *Call) (*Reply, error) {
			time.Sleep(latency)
			return &Reply{}, result
		}, breaker.New(r))
		fail(t, r, "slow", 5)
		time.Sleep(30 * time.Second)
		if _, err := mediator.Send(context.Background(), m, &Call{Endpoint: "slow"}); err != nil {
			t.Fatal(err)
		}
		wantState(t, r, "slow", breaker.StateOpen) // the dependency answered, too slowly
		if len(late) != 1 || late[0] != (breaker.LateProbe{Key: "slow", Took: 45 * time.Second, Timeout: 30 * time.Second}) {
			t.Fatalf("late probes %+v", late)
		}
		if n := len(reasons); n == 0 || reasons[n-1] != breaker.ReasonProbeTimedOut {
			t.Fatalf("reasons %v", reasons)
		}
		// A late failure is reported with its error, and passes on as the handler's error: the
		// timeout, not this call, opened the breaker.
		time.Sleep(30 * time.Second)
		result = errBoom
		if _, err := mediator.Send(context.Background(), m, &Call{Endpoint: "slow"}); err != errBoom {
			t.Fatalf("late failing probe returned %v", err)
		}
		if len(late) != 2 || late[1].Err != errBoom || late[1].Took != 45*time.Second {
			t.Fatalf("late probes %+v", late)
		}
		// A probe in time is not late.
		time.Sleep(30 * time.Second)
		latency, result = 29*time.Second, nil
		if _, err := mediator.Send(context.Background(), m, &Call{Endpoint: "slow"}); err != nil {
			t.Fatal(err)
		}
		wantState(t, r, "slow", breaker.StateClosed)
		if len(late) != 2 {
			t.Fatalf("late probes %+v", late)
		}
	})
}

// A reason reads as its name in logs and JSON, and parses back.
func TestChangeReasonText(t *testing.T) {
	for r, want := range map[breaker.ChangeReason]string{
		breaker.ReasonFailureThreshold:    "failure-threshold",
		breaker.ReasonFailureRate:         "failure-rate",
		breaker.ReasonProbeFailed:         "probe-failed",
		breaker.ReasonProbeTimedOut:       "probe-timed-out",
		breaker.ReasonProbesSucceeded:     "probes-succeeded",
		breaker.ReasonOpenDurationElapsed: "open-duration-elapsed",
		breaker.ReasonManualTrip:          "manual-trip",
		breaker.ReasonManualReset:         "manual-reset",
		breaker.ReasonApplied:             "applied",
		breaker.ReasonUnknown:             "unknown",
		breaker.ChangeReason(200):         "ChangeReason(200)",
	} {
		if r.String() != want {
			t.Errorf("%d.String() = %q, want %q", r, r.String(), want)
		}
		text, err := r.MarshalText()
		if err != nil || string(text) != want {
			t.Errorf("%d.MarshalText() = %q, %v", r, text, err)
		}
		var back breaker.ChangeReason
		if err := back.UnmarshalText(text); (err == nil) != (r <= breaker.ReasonApplied) || (err == nil && back != r) {
			t.Errorf("UnmarshalText(%q) = %d, %v", text, back, err)
		}
	}
	b, err := json.Marshal(breaker.StateChange{Key: "k", Reason: breaker.ReasonProbeTimedOut})
	if err != nil || !strings.Contains(string(b), `"Reason":"probe-timed-out"`) {
		t.Fatalf("JSON %s, %v", b, err)
	}
}
