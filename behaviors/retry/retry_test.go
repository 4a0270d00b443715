package retry_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/bulkhead"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/behaviors/timeout"
	"github.com/switchboard-go/switchboard/behaviors/validation"
	"github.com/switchboard-go/switchboard/mediator"
)

// retrying builds a mediator with a Retry of policy p over a scripted handler that also
// records the attempt numbers it sees.
func retrying(t *testing.T, cfg retry.Config, results ...error) (*mediator.Mediator, *script, *[]int) {
	t.Helper()
	s := &script{Results: results}
	var attempts []int
	m := build(t, func(ctx context.Context, q *Call) (*Reply, error) {
		attempts = append(attempts, retry.AttemptNumber(ctx))
		return s.Handle(ctx, q)
	}, retry.New(cfg))
	return m, s, &attempts
}

func TestRetryDefaultIsOneAttempt(t *testing.T) {
	m, s, _ := retrying(t, retry.Config{}, &statusErr{Code: 503})
	_, err := mediator.Send(context.Background(), m, &Call{})
	var se *statusErr
	if !errors.As(err, &se) || errors.Is(err, retry.ErrExhausted) || s.Calls != 1 {
		t.Fatalf("err %v after %d calls", err, s.Calls)
	}
}

func TestRetryUntilSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var events []retry.Event
		m, s, attempts := retrying(t, retry.Config{
			Policy:  retry.Policy{MaxAttempts: 4, Strategy: retry.Exponential, BaseDelay: 100 * time.Millisecond},
			OnRetry: []func(context.Context, retry.Event){func(_ context.Context, e retry.Event) { events = append(events, e) }},
		}, &statusErr{Code: 503}, &transientErr{Msg: "flaky"}, &statusErr{Code: 429})
		start := time.Now()
		r, err := mediator.Send(context.Background(), m, &Call{Endpoint: "e"})
		if err != nil || r.Text != "ok e" || s.Calls != 4 {
			t.Fatalf("%v %v after %d calls", r, err, s.Calls)
		}
		if got := time.Since(start); got != 700*time.Millisecond {
			t.Fatalf("waited %s, want 100+200+400 ms", got)
		}
		if fmt.Sprint(*attempts) != "[1 2 3 4]" {
			t.Fatalf("attempts seen %v", *attempts)
		}
		if len(events) != 3 || events[0].Attempt != 1 || events[2].Attempt != 3 ||
			events[1].Delay != 200*time.Millisecond || events[2].Err.Error() != "status 429" {
			t.Fatalf("events %+v", events)
		}
	})
}

func TestRetryExhaustedKeepsLastError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		last := &statusErr{Code: 504}
		m, s, _ := retrying(t, retry.Config{Policy: retry.Policy{MaxAttempts: 3}},
			&statusErr{Code: 503}, &statusErr{Code: 502}, last)
		start := time.Now()
		_, err := mediator.Send(context.Background(), m, &Call{})
		var re *retry.ExhaustedError
		var se *statusErr
		if !errors.As(err, &re) || re.Attempts != 3 || !errors.Is(err, retry.ErrExhausted) ||
			!errors.As(err, &se) || se != last || s.Calls != 3 {
			t.Fatalf("err %v", err)
		}
		if err.Error() != "retry: failed after 3 attempts: status 504" {
			t.Fatal(err)
		}
		if time.Since(start) != time.Second { // fixed 500 ms × 2
			t.Fatal(time.Since(start))
		}
	})
}

func TestRetryNeverRetried(t *testing.T) {
	for _, err := range []error{
		errBoom,
		&statusErr{Code: 500},
		&statusErr{Code: 404},
		&validation.Error{Err: errBoom},
		&mediator.NoHandlerError{Kind: "request"},
		&breaker.OpenError{Key: "k", Remaining: time.Second},
		&bulkhead.FullError{Key: "k", Limit: 1},
		&timeout.ExceededError{Duration: time.Second, Err: context.DeadlineExceeded},
		context.Canceled,
	} {
		synctest.Test(t, func(t *testing.T) {
			m, s, _ := retrying(t, retry.Config{Policy: retry.Policy{MaxAttempts: 5}}, err)
			_, got := mediator.Send(context.Background(), m, &Call{})
			if s.Calls != 1 || !errors.Is(got, err) || errors.Is(got, retry.ErrExhausted) {
				t.Errorf("%v: %d calls, err %v", err, s.Calls, got)
			}
		})
	}
}

func TestRetryOnTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		to := &timeout.ExceededError{Duration: time.Second, Err: context.DeadlineExceeded}
		m, s, _ := retrying(t, retry.Config{Policy: retry.Policy{
			MaxAttempts: 3, BaseDelay: time.Millisecond, RetryOnTimeout: behaviors.On,
		}}, to, to)
		if _, err := mediator.Send(context.Background(), m, &Call{}); err != nil || s.Calls != 3 {
			t.Fatalf("%v after %d", err, s.Calls)
		}
	})
}

// The caller's cancellation is never retried: neither a cancelled attempt nor a cancelled
// wait.
func TestRetryCallerCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		m := build(t, func(ctx context.Context, q *Call) (*Reply, error) {
			calls++
			cancel()
			return nil, ctx.Err()
		}, retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 5, Classifier: func(error) bool { return true }}}))
		_, err := mediator.Send(ctx, m, &Call{})
		if err != context.Canceled || calls != 1 {
			t.Fatalf("%v after %d calls", err, calls)
		}

		ctx, cancel = context.WithCancel(context.Background())
		m2, s, _ := retrying(t, retry.Config{Policy: retry.Policy{MaxAttempts: 5, BaseDelay: time.Minute, MaxDelay: time.Minute}}, &statusErr{Code: 503})
		go func() { time.Sleep(time.Second); cancel() }()
		start := time.Now()
		_, err = mediator.Send(ctx, m2, &Call{})
		if err != context.Canceled || s.Calls != 1 || time.Since(start) != time.Second {
			t.Fatalf("%v after %d calls, %s", err, s.Calls, time.Since(start))
		}
	})
}

// A retry that could not start before the context's deadline is not waited for.
func TestRetryStopsBeforeDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, s, _ := retrying(t, retry.Config{Policy: retry.Policy{MaxAttempts: 5, BaseDelay: 2 * time.Second}},
			&statusErr{Code: 503}, &statusErr{Code: 503})
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		start := time.Now()
		_, err := mediator.Send(ctx, m, &Call{})
		var re *retry.ExhaustedError
		if !errors.As(err, &re) || re.Attempts != 2 || s.Calls != 2 || time.Since(start) != 2*time.Second {
			t.Fatalf("%v after %d calls, %s", err, s.Calls, time.Since(start))
		}
	})
}

func TestRetryAfterHint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var delays []time.Duration
		m, s, _ := retrying(t, retry.Config{
			Policy:  retry.Policy{MaxAttempts: 4, BaseDelay: time.Second, MaxDelay: 10 * time.Second},
			OnRetry: []func(context.Context, retry.Event){func(_ context.Context, e retry.Event) { delays = append(delays, e.Delay) }},
		},
			&statusErr{Code: 429, After: 3 * time.Second},        // hint larger: wins
			&statusErr{Code: 503, After: 100 * time.Millisecond}, // smaller: backoff wins
			&statusErr{Code: 429, After: time.Minute},            // above MaxDelay: give up
		)
		_, err := mediator.Send(context.Background(), m, &Call{})
		if fmt.Sprint(delays) != "[3s 1s]" || s.Calls != 3 || !errors.Is(err, retry.ErrExhausted) {
			t.Fatalf("delays %v, %d calls, %v", delays, s.Calls, err)
		}
	})
}

// WaitForBreaker waits out the breaker's remaining open time (capped at MaxDelay).
func TestRetryWaitForBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := breaker.NewRegistry(breaker.Config{Key: endpointKey, OpenDuration: 5 * time.Second})
		calls := 0
		m := build(t, func(ctx context.Context, q *Call) (*Reply, error) { calls++; return &Reply{}, nil },
			retry.New(retry.Config{Policy: retry.Policy{
				MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 3 * time.Second, WaitForBreaker: behaviors.On,
			}}),
			breaker.New(r))
		fail(t, r, "w", 5)
		start := time.Now()
		if _, err := mediator.Send(context.Background(), m, &Call{Endpoint: "w"}); err != nil {
			t.Fatal(err)
		}
		// 3 s (capped), still open with 2 s left, 2 s, then the probe succeeds.
		if calls != 1 || time.Since(start) != 5*time.Second {
			t.Fatalf("%d calls after %s", calls, time.Since(start))
		}
	})
}

// After a call that tripped its breaker, WaitForBreaker waits the breaker's open time, or the
// handler's own Retry-After hint when that is longer (capped at MaxDelay): no call gets
// through sooner, and the server asked for the longer wait.
func TestRetryWaitAfterTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, c := range []struct {
			hint, want time.Duration
		}{{0, 2 * time.Second}, {4 * time.Second, 4 * time.Second}, {time.Minute, 10 * time.Second}} {
			var delays []time.Duration
			calls := 0
			rt := retry.New(retry.Config{
				Policy: retry.Policy{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Second, WaitForBreaker: behaviors.On},
				OnRetry: []func(context.Context, retry.Event){func(_ context.Context, e retry.Event) {
					delays = append(delays, e.Delay)
				}},
			})
			_, err := rt.Handle(context.Background(), &Call{}, func(context.Context, any) (any, error) {
				calls++
				if calls == 1 {
					return nil, &breaker.TrippedError{Key: "k", Remaining: 2 * time.Second, Err: &statusErr{Code: 503, After: c.hint}}
				}
				return &Reply{}, nil
			})
			if err != nil || len(delays) != 1 || delays[0] != c.want {
				t.Fatalf("hint %s: %v, delays %v, want %s", c.hint, err, delays, c.want)
			}
		}
	})
}

// Policies merge field by field: default → behavior → per key → per request; later wins.
func TestRetryLayers(t *testing.T) {
	rt := retry.New(retry.Config{
		Policy: retry.Policy{MaxAttempts: 3, BaseDelay: time.Second},
		Key:    endpointKey,
		KeyPolicy: func(key string) (retry.Policy, bool) {
			if key == "slow" {
				return retry.Policy{Strategy: retry.Exponential, MaxDelay: time.Minute, Jitter: behaviors.On}, true
			}
			return retry.Policy{}, false
		},
	})
	slow := &Call{Endpoint: "slow"}
	ctx := retry.WithOverride(context.Background(), slow, retry.Policy{MaxAttempts: 2, Jitter: behaviors.Off})
	p := rt.Policy(ctx, slow)
	if p.MaxAttempts != 2 || p.BaseDelay != time.Second || p.Strategy != retry.Exponential ||
		p.MaxDelay != time.Minute || p.Jitter != behaviors.Off || p.Multiplier != 2 || len(p.RetryableStatusCodes) != 4 {
		t.Fatalf("merged %+v", p)
	}
	p = rt.Policy(context.Background(), &Call{Endpoint: "fast"})
	if p.MaxAttempts != 3 || p.Strategy != retry.Fixed || p.MaxDelay != 30*time.Second {
		t.Fatalf("merged %+v", p)
	}
	// Overrides for one request stack.
	ctx = retry.WithOverride(ctx, slow, retry.Policy{BaseDelay: time.Millisecond})
	if o, _ := retry.Override(ctx, slow); o.MaxAttempts != 2 || o.BaseDelay != time.Millisecond {
		t.Fatalf("override %+v", o)
	}
	// The override belongs to its request: another request on the same context runs under its
	// own layers.
	if _, ok := retry.Override(ctx, &Call{Endpoint: "slow"}); ok {
		t.Fatal("override leaked to another request")
	}
	if p := rt.Policy(ctx, &Call{Endpoint: "slow"}); p.MaxAttempts != 3 {
		t.Fatalf("another request's policy %+v", p)
	}
}

// A scheduler that owns retrying marks its dispatch SingleAttempt: exactly one attempt.
func TestRetrySingleAttemptMark(t *testing.T) {
	m, s, _ := retrying(t, retry.Config{Policy: retry.Policy{MaxAttempts: 5}}, &statusErr{Code: 503})
	req := &Call{}
	ctx := mediator.WithMarks(context.Background(), req, mediator.SingleAttempt)
	_, err := mediator.Send(ctx, m, req)
	var se *statusErr
	if s.Calls != 1 || !errors.As(err, &se) || errors.Is(err, retry.ErrExhausted) {
		t.Fatalf("%d calls, %v", s.Calls, err)
	}
}

func TestRetryCustomBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		made := 0
		m, s, _ := retrying(t, retry.Config{
			Policy: retry.Policy{MaxAttempts: 10},
			BackOff: func(p retry.Policy) backoff.BackOff {
				made++
				return backoff.WithMaxRetries(backoff.NewConstantBackOff(time.Second), 2)
			},
		}, errs(5, &statusErr{Code: 503})...)
		start := time.Now()
		_, err := mediator.Send(context.Background(), m, &Call{})
		var re *retry.ExhaustedError
		if !errors.As(err, &re) || re.Attempts != 3 || s.Calls != 3 || made != 1 || time.Since(start) != 2*time.Second {
			t.Fatalf("%v, %d calls, %d backoffs, %s", err, s.Calls, made, time.Since(start))
		}
		// Success makes no backoff.
		made = 0
		m2, _, _ := retrying(t, retry.Config{Policy: retry.Policy{MaxAttempts: 10},
			BackOff: func(retry.Policy) backoff.BackOff { made++; return &backoff.ZeroBackOff{} }})
		if _, err := mediator.Send(context.Background(), m2, &Call{}); err != nil || made != 0 {
			t.Fatal(err, made)
		}
	})
}

func TestRetryValidate(t *testing.T) {
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, (&script{}).Handle)
	m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: -1, Multiplier: 0.5}}))
	err := m.Build()
	if !errors.Is(err, mediator.ErrInvalidBehavior) {
		t.Fatal(err)
	}
	// A per-key layer without a key function would be silently ignored.
	rt := retry.New(retry.Config{KeyPolicy: func(string) (retry.Policy, bool) {
		return retry.Policy{MaxAttempts: 3}, true
	}})
	if rt.Validate() == nil {
		t.Fatal("KeyPolicy without Key accepted")
	}
}

func TestAttemptUnset(t *testing.T) {
	if retry.AttemptNumber(context.Background()) != 1 {
		t.Fatal("Attempt without retry is not 1")
	}
}

func errs(n int, err error) []error {
	out := make([]error, n)
	for i := range out {
		out[i] = err
	}
	return out
}

// The success path reads no clock and starts no timer.
func TestRetrySuccessPathTouchesNoClock(t *testing.T) {
	c := &countingClock{}
	rt := retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 5}, Clock: c})
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	for range 100 {
		if _, err := rt.Handle(ctx, &Call{}, func(context.Context, any) (any, error) { return &Reply{}, nil }); err != nil {
			t.Fatal(err)
		}
	}
	if c.reads.Load() != 0 {
		t.Fatalf("%d clock reads", c.reads.Load())
	}
}

// When the last attempt is refused by an open breaker, the final error still reaches the error
// of the last attempt that reached the handler.
func TestRetryErrorKeepsHandlerErrorBehindRefusal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errUpstream := errors.New("upstream down")
		r := breaker.NewRegistry(breaker.Config{Key: endpointKey})
		calls := 0
		m := build(t, func(context.Context, *Call) (*Reply, error) {
			calls++
			return nil, fmt.Errorf("call %d: %w", calls, &upstreamError{err: errUpstream})
		},
			retry.New(retry.Config{
				Policy: retry.Policy{MaxAttempts: 3, BaseDelay: time.Second, Classifier: func(error) bool { return true }},
				// An operator (or another instance) opens the breaker between the attempts.
				OnRetry: []func(context.Context, retry.Event){func(context.Context, retry.Event) { _ = r.Trip("u") }},
			}),
			breaker.New(r))
		_, err := mediator.Send(context.Background(), m, &Call{Endpoint: "u"})
		var re *retry.ExhaustedError
		var co *breaker.OpenError
		var ue *upstreamError
		if calls != 1 || !errors.As(err, &re) || re.Attempts != 2 || !errors.As(err, &co) ||
			!errors.Is(err, retry.ErrExhausted) || !errors.Is(err, errUpstream) || !errors.As(err, &ue) {
			t.Fatalf("%d calls, err %v", calls, err)
		}
		if want := `retry: failed after 2 attempts: breaker: circuit open for "u" (probe in 29s) (last handler error: call 1: upstream down)`; err.Error() != want {
			t.Fatalf("message %q, want %q", err, want)
		}
	})
}

// upstreamError is a handler's error type, found with errors.As behind a refusal.
type upstreamError struct{ err error }

func (e *upstreamError) Error() string { return e.err.Error() }
func (e *upstreamError) Unwrap() error { return e.err }

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

// countingClock counts reads of the time.
type countingClock struct{ reads atomic.Int64 }

func (c *countingClock) Now() time.Time { c.reads.Add(1); return time.Now() }
func (c *countingClock) After(d time.Duration) (<-chan time.Time, func() bool) {
	c.reads.Add(1)
	return behaviors.SystemClock.After(d)
}

// MaxAge ends the retries when the next one would start past it, measured from the first
// attempt's start: with a retry every second and MaxAge 2.5 s, attempts start at 0, 1 and 2 s,
// and the one at 3 s is not made. The final error says MaxAge ended them. MaxAge 0 is no bound.
func TestRetryMaxAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		last := &statusErr{Code: 503}
		m, s, _ := retrying(t, retry.Config{Policy: retry.Policy{
			MaxAttempts: 10, Strategy: retry.Fixed, BaseDelay: time.Second, MaxAge: 2500 * time.Millisecond,
		}}, errs(10, last)...)
		start := time.Now()
		_, err := mediator.Send(context.Background(), m, &Call{})
		var re *retry.ExhaustedError
		var se *statusErr
		if !errors.As(err, &re) || re.Attempts != 3 || re.MaxAge != 2500*time.Millisecond || re.Hint != 0 ||
			!errors.Is(err, retry.ErrExhausted) || !errors.As(err, &se) || se != last || s.Calls != 3 {
			t.Fatalf("%d calls, err %v", s.Calls, err)
		}
		if want := "retry: failed after 3 attempts (retries stopped: the next attempt would start more than MaxAge 2.5s after the first failure): status 503"; err.Error() != want {
			t.Fatalf("message %q, want %q", err, want)
		}
		if time.Since(start) != 2*time.Second {
			t.Fatalf("waited %s, want 2s", time.Since(start))
		}

		// A retry that starts exactly MaxAge after the first failure is made: only one that
		// would start later is not.
		m, s, _ = retrying(t, retry.Config{Policy: retry.Policy{
			MaxAttempts: 10, Strategy: retry.Fixed, BaseDelay: time.Second, MaxAge: 2 * time.Second,
		}}, errs(10, last)...)
		if _, err := mediator.Send(context.Background(), m, &Call{}); !errors.As(err, &re) || re.Attempts != 3 || s.Calls != 3 {
			t.Fatalf("MaxAge on a retry's start: %d calls, err %v", s.Calls, err)
		}

		// Unset, the attempts and the delays alone bound the call, as before.
		m, s, _ = retrying(t, retry.Config{Policy: retry.Policy{
			MaxAttempts: 10, Strategy: retry.Fixed, BaseDelay: time.Second,
		}}, errs(10, last)...)
		start = time.Now()
		_, err = mediator.Send(context.Background(), m, &Call{})
		if !errors.As(err, &re) || re.Attempts != 10 || re.MaxAge != 0 || s.Calls != 10 || time.Since(start) != 9*time.Second {
			t.Fatalf("MaxAge 0: %d calls after %s, err %v", s.Calls, time.Since(start), err)
		}
		if want := "retry: failed after 10 attempts: status 503"; err.Error() != want {
			t.Fatalf("MaxAge 0: message %q, want %q", err, want)
		}
	})
}

// MaxAge is measured with the behavior's clock from the first failure, so the first attempt's
// own duration does not count and the later ones' do: attempts of 400 ms with a 1 s delay
// start at 0, 1.4 and 2.8 s (2.4 s after the first failure, within MaxAge 2.5 s), and the next
// would start at 4.2 s, 3.8 s after it. A MaxAge set by a per-key layer or a per-request override is
// measured the same way; one shorter than the first delay still ends the call with an
// *ExhaustedError after one attempt, so the caller learns why nothing was retried.
func TestRetryMaxAgeFromFirstFailure(t *testing.T) {
	for _, c := range []struct {
		name   string
		cfg    retry.Config
		ctx    func(req *Call) context.Context
		maxAge time.Duration
		calls  int
	}{
		{name: "behavior", cfg: retry.Config{Policy: retry.Policy{MaxAttempts: 10, BaseDelay: time.Second, MaxAge: 2500 * time.Millisecond}},
			maxAge: 2500 * time.Millisecond, calls: 3},
		{name: "per key", cfg: retry.Config{Policy: retry.Policy{MaxAttempts: 10, BaseDelay: time.Second}, Key: endpointKey,
			KeyPolicy: func(string) (retry.Policy, bool) { return retry.Policy{MaxAge: 2500 * time.Millisecond}, true }},
			maxAge: 2500 * time.Millisecond, calls: 3},
		{name: "override", cfg: retry.Config{Policy: retry.Policy{MaxAttempts: 10, BaseDelay: time.Second}},
			ctx: func(req *Call) context.Context {
				return retry.WithOverride(context.Background(), req, retry.Policy{MaxAge: 2500 * time.Millisecond})
			},
			maxAge: 2500 * time.Millisecond, calls: 3},
		{name: "shorter than the first delay", cfg: retry.Config{Policy: retry.Policy{MaxAttempts: 10, BaseDelay: time.Second, MaxAge: 500 * time.Millisecond}},
			maxAge: 500 * time.Millisecond, calls: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := &stepClock{now: time.Unix(1_000_000, 0)}
			c.cfg.Clock = clk
			rt := retry.New(c.cfg)
			req := &Call{Endpoint: "quotes"}
			ctx := context.Background()
			if c.ctx != nil {
				ctx = c.ctx(req)
			}
			var starts []time.Duration
			t0 := clk.now
			_, err := rt.Handle(ctx, req, func(context.Context, any) (any, error) {
				starts = append(starts, clk.now.Sub(t0))
				clk.now = clk.now.Add(400 * time.Millisecond)
				return nil, &statusErr{Code: 503}
			})
			var re *retry.ExhaustedError
			if !errors.As(err, &re) || re.Attempts != c.calls || re.MaxAge != c.maxAge || len(starts) != c.calls {
				t.Fatalf("attempts started at %v, err %v", starts, err)
			}
			// The first failure is at 0.4 s: the retry at 2.8 s is 2.4 s after it, the next would
			// be 3.8 s after it.
			if c.calls == 3 && (starts[1] != 1400*time.Millisecond || starts[2] != 2800*time.Millisecond) {
				t.Fatalf("attempts started at %v", starts)
			}
		})
	}
}

// The success path allocates nothing and reads no clock with MaxAge set either: MaxAge is
// measured from the first failure.
func TestRetryMaxAgeSuccessPath(t *testing.T) {
	c := &countingClock{}
	rt := retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 5, MaxAge: time.Minute}, Clock: c})
	ctx, req, reply := context.Background(), &Call{}, &Reply{}
	next := func(context.Context, any) (any, error) { return reply, nil }
	if n := testing.AllocsPerRun(1000, func() { _, _ = rt.Handle(ctx, req, next) }); n != 0 {
		t.Fatalf("%v allocs on the success path with MaxAge", n)
	}
	before := c.reads.Load()
	if _, err := rt.Handle(ctx, req, next); err != nil || c.reads.Load() != before {
		t.Fatalf("%v, %d clock reads", err, c.reads.Load()-before)
	}
}
