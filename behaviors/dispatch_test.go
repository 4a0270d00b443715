package behaviors_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/mediator"
)

// A fallback does not answer for the handler of an unattended dispatch (a scheduler's): the
// scheduler must record the handler's own failure, not a degraded "success".
func TestFallbackStepsAsideWhenUnattended(t *testing.T) {
	m := build(t, func(context.Context, *Call) (*Reply, error) { return nil, &statusErr{code: 503} },
		behaviors.NewFallbackFor(func(context.Context, *Call, error) (*Reply, error) { return &Reply{Text: "degraded"}, nil }))
	r, err := mediator.Send(context.Background(), m, &Call{})
	if err != nil || r.Text != "degraded" {
		t.Fatal(r, err)
	}
	req := &Call{}
	_, err = mediator.Send(mediator.WithMarks(context.Background(), req, mediator.Unattended), m, req)
	var se *statusErr
	if !errors.As(err, &se) || se.code != 503 {
		t.Fatalf("unattended dispatch answered by the fallback: %v", err)
	}
}

// The failure that opens the breaker ends the retries at once: the next attempt would be
// refused, so waiting for it wastes a full delay of every request in flight at the trip.
func TestRetryStopsAtTheTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := behaviors.NewBreakerRegistry(behaviors.BreakerConfig{FailureThreshold: 2})
		s := &script{results: []error{&statusErr{code: 503}, &statusErr{code: 503}, &statusErr{code: 503}, &statusErr{code: 503}}}
		m := build(t, s.handle,
			behaviors.NewRetry(behaviors.RetryConfig{Policy: behaviors.RetryPolicy{MaxAttempts: 4, BaseDelay: time.Second}}),
			behaviors.NewCircuitBreaker(reg, nil))
		start := time.Now()
		_, err := mediator.Send(context.Background(), m, &Call{})
		if took := time.Since(start); took != time.Second {
			t.Errorf("took %s, want one delay (1s) before the attempt that tripped and none after", took)
		}
		var re *behaviors.RetryError
		var se *statusErr
		if s.calls != 2 || !errors.As(err, &re) || re.Attempts != 2 || !errors.Is(err, behaviors.ErrCircuitTripped) ||
			!errors.As(err, &se) || errors.Is(err, behaviors.ErrCircuitOpen) {
			t.Fatalf("%d calls, %v", s.calls, err)
		}
	})
}

// With WaitForBreaker the loop waits out the open time after the trip instead of stopping.
func TestRetryWaitsOutTheTripWhenAsked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := behaviors.NewBreakerRegistry(behaviors.BreakerConfig{FailureThreshold: 1, OpenDuration: 5 * time.Second})
		s := &script{results: []error{&statusErr{code: 503}}}
		m := build(t, s.handle,
			behaviors.NewRetry(behaviors.RetryConfig{Policy: behaviors.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Second, WaitForBreaker: behaviors.On}}),
			behaviors.NewCircuitBreaker(reg, nil))
		start := time.Now()
		r, err := mediator.Send(context.Background(), m, &Call{})
		if err != nil || r.Text != "ok " || s.calls != 2 || time.Since(start) != 5*time.Second {
			t.Fatalf("%v %v after %d calls and %s", r, err, s.calls, time.Since(start))
		}
	})
}

// A Retry-After hint above MaxDelay ends the retries with a RetryError that says so, instead of
// returning the raw error as if the policy had allowed one attempt.
func TestRetryAfterAboveMaxDelaySaysSo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hinted := &statusErr{code: 503, after: 2 * time.Minute}
		m, s, _ := retrying(t, behaviors.RetryConfig{Policy: behaviors.RetryPolicy{MaxAttempts: 5, MaxDelay: 30 * time.Second}}, hinted)
		_, err := mediator.Send(context.Background(), m, &Call{})
		var re *behaviors.RetryError
		if s.calls != 1 || !errors.As(err, &re) || re.Hint != 2*time.Minute || re.MaxDelay != 30*time.Second ||
			re.RetryAfter() != 2*time.Minute || !errors.Is(err, hinted) {
			t.Fatalf("%d calls: %v", s.calls, err)
		}
		want := "behaviors: failed after 1 attempt (retries stopped: the server asked to wait 2m0s, more than MaxDelay 30s): status 503"
		if err.Error() != want {
			t.Fatalf("message %q", err.Error())
		}
		// A hint the policy can honour is waited for.
		m, s, _ = retrying(t, behaviors.RetryConfig{Policy: behaviors.RetryPolicy{MaxAttempts: 2, MaxDelay: 30 * time.Second}},
			&statusErr{code: 503, after: 20 * time.Second})
		start := time.Now()
		if _, err := mediator.Send(context.Background(), m, &Call{}); err != nil || s.calls != 2 || time.Since(start) != 20*time.Second {
			t.Fatalf("%v after %d calls and %s", err, s.calls, time.Since(start))
		}
	})
}

func TestRetryPolicyRetries(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	timeout := &behaviors.TimeoutError{Duration: time.Second, Err: context.DeadlineExceeded}
	cases := []struct {
		name string
		p    behaviors.RetryPolicy
		err  error
		want bool
	}{
		{"default 503", behaviors.RetryPolicy{}, &statusErr{code: 503}, true},
		{"default 500", behaviors.RetryPolicy{}, &statusErr{code: 500}, false},
		{"widened 500", behaviors.RetryPolicy{RetryableStatusCodes: []int{500}}, &statusErr{code: 500}, true},
		{"narrowed 503", behaviors.RetryPolicy{RetryableStatusCodes: []int{}}, &statusErr{code: 503}, false},
		{"timeout off", behaviors.RetryPolicy{}, timeout, false},
		{"timeout on", behaviors.RetryPolicy{RetryOnTimeout: behaviors.On}, timeout, true},
		{"transport off", behaviors.RetryPolicy{}, refused, false},
		{"transport on", behaviors.RetryPolicy{RetryOnTransport: behaviors.On}, refused, true},
		{"cancel never", behaviors.RetryPolicy{RetryOnTransport: behaviors.On, Classify: func(error) bool { return true }}, context.Canceled, false},
		{"validation never", behaviors.RetryPolicy{Classify: func(error) bool { return true }}, &behaviors.ValidationError{Err: errBoom}, false},
		{"open", behaviors.RetryPolicy{}, &behaviors.CircuitOpenError{}, false},
		{"open, waiting", behaviors.RetryPolicy{WaitForBreaker: behaviors.On}, &behaviors.CircuitOpenError{}, true},
		{"classify", behaviors.RetryPolicy{Classify: func(err error) bool { return err == errBoom }}, errBoom, true},
		{"tripped 503", behaviors.RetryPolicy{}, &behaviors.CircuitTrippedError{Err: &statusErr{code: 503}}, true},
		{"nil", behaviors.RetryPolicy{}, nil, false},
	}
	for _, c := range cases {
		if got := c.p.Retries(c.err); got != c.want {
			t.Errorf("%s: Retries(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

func TestIsTransport(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, true},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{io.ErrUnexpectedEOF, true},
		{&url.Error{Op: "Post", URL: "http://x", Err: io.EOF}, true},
		{io.EOF, false}, // end of a stream, not a broken connection
		{&net.DNSError{Err: "server misbehaving", IsTemporary: true}, true},
		{&net.DNSError{Err: "no such host", IsNotFound: true}, false},
		{errBoom, false},
		{nil, false},
	} {
		if got := behaviors.IsTransport(c.err); got != c.want {
			t.Errorf("IsTransport(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// Refused tells a refusal of the request itself (its breaker, its bulkhead: the handler never
// ran) from a refusal its handler met sending another request and returned (the handler ran).
func TestRefusedNamesTheRequestRefused(t *testing.T) {
	reg := behaviors.NewBreakerRegistry(behaviors.BreakerConfig{})
	var innerErr error
	var m *mediator.Mediator
	m = mediator.New(nil)
	if err := mediator.HandleFunc(m, func(ctx context.Context, q *Call) (*Reply, error) {
		if q.Endpoint == "outer" {
			_, innerErr = mediator.Send(ctx, m, &Call{Endpoint: "inner"})
			return nil, innerErr
		}
		return &Reply{}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := m.Use(behaviors.NewCircuitBreaker(reg, endpointKey)); err != nil {
		t.Fatal(err)
	}
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	// Create both breakers, then open the inner one.
	for _, e := range []string{"inner"} {
		if _, err := mediator.Send(context.Background(), m, &Call{Endpoint: e}); err != nil {
			t.Fatal(err)
		}
	}
	if err := reg.Trip("inner"); err != nil {
		t.Fatal(err)
	}
	outer := &Call{Endpoint: "outer"}
	_, err := mediator.Send(context.Background(), m, outer)
	if !errors.Is(err, behaviors.ErrCircuitOpen) || behaviors.Refused(err, outer) {
		t.Fatalf("outer's handler ran and returned the inner refusal %v; Refused says %v", err, behaviors.Refused(err, outer))
	}
	inner := &Call{Endpoint: "inner"}
	if _, err := mediator.Send(context.Background(), m, inner); !behaviors.Refused(err, inner) || behaviors.Refused(err, outer) {
		t.Fatalf("inner refusal %v", err)
	}
	if behaviors.Refused(&behaviors.CircuitOpenError{}, inner) || behaviors.Refused(errBoom, inner) || behaviors.Refused(nil, inner) {
		t.Fatal("a refusal without a request, or no refusal, is not inner's")
	}

	// A full bulkhead refuses its own request.
	release := make(chan struct{})
	entered := make(chan struct{})
	bm := build(t, func(ctx context.Context, q *Call) (*Reply, error) {
		if q.Endpoint == "hold" {
			close(entered)
			<-release
		}
		return &Reply{}, nil
	}, behaviors.NewBulkhead(behaviors.BulkheadConfig{Limit: 1}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = mediator.Send(context.Background(), bm, &Call{Endpoint: "hold"})
	}()
	<-entered
	second := &Call{}
	_, err = mediator.Send(context.Background(), bm, second)
	close(release)
	<-done
	if !errors.Is(err, behaviors.ErrBulkheadFull) || !behaviors.Refused(err, second) {
		t.Fatalf("bulkhead refusal %v", err)
	}
}

// The hint a RetryError or a CircuitTrippedError reports is the longest one it knows: a
// server's Retry-After behind them is not hidden by their own zero hint or shorter open time.
func TestWrappedHintsAreKept(t *testing.T) {
	inner := &statusErr{code: 503, after: 3 * time.Second}
	if got := (&behaviors.RetryError{Attempts: 2, Err: inner}).RetryAfter(); got != 3*time.Second {
		t.Errorf("RetryError over a 3s hint: %v", got)
	}
	tripped := &behaviors.CircuitTrippedError{Key: "k", Remaining: 30 * time.Second, Err: &statusErr{code: 503, after: time.Minute}}
	if got := tripped.RetryAfter(); got != time.Minute {
		t.Errorf("tripped 30s over a 1m hint: %v", got)
	}
	if got := (&behaviors.RetryError{Attempts: 2, Err: tripped}).RetryAfter(); got != time.Minute {
		t.Errorf("RetryError over a tripped breaker: %v", got)
	}
}

func TestRetryPolicyRejectsImpossibleStatusCodes(t *testing.T) {
	err := behaviors.RetryPolicy{RetryableStatusCodes: []int{503, 0, 999}}.Validate()
	if err == nil || !strings.Contains(err.Error(), "0 is not an HTTP-like status code") || !strings.Contains(err.Error(), "999") {
		t.Fatalf("Validate: %v", err)
	}
}

// Boundaries of the validation and classification rules.
func TestPolicyAndClassifierBoundaries(t *testing.T) {
	if err := (behaviors.RetryPolicy{RetryableStatusCodes: []int{100, 599}, Jitter: behaviors.Off, RetryOnTimeout: behaviors.On}).Validate(); err != nil {
		t.Errorf("valid policy refused: %v", err)
	}
	for _, c := range []int{99, 600} {
		if err := (behaviors.RetryPolicy{RetryableStatusCodes: []int{c}}).Validate(); err == nil {
			t.Errorf("status code %d accepted", c)
		}
	}
	for code, want := range map[int]bool{399: true, 400: false, 408: true, 429: true, 499: false, 500: true} {
		if got := behaviors.CountsAsFailure(context.Background(), &statusErr{code: code}); got != want {
			t.Errorf("CountsAsFailure(%d) = %v, want %v", code, got, want)
		}
	}
}

// A Retry-After hint equal to MaxDelay is waited for: only a longer one ends the retries.
func TestRetryAfterAtMaxDelayIsWaited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, s, _ := retrying(t, behaviors.RetryConfig{Policy: behaviors.RetryPolicy{MaxAttempts: 2, MaxDelay: 30 * time.Second}},
			&statusErr{code: 503, after: 30 * time.Second})
		start := time.Now()
		if _, err := mediator.Send(context.Background(), m, &Call{}); err != nil || s.calls != 2 || time.Since(start) != 30*time.Second {
			t.Fatalf("%v after %d calls and %s", err, s.calls, time.Since(start))
		}
	})
}

// MaxAttempts caps the attempts whatever a custom BackOff says.
func TestRetryMaxAttemptsCapsACustomBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, s, _ := retrying(t, behaviors.RetryConfig{
			Policy:  behaviors.RetryPolicy{MaxAttempts: 3},
			BackOff: func(behaviors.RetryPolicy) backoff.BackOff { return backoff.NewConstantBackOff(time.Second) },
		}, &statusErr{code: 503}, &statusErr{code: 503}, &statusErr{code: 503}, &statusErr{code: 503})
		_, err := mediator.Send(context.Background(), m, &Call{})
		var re *behaviors.RetryError
		if s.calls != 3 || !errors.As(err, &re) || re.Attempts != 3 {
			t.Fatalf("%d calls: %v", s.calls, err)
		}
	})
}
