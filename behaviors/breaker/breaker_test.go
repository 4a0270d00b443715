package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/bulkhead"
	"github.com/switchboard-go/switchboard/behaviors/timeout"
	"github.com/switchboard-go/switchboard/behaviors/validation"
	"github.com/switchboard-go/switchboard/mediator"
)

// fail records n counted failures for key.
func fail(t *testing.T, r *breaker.Registry, key string, n int) {
	t.Helper()
	for range n {
		p, err := r.Gate(key)
		if err != nil {
			t.Fatalf("gate %s: %v", key, err)
		}
		p.Done(context.Background(), errBoom)
	}
}

func wantOpen(t *testing.T, r *breaker.Registry, key string, remaining time.Duration) {
	t.Helper()
	_, err := r.Gate(key)
	var co *breaker.OpenError
	if !errors.As(err, &co) || !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("gate %s: got %v, want a *CircuitOpenError", key, err)
	}
	if co.Key != key || co.Remaining != remaining {
		t.Fatalf("open error %+v, want key %q remaining %s", co, key, remaining)
	}
}

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

func TestBreakerTransitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var changes []string
		r := breaker.NewRegistry(breaker.Config{
			OnStateChange: []func(breaker.StateChange){func(c breaker.StateChange) { changes = append(changes, c.From.String()+"→"+c.To.String()) }},
		})
		fail(t, r, "a", 4)
		wantState(t, r, "a", breaker.StateClosed)
		fail(t, r, "a", 1)
		s := wantState(t, r, "a", breaker.StateOpen)
		if s.Failures != 5 || s.Remaining != 30*time.Second || !s.OpenedAt.Equal(time.Now()) {
			t.Fatalf("snapshot %+v", s)
		}
		wantOpen(t, r, "a", 30*time.Second)
		time.Sleep(10 * time.Second)
		wantOpen(t, r, "a", 20*time.Second)
		if rem, open := r.OpenFor("a"); !open || rem != 20*time.Second {
			t.Fatalf("OpenFor = %s, %v", rem, open)
		}
		time.Sleep(20 * time.Second)
		if _, open := r.OpenFor("a"); open {
			t.Fatal("OpenFor reports open once a probe may start")
		}
		probe, err := r.Gate("a")
		if err != nil || !probe.Probe() {
			t.Fatalf("probe: %v %v", probe.Probe(), err)
		}
		wantState(t, r, "a", breaker.StateHalfOpen)
		// The one probe slot is taken: refused, with 0 remaining, since the probe may end (and
		// the breaker close) at any moment.
		wantOpen(t, r, "a", 0)
		probe.Done(context.Background(), nil)
		s = wantState(t, r, "a", breaker.StateClosed)
		if s.Failures != 0 || !s.OpenedAt.IsZero() {
			t.Fatalf("closed snapshot %+v", s)
		}
		// A failing probe opens again with a fresh open duration.
		fail(t, r, "a", 5)
		time.Sleep(30 * time.Second)
		probe, _ = r.Gate("a")
		time.Sleep(time.Second)
		probe.Done(context.Background(), errBoom)
		wantOpen(t, r, "a", 30*time.Second)
		want := []string{"closed→open", "open→half-open", "half-open→closed", "closed→open", "open→half-open", "half-open→open"}
		if len(changes) != len(want) {
			t.Fatalf("changes %v, want %v", changes, want)
		}
		for i := range want {
			if changes[i] != want[i] {
				t.Fatalf("changes %v, want %v", changes, want)
			}
		}
	})
}

// A success resets the streak of consecutive failures.
func TestBreakerConsecutive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := breaker.NewRegistry(breaker.Config{FailureThreshold: 3})
		fail(t, r, "k", 2)
		p, _ := r.Gate("k")
		p.Success()
		fail(t, r, "k", 2)
		wantState(t, r, "k", breaker.StateClosed)
		fail(t, r, "k", 1)
		wantState(t, r, "k", breaker.StateOpen)
	})
}

// 1000 goroutines hitting a half-open breaker through the mediator: exactly K probes reach
// the handler, every other call fails fast.
func TestBreakerHalfOpenAdmitsExactlyK(t *testing.T) {
	const k, n = 3, 1000
	synctest.Test(t, func(t *testing.T) {
		r := breaker.NewRegistry(breaker.Config{Key: endpointKey, HalfOpenProbes: k})
		release := make(chan struct{})
		var entered atomic.Int32
		m := build(t, func(ctx context.Context, q *Call) (*Reply, error) {
			entered.Add(1)
			<-release
			return &Reply{}, nil
		}, breaker.New(r))
		fail(t, r, "x", 5)
		time.Sleep(30 * time.Second)
		var refused, ok atomic.Int32
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				_, err := mediator.Send(context.Background(), m, &Call{Endpoint: "x"})
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, breaker.ErrOpen):
					refused.Add(1)
				default:
					t.Error(err)
				}
			})
		}
		synctest.Wait()
		if got := entered.Load(); got != k {
			t.Fatalf("%d probes reached the handler, want %d", got, k)
		}
		if got := refused.Load(); got != n-k {
			t.Fatalf("%d refused, want %d", got, n-k)
		}
		if s := wantState(t, r, "x", breaker.StateHalfOpen); s.Probes != k {
			t.Fatalf("snapshot probes %d", s.Probes)
		}
		close(release)
		wg.Wait()
		if ok.Load() != k {
			t.Fatalf("%d succeeded", ok.Load())
		}
		wantState(t, r, "x", breaker.StateClosed)
	})
}

// A success of a call that began before the breaker opened does not close it, and one that
// began before a probe does not close the half-open breaker either.
func TestBreakerStaleSuccessIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := breaker.NewRegistry(breaker.Config{})
		early, err := r.Gate("s")
		if err != nil {
			t.Fatal(err)
		}
		early2, _ := r.Gate("s")
		fail(t, r, "s", 5)
		early.Success()
		s := wantState(t, r, "s", breaker.StateOpen)
		if s.Failures != 5 {
			t.Fatalf("stale success changed the failure count: %+v", s)
		}
		time.Sleep(30 * time.Second)
		probe, err := r.Gate("s")
		if err != nil {
			t.Fatal(err)
		}
		early2.Success()
		wantState(t, r, "s", breaker.StateHalfOpen)
		// A stale failure does not re-open it either.
		early2.Failure()
		wantState(t, r, "s", breaker.StateHalfOpen)
		probe.Success()
		wantState(t, r, "s", breaker.StateClosed)
		// A failure from before a reset is not counted in the new generation.
		old, _ := r.Gate("s")
		fail(t, r, "s", 4)
		if err := r.Reset("s"); err != nil {
			t.Fatal(err)
		}
		fail(t, r, "s", 4)
		old.Failure()
		wantState(t, r, "s", breaker.StateClosed)
	})
}

// A probe that hangs past the probe timeout re-opens the breaker; its late result is ignored.
func TestBreakerHungProbeReopens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := breaker.NewRegistry(breaker.Config{ProbeTimeout: 5 * time.Second})
		fail(t, r, "h", 5)
		time.Sleep(30 * time.Second)
		hung, err := r.Gate("h")
		if err != nil || !hung.Probe() {
			t.Fatal("no probe", err)
		}
		time.Sleep(4 * time.Second)
		// Refused while the probe runs, with no promise of when a slot frees: the probe may
		// end any moment.
		if rem, open := r.OpenFor("h"); !open || rem != 0 {
			t.Fatalf("OpenFor during probe = %s %v", rem, open)
		}
		time.Sleep(time.Second)
		wantOpen(t, r, "h", 30*time.Second)
		wantState(t, r, "h", breaker.StateOpen)
		hung.Success() // too late
		wantState(t, r, "h", breaker.StateOpen)
		time.Sleep(30 * time.Second)
		p, err := r.Gate("h")
		if err != nil || !p.Probe() {
			t.Fatal("no new probe", err)
		}
		p.Success()
		wantState(t, r, "h", breaker.StateClosed)
	})
}

// A probe that reports after its timeout, when no other call consulted the breaker meanwhile,
// is ignored too: the breaker re-opens instead of closing on the late success.
func TestBreakerHungProbeLateResultAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var changes []string
		r := breaker.NewRegistry(breaker.Config{
			ProbeTimeout:  5 * time.Second,
			OnStateChange: []func(breaker.StateChange){func(c breaker.StateChange) { changes = append(changes, c.From.String()+"→"+c.To.String()) }},
		})
		fail(t, r, "h", 5)
		time.Sleep(30 * time.Second)
		hung, err := r.Gate("h")
		if err != nil || !hung.Probe() {
			t.Fatal("no probe", err)
		}
		time.Sleep(time.Minute)
		hung.Success() // too late, and nothing noticed the expiry before
		wantState(t, r, "h", breaker.StateOpen)
		if got := fmt.Sprint(changes); got != "[closed→open open→half-open half-open→open]" {
			t.Fatalf("changes %s", got)
		}
	})
}

// An open duration or probe timeout of math.MaxInt64 ("until reset") does not overflow the
// breaker's clock arithmetic into the past.
func TestBreakerLongDurationsDoNotOverflow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const forever = time.Duration(math.MaxInt64)
		r := breaker.NewRegistry(breaker.Config{OpenDuration: forever, ProbeTimeout: forever})
		time.Sleep(time.Hour)
		fail(t, r, "f", 5)
		time.Sleep(time.Hour)
		wantState(t, r, "f", breaker.StateOpen)
		if _, err := r.Gate("f"); !errors.Is(err, breaker.ErrOpen) {
			t.Fatalf("open breaker admitted a call: %v", err)
		}

		r = breaker.NewRegistry(breaker.Config{ProbeTimeout: forever})
		time.Sleep(time.Hour)
		fail(t, r, "p", 5)
		time.Sleep(30 * time.Second)
		probe, err := r.Gate("p")
		if err != nil || !probe.Probe() {
			t.Fatal("no probe", err)
		}
		time.Sleep(time.Hour)
		wantState(t, r, "p", breaker.StateHalfOpen) // the probe has not timed out
		probe.Success()
		wantState(t, r, "p", breaker.StateClosed)

		b := breaker.NewRegistry(breaker.Config{})
		time.Sleep(time.Hour)
		b.Apply(breaker.Snapshot{Key: "a", State: breaker.StateOpen, Remaining: forever})
		wantState(t, b, "a", breaker.StateOpen)
	})
}

// A probe that panics frees its slot: the breaker is not wedged half-open.
func TestBreakerPanickingProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := breaker.NewRegistry(breaker.Config{Key: endpointKey})
		cb := breaker.New(r)
		fail(t, r, "p", 5)
		time.Sleep(30 * time.Second)
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("panic did not propagate")
				}
			}()
			_, _ = cb.Handle(context.Background(), &Call{Endpoint: "p"}, func(context.Context, any) (any, error) {
				panic("probe exploded")
			})
		}()
		s := wantState(t, r, "p", breaker.StateHalfOpen)
		if s.Probes != 0 {
			t.Fatalf("panicking probe kept its slot: %+v", s)
		}
		resp, err := cb.Handle(context.Background(), &Call{Endpoint: "p"}, func(context.Context, any) (any, error) {
			return &Reply{Text: "ok"}, nil
		})
		if err != nil || resp.(*Reply).Text != "ok" {
			t.Fatal(resp, err)
		}
		wantState(t, r, "p", breaker.StateClosed)

		// Through the mediator a handler panic is a *mediator.PanicError: a counted failure.
		m := build(t, func(context.Context, *Call) (*Reply, error) { panic("handler exploded") }, cb)
		fail(t, r, "p", 5)
		time.Sleep(30 * time.Second)
		_, err = mediator.Send(context.Background(), m, &Call{Endpoint: "p"})
		if !errors.Is(err, mediator.ErrPanic) {
			t.Fatal(err)
		}
		wantState(t, r, "p", breaker.StateOpen)
	})
}

// The caller's cancellation is never counted, in the closed state or by a probe.
func TestBreakerCancellationNotCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := breaker.NewRegistry(breaker.Config{Key: endpointKey, FailureThreshold: 1})
		m := build(t, func(ctx context.Context, q *Call) (*Reply, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, breaker.New(r))
		for range 10 {
			ctx, cancel := context.WithCancel(context.Background())
			go func() { time.Sleep(time.Millisecond); cancel() }()
			_, err := mediator.Send(ctx, m, &Call{Endpoint: "c"})
			if !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := mediator.Send(ctx, m, &Call{Endpoint: "c"})
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		s := wantState(t, r, "c", breaker.StateClosed)
		if s.Failures != 0 {
			t.Fatalf("cancellation counted: %+v", s)
		}
		// A cancelled probe frees its slot and leaves the breaker half-open.
		if err := r.Trip("c"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Second)
		ctx, cancel = context.WithCancel(context.Background())
		go func() { time.Sleep(time.Millisecond); cancel() }()
		_, err = mediator.Send(ctx, m, &Call{Endpoint: "c"})
		if !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		if s := wantState(t, r, "c", breaker.StateHalfOpen); s.Probes != 0 {
			t.Fatalf("%+v", s)
		}
	})
}

// rpcStatus is an RPC client's error for a cancelled call: like a gRPC status with code
// Canceled, it does not wrap context.Canceled.
type rpcStatus struct{ msg string }

func (e *rpcStatus) Error() string { return "rpc error: code = Canceled desc = " + e.msg }

// A caller that gives up is not counted even when its client reports the cancellation in its
// own error type rather than as context.Canceled.
func TestBreakerCancellationInClientErrorNotCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := breaker.NewRegistry(breaker.Config{Key: endpointKey, FailureThreshold: 1})
		m := build(t, func(ctx context.Context, q *Call) (*Reply, error) {
			<-ctx.Done()
			return nil, &rpcStatus{"context canceled"}
		}, breaker.New(r))
		for range 3 {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(time.Millisecond, cancel)
			_, err := mediator.Send(ctx, m, &Call{Endpoint: "g"})
			cancel()
			var rs *rpcStatus
			if !errors.As(err, &rs) {
				t.Fatal(err)
			}
		}
		if s := wantState(t, r, "g", breaker.StateClosed); s.Failures != 0 {
			t.Fatalf("cancellation counted: %+v", s)
		}
		// Whatever the Classifier says: the registry asks it only about callers still waiting.
		done, cancel := context.WithCancel(context.Background())
		cancel()
		all := breaker.NewRegistry(breaker.Config{FailureThreshold: 1, Classifier: func(error) bool { return true }})
		p, err := all.Gate("g")
		if err != nil {
			t.Fatal(err)
		}
		p.Done(done, &rpcStatus{"context canceled"})
		if s := wantState(t, all, "g", breaker.StateClosed); s.Failures != 0 {
			t.Fatalf("an error of a cancelled caller counted: %+v", s)
		}
	})
}

// Validation errors, missing handlers, bulkhead rejections and 4xx codes are not counted;
// timeouts and 5xx are.
func TestBreakerClassifier(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		err   error
		count bool
	}{
		{&validation.Error{Err: errBoom}, false},
		{&mediator.NoHandlerError{Kind: "request"}, false},
		{&bulkhead.FullError{Key: "k", Limit: 1}, false},
		{&breaker.OpenError{Key: "k"}, false},
		{&statusErr{Code: 404}, false},
		{&statusErr{Code: 429}, true},
		{&statusErr{Code: 503}, true},
		{&timeout.ExceededError{Duration: time.Second, Err: context.DeadlineExceeded}, true},
		{context.DeadlineExceeded, true}, // not the caller's: ctx is not done
		{errBoom, true},
	} {
		if got := breaker.CountsAsFailure(tc.err); got != tc.count {
			t.Errorf("CountsAsFailure(%v) = %v", tc.err, got)
		}
	}
	// The caller's cancellation is not counted by the registry of the default classifier.
	done, cancel := context.WithCancel(ctx)
	cancel()
	r := breaker.NewRegistry(breaker.Config{FailureThreshold: 1})
	p, err := r.Gate("c")
	if err != nil {
		t.Fatal(err)
	}
	p.Done(done, context.Canceled)
	if s, _ := r.Get("c"); s.State != breaker.StateClosed || s.Failures != 0 {
		t.Errorf("caller cancellation counted: %+v", s)
	}
	// Status code boundaries: 4xx is the caller's fault, except 408 and 429.
	for code, want := range map[int]bool{399: true, 400: false, 408: true, 429: true, 499: false, 500: true} {
		if got := breaker.CountsAsFailure(&statusErr{Code: code}); got != want {
			t.Errorf("CountsAsFailure(%d) = %v, want %v", code, got, want)
		}
	}
}

func TestBreakerTripResetUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := breaker.NewRegistry(breaker.Config{})
		for _, err := range []error{r.Trip("nope"), r.Reset("nope")} {
			if !errors.Is(err, breaker.ErrUnknown) {
				t.Fatal(err)
			}
		}
		if _, err := r.Get("nope"); !errors.Is(err, breaker.ErrUnknown) {
			t.Fatal(err)
		}
		if _, open := r.OpenFor("nope"); open {
			t.Fatal("unknown key open")
		}
		p, _ := r.Gate("k")
		p.Success()
		if err := r.Trip("k"); err != nil {
			t.Fatal(err)
		}
		wantOpen(t, r, "k", 30*time.Second)
		if err := r.Reset("k"); err != nil {
			t.Fatal(err)
		}
		s := wantState(t, r, "k", breaker.StateClosed)
		if s.Failures != 0 {
			t.Fatalf("%+v", s)
		}
		fail(t, r, "k", 3)
		_ = r.Reset("k")
		if s := wantState(t, r, "k", breaker.StateClosed); s.Failures != 0 {
			t.Fatalf("reset kept failures: %+v", s)
		}
	})
}

func TestBreakerSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := breaker.NewRegistry(breaker.Config{})
		start := time.Now()
		fail(t, r, "b", 2)
		fail(t, r, "a", 5)
		time.Sleep(5 * time.Second)
		got := r.Snapshot()
		want := []breaker.Snapshot{
			{Key: "a", State: breaker.StateOpen, Failures: 5, OpenedAt: start, Remaining: 25 * time.Second},
			{Key: "b", State: breaker.StateClosed, Failures: 2},
		}
		if len(got) != len(want) {
			t.Fatalf("%+v", got)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("snapshot[%d] = %+v, want %+v", i, got[i], want[i])
			}
		}
	})
}

// Listeners run outside the breaker's lock: they may call the registry, even change the
// breaker they hear about.
func TestBreakerListenersMayCallRegistry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r *breaker.Registry
		var seen []breaker.State
		r = breaker.NewRegistry(breaker.Config{
			OnStateChange: []func(breaker.StateChange){func(c breaker.StateChange) {
				s, err := r.Get(c.Key)
				if err != nil {
					t.Error(err)
				}
				seen = append(seen, s.State)
				_, _ = r.OpenFor(c.Key)
				_ = r.Snapshot()
			}},
		})
		resets := 0
		r.AddListener(func(c breaker.StateChange) {
			if c.To == breaker.StateOpen && resets == 0 {
				resets++
				if err := r.Reset(c.Key); err != nil {
					t.Error(err)
				}
			}
		})
		fail(t, r, "l", 5)
		wantState(t, r, "l", breaker.StateClosed)
		if len(seen) != 2 || seen[0] != breaker.StateOpen || seen[1] != breaker.StateClosed {
			t.Fatalf("seen %v", seen)
		}
	})
}

// Listeners and the store hear one breaker's changes in the order they happened, even when
// the goroutine that made a change is still announcing it while another goroutine makes the
// next one: otherwise a metrics gauge or a shared store would end up showing "open" for a
// breaker that was reset.
func TestBreakerChangesAnnouncedInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered, release := make(chan struct{}), make(chan struct{})
		var mu sync.Mutex
		var heard []string
		st := newMemStore(&stepClock{})
		r := breaker.NewRegistry(breaker.Config{
			Store: st,
			OnStateChange: []func(breaker.StateChange){func(c breaker.StateChange) {
				if c.To == breaker.StateOpen && entered != nil {
					close(entered)
					entered = nil
					<-release // the tripping goroutine is slow to announce
				}
				mu.Lock()
				heard = append(heard, c.From.String()+"→"+c.To.String())
				mu.Unlock()
			}},
		})
		p, _ := r.Gate("k")
		p.Success()
		wait := entered
		var wg sync.WaitGroup
		wg.Go(func() { fail(t, r, "k", 5) })
		<-wait
		if err := r.Reset("k"); err != nil {
			t.Fatal(err)
		}
		close(release)
		wg.Wait()
		wantState(t, r, "k", breaker.StateClosed)
		if got := fmt.Sprint(heard); got != "[closed→open open→closed]" {
			t.Fatalf("listener heard %s", got)
		}
		if got := fmt.Sprint(st.transitions()); got != "[k:open k:closed]" {
			t.Fatalf("store took %s", got)
		}
	})
}

// A listener that panics does not stop later changes from being announced.
func TestBreakerPanickingListenerDoesNotSilenceLaterChanges(t *testing.T) {
	var heard []breaker.State
	r := breaker.NewRegistry(breaker.Config{
		FailureThreshold: 1,
		OnStateChange: []func(breaker.StateChange){func(c breaker.StateChange) {
			heard = append(heard, c.To)
			if len(heard) == 1 {
				panic("listener broke")
			}
		}},
	})
	func() {
		defer func() { _ = recover() }()
		fail(t, r, "l", 1)
	}()
	if err := r.Reset("l"); err != nil {
		t.Fatal(err)
	}
	if len(heard) != 2 || heard[1] != breaker.StateClosed {
		t.Fatalf("heard %v", heard)
	}
}

// Open-duration jitter spreads re-probes within ±OpenJitter.
func TestBreakerOpenJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := breaker.NewRegistry(breaker.Config{OpenJitter: 0.5, FailureThreshold: 1})
		distinct := map[time.Duration]bool{}
		for i := range 200 {
			k := strconv.Itoa(i)
			fail(t, r, k, 1)
			rem, open := r.OpenFor(k)
			if !open || rem < 15*time.Second || rem > 45*time.Second {
				t.Fatalf("remaining %s outside 30s ± 50%%", rem)
			}
			distinct[rem] = true
		}
		if len(distinct) < 100 {
			t.Fatalf("only %d distinct open durations", len(distinct))
		}
	})
}

func TestBreakerFailureRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := breaker.NewRegistry(breaker.Config{
			FailureThreshold: 1000, FailureRate: 0.5, RateMinCalls: 10, RateWindow: 10 * time.Second,
		})
		outcome := func(ok bool) {
			p, err := r.Gate("r")
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				p.Success()
			} else {
				p.Failure()
			}
		}
		// Old failures slide out of the window.
		for range 9 {
			outcome(false)
		}
		time.Sleep(11 * time.Second)
		for i := range 9 {
			outcome(i%2 == 0) // 5 successes, 4 failures
		}
		wantState(t, r, "r", breaker.StateClosed)
		outcome(false) // 10 calls, 5 failures: 50 %
		wantState(t, r, "r", breaker.StateOpen)
	})
}

// With a key function each endpoint has its own breaker: A stays open while B flows.
func TestBreakerPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := breaker.NewRegistry(breaker.Config{Key: endpointKey})
		calls := map[string]int{}
		m := build(t, func(ctx context.Context, q *Call) (*Reply, error) {
			calls[q.Endpoint]++
			if q.Endpoint == "https://a.example" {
				return nil, &statusErr{Code: 503}
			}
			return &Reply{Text: "ok"}, nil
		}, breaker.New(r))
		for range 5 {
			_, _ = mediator.Send(context.Background(), m, &Call{Endpoint: "https://a.example"})
		}
		for range 10 {
			_, err := mediator.Send(context.Background(), m, &Call{Endpoint: "https://a.example"})
			if !errors.Is(err, breaker.ErrOpen) {
				t.Fatal(err)
			}
			if _, err := mediator.Send(context.Background(), m, &Call{Endpoint: "https://b.example"}); err != nil {
				t.Fatal(err)
			}
		}
		if calls["https://a.example"] != 5 || calls["https://b.example"] != 10 {
			t.Fatalf("calls %v", calls)
		}
		wantState(t, r, "https://a.example", breaker.StateOpen)
		wantState(t, r, "https://b.example", breaker.StateClosed)
	})
}

// Without a key function the breaker is the request type's, bound at Build.
func TestBreakerTypeKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := breaker.NewRegistry(breaker.Config{})
		m := build(t, func(ctx context.Context, q *Call) (*Reply, error) { return nil, errBoom },
			breaker.New(r))
		key := "*testkit.Call"
		wantState(t, r, key, breaker.StateClosed) // created at Build
		for range 5 {
			_, _ = mediator.Send(context.Background(), m, &Call{})
		}
		wantOpen(t, r, key, 30*time.Second)
		// Bound breakers are never evicted.
		time.Sleep(time.Hour)
		if n := r.Sweep(); n != 0 {
			t.Fatalf("evicted %d", n)
		}
	})
}

// One million distinct keys, each used once: eviction keeps the registry bounded.
func TestBreakerEvictionBounded(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	const bound = 10_000
	// The open duration outlasts any run of this test on a loaded machine, so the open breakers
	// are still open, not half-open, when they are checked at the end.
	r := breaker.NewRegistry(breaker.Config{MaxBreakers: bound, FailureThreshold: 1, OpenDuration: 24 * time.Hour})
	// Open breakers are never evicted.
	for i := range 10 {
		fail(t, r, "open-"+strconv.Itoa(i), 1)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ctx := context.Background()
	buf := make([]byte, 0, 32)
	for i := range n {
		buf = strconv.AppendInt(append(buf[:0], "https://host-"...), int64(i), 10)
		p, err := r.Gate(string(buf))
		if err != nil {
			t.Fatal(err)
		}
		p.Done(ctx, nil)
		if r.Len() > bound*5/4+10 {
			t.Fatalf("after %d keys the registry holds %d breakers", i+1, r.Len())
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d keys: heap before %d KiB, after %d KiB (grown %d KiB); %d breakers held",
		n, before.HeapAlloc>>10, after.HeapAlloc>>10, grown>>10, r.Len())
	if grown > 16<<20 {
		t.Fatalf("heap grew by %d MiB", grown>>20)
	}
	for i := range 10 {
		wantState(t, r, "open-"+strconv.Itoa(i), breaker.StateOpen)
	}
}

// Closed breakers idle for IdleTTL are evicted when new keys arrive or on Sweep; used ones and
// open ones inside their open duration stay. Once the open time has passed, an idle breaker
// with no probe in flight goes too.
func TestBreakerIdleTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := breaker.NewRegistry(breaker.Config{IdleTTL: time.Minute, FailureThreshold: 1, OpenDuration: 2 * time.Minute})
		for _, k := range []string{"idle", "busy"} {
			p, _ := r.Gate(k)
			p.Success()
		}
		fail(t, r, "down", 1)
		r.Sweep() // marks cleared
		time.Sleep(30 * time.Second)
		p, _ := r.Gate("busy")
		p.Success()
		time.Sleep(31 * time.Second)
		p, _ = r.Gate("new") // a new key past IdleTTL since the last sweep sweeps
		p.Success()
		if _, err := r.Get("idle"); !errors.Is(err, breaker.ErrUnknown) {
			t.Fatalf("idle breaker kept: %v", err)
		}
		for _, k := range []string{"busy", "down", "new"} {
			if _, err := r.Get(k); err != nil {
				t.Fatalf("%s evicted: %v", k, err)
			}
		}
		time.Sleep(time.Hour)
		if _, open := r.OpenFor("down"); open {
			t.Fatal("down still open after an hour")
		}
		// down is half-open now (OpenFor refreshed it), with no probe in flight: nothing is
		// left to decide, and unused for a sweep interval it goes.
		wantState(t, r, "down", breaker.StateHalfOpen)
		r.Sweep()
		r.Sweep()
		if _, err := r.Get("down"); !errors.Is(err, breaker.ErrUnknown) {
			t.Fatalf("idle half-open breaker without probes kept: %v", err)
		}
	})
}

func TestBreakerValidate(t *testing.T) {
	for _, c := range []breaker.Config{
		{FailureThreshold: -1}, {OpenJitter: 1}, {FailureRate: 2}, {OpenDuration: -time.Second}, {HalfOpenProbes: -1},
		{FailureRate: 0.5, RateMinCalls: -1},
	} {
		if breaker.NewRegistry(c).Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, (&script{}).Handle)
	m.Use(breaker.New(nil))
	if err := m.Build(); !errors.Is(err, mediator.ErrInvalidBehavior) {
		t.Fatal(err)
	}
}

// Many goroutines mixing outcomes, trips and resets: no race, and a half-open breaker never
// has more than K probes in flight.
func TestBreakerConcurrentStress(t *testing.T) {
	const k = 2
	synctest.Test(t, func(t *testing.T) {
		r := breaker.NewRegistry(breaker.Config{
			FailureThreshold: 3, HalfOpenProbes: k, OpenDuration: 10 * time.Millisecond, ProbeTimeout: 5 * time.Millisecond,
		})
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				for i := range 500 {
					p, err := r.Gate("s")
					if err != nil {
						time.Sleep(time.Millisecond)
						continue
					}
					if i%7 == 0 {
						time.Sleep(time.Duration(g%3) * time.Millisecond)
					}
					switch (g + i) % 5 {
					case 0, 1:
						p.Failure()
					case 2:
						p.Release()
					default:
						p.Success()
					}
					if g == 0 && i%100 == 0 {
						_ = r.Trip("s")
					}
					if g == 1 && i%150 == 0 {
						_ = r.Reset("s")
					}
				}
			})
		}
		wg.Go(func() {
			for range 200 {
				if s, _ := r.Get("s"); s.Probes > k {
					t.Errorf("%d probes in flight", s.Probes)
				}
				time.Sleep(time.Millisecond)
			}
		})
		wg.Wait()
	})
}

// Reporting a probe's outcome twice does not free another probe's slot.
func TestBreakerPermitReportedTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := breaker.NewRegistry(breaker.Config{})
		fail(t, r, "d", 5)
		time.Sleep(30 * time.Second)
		first, _ := r.Gate("d")
		first.Release()
		second, err := r.Gate("d")
		if err != nil {
			t.Fatal(err)
		}
		first.Release() // again: must not free second's slot
		if _, err := r.Gate("d"); !errors.Is(err, breaker.ErrOpen) {
			t.Fatalf("third probe admitted: %v", err)
		}
		second.Success()
		wantState(t, r, "d", breaker.StateClosed)
		var zero breaker.Permit
		zero.Done(context.Background(), errBoom) // records nothing, does not panic
	})
}

// Open breakers are never evicted, even past MaxBreakers; closed ones still are.
func TestBreakerEvictionKeepsOpen(t *testing.T) {
	r := breaker.NewRegistry(breaker.Config{MaxBreakers: 100, FailureThreshold: 1})
	for i := range 200 {
		fail(t, r, "open-"+strconv.Itoa(i), 1)
	}
	for i := range 1000 {
		p, _ := r.Gate("closed-" + strconv.Itoa(i))
		p.Success()
		if r.Len() > 200+125+1 {
			t.Fatalf("%d breakers after %d closed keys", r.Len(), i+1)
		}
	}
	for i := range 200 {
		if _, open := r.OpenFor("open-" + strconv.Itoa(i)); !open {
			t.Fatalf("open-%d evicted or closed", i)
		}
	}
}

// Calls still in flight when a sweep evicts their breaker (they began before it went idle for
// a sweep interval: slow calls to a dying dependency while many new keys arrive) still count:
// their failures open the key's breaker instead of vanishing with the evicted one.
func TestBreakerEvictionKeepsOutcomesOfCallsInFlight(t *testing.T) {
	r := breaker.NewRegistry(breaker.Config{MaxBreakers: 8, FailureThreshold: 2})
	p1, _ := r.Gate("slow")
	p2, _ := r.Gate("slow")
	for i := 0; ; i++ {
		if _, err := r.Get("slow"); errors.Is(err, breaker.ErrUnknown) {
			break
		}
		if i == 10_000 {
			t.Fatal("the idle breaker was never evicted")
		}
		p, _ := r.Gate("other-" + strconv.Itoa(i))
		p.Success()
	}
	p1.Done(context.Background(), errBoom)
	p2.Done(context.Background(), errBoom)
	wantState(t, r, "slow", breaker.StateOpen)
	if _, err := r.Gate("slow"); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("the dying dependency is still called: %v", err)
	}
}

// countingClock counts reads of the time.
type countingClock struct{ reads atomic.Int64 }

func (c *countingClock) Now() time.Time { c.reads.Add(1); return time.Now() }
func (c *countingClock) After(d time.Duration) (<-chan time.Time, func() bool) {
	return behaviors.SystemClock.After(d)
}

// The closed-path success reads no clock, through the behavior and through Gate/Done, once
// the key's breaker exists.
func TestBreakerClosedPathReadsNoClock(t *testing.T) {
	c := &countingClock{}
	r := breaker.NewRegistry(breaker.Config{Key: endpointKey, Clock: c})
	cb := breaker.New(r)
	req := &Call{Endpoint: "k"}
	next := func(context.Context, any) (any, error) { return &Reply{}, nil }
	_, _ = cb.Handle(context.Background(), req, next) // creates the breaker
	before := c.reads.Load()
	for range 1000 {
		if _, err := cb.Handle(context.Background(), req, next); err != nil {
			t.Fatal(err)
		}
		p, err := r.Gate("k")
		if err != nil {
			t.Fatal(err)
		}
		p.Done(context.Background(), nil)
	}
	if n := c.reads.Load() - before; n != 0 {
		t.Fatalf("%d clock reads on the closed success path", n)
	}
	// A failure ends the fast path until a success ends the streak (that success takes the
	// lock once); then no clock again.
	fail(t, r, "k", 1)
	p, _ := r.Gate("k")
	p.Success()
	before = c.reads.Load()
	for range 100 {
		_, _ = cb.Handle(context.Background(), req, next)
	}
	if n := c.reads.Load() - before; n != 0 {
		t.Fatalf("%d clock reads after the streak ended", n)
	}
}
