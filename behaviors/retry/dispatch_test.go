package retry_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/behaviors/timeout"
	"github.com/switchboard-go/switchboard/behaviors/validation"
	"github.com/switchboard-go/switchboard/mediator"
)

// The failure that opens the breaker ends the retries at once: the next attempt would be
// refused, so waiting for it wastes a full delay of every request in flight at the trip.
func TestRetryStopsAtTheTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := breaker.NewRegistry(breaker.Config{FailureThreshold: 2})
		s := &script{Results: []error{&statusErr{Code: 503}, &statusErr{Code: 503}, &statusErr{Code: 503}, &statusErr{Code: 503}}}
		m := build(t, s.Handle,
			retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 4, BaseDelay: time.Second}}),
			breaker.New(reg))
		start := time.Now()
		_, err := mediator.Send(context.Background(), m, &Call{})
		if took := time.Since(start); took != time.Second {
			t.Errorf("took %s, want one delay (1s) before the attempt that tripped and none after", took)
		}
		var re *retry.ExhaustedError
		var se *statusErr
		if s.Calls != 2 || !errors.As(err, &re) || re.Attempts != 2 || !errors.Is(err, breaker.ErrTripped) ||
			!errors.As(err, &se) || errors.Is(err, breaker.ErrOpen) {
			t.Fatalf("%d calls, %v", s.Calls, err)
		}
	})
}

// With WaitForBreaker the loop waits out the open time after the trip instead of stopping.
func TestRetryWaitsOutTheTripWhenAsked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := breaker.NewRegistry(breaker.Config{FailureThreshold: 1, OpenDuration: 5 * time.Second})
		s := &script{Results: []error{&statusErr{Code: 503}}}
		m := build(t, s.Handle,
			retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 2, BaseDelay: time.Second, WaitForBreaker: behaviors.On}}),
			breaker.New(reg))
		start := time.Now()
		r, err := mediator.Send(context.Background(), m, &Call{})
		if err != nil || r.Text != "ok " || s.Calls != 2 || time.Since(start) != 5*time.Second {
			t.Fatalf("%v %v after %d calls and %s", r, err, s.Calls, time.Since(start))
		}
	})
}

// A Retry-After hint above MaxDelay ends the retries with a RetryError that says so, instead of
// returning the raw error as if the policy had allowed one attempt.
func TestRetryAfterAboveMaxDelaySaysSo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hinted := &statusErr{Code: 503, After: 2 * time.Minute}
		m, s, _ := retrying(t, retry.Config{Policy: retry.Policy{MaxAttempts: 5, MaxDelay: 30 * time.Second}}, hinted)
		_, err := mediator.Send(context.Background(), m, &Call{})
		var re *retry.ExhaustedError
		if s.Calls != 1 || !errors.As(err, &re) || re.Hint != 2*time.Minute || re.MaxDelay != 30*time.Second ||
			re.RetryAfter() != 2*time.Minute || !errors.Is(err, hinted) {
			t.Fatalf("%d calls: %v", s.Calls, err)
		}
		want := "retry: failed after 1 attempt (retries stopped: the server asked to wait 2m0s, more than MaxDelay 30s): status 503"
		if err.Error() != want {
			t.Fatalf("message %q", err.Error())
		}
		// A hint the policy can honour is waited for.
		m, s, _ = retrying(t, retry.Config{Policy: retry.Policy{MaxAttempts: 2, MaxDelay: 30 * time.Second}},
			&statusErr{Code: 503, After: 20 * time.Second})
		start := time.Now()
		if _, err := mediator.Send(context.Background(), m, &Call{}); err != nil || s.Calls != 2 || time.Since(start) != 20*time.Second {
			t.Fatalf("%v after %d calls and %s", err, s.Calls, time.Since(start))
		}
	})
}

func TestRetryPolicyRetries(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	timeout := &timeout.ExceededError{Duration: time.Second, Err: context.DeadlineExceeded}
	cases := []struct {
		name string
		p    retry.Policy
		err  error
		want bool
	}{
		{"default 503", retry.Policy{}, &statusErr{Code: 503}, true},
		{"default 500", retry.Policy{}, &statusErr{Code: 500}, false},
		{"widened 500", retry.Policy{RetryableStatusCodes: []int{500}}, &statusErr{Code: 500}, true},
		{"narrowed 503", retry.Policy{RetryableStatusCodes: []int{}}, &statusErr{Code: 503}, false},
		{"timeout off", retry.Policy{}, timeout, false},
		{"timeout on", retry.Policy{RetryOnTimeout: behaviors.On}, timeout, true},
		{"transport off", retry.Policy{}, refused, false},
		{"transport on", retry.Policy{RetryOnTransport: behaviors.On}, refused, true},
		{"cancel never", retry.Policy{RetryOnTransport: behaviors.On, Classifier: func(error) bool { return true }}, context.Canceled, false},
		{"validation never", retry.Policy{Classifier: func(error) bool { return true }}, &validation.Error{Err: errBoom}, false},
		{"open", retry.Policy{}, &breaker.OpenError{}, false},
		{"open, waiting", retry.Policy{WaitForBreaker: behaviors.On}, &breaker.OpenError{}, true},
		{"classify", retry.Policy{Classifier: func(err error) bool { return err == errBoom }}, errBoom, true},
		{"tripped 503", retry.Policy{}, &breaker.TrippedError{Err: &statusErr{Code: 503}}, true},
		{"nil", retry.Policy{}, nil, false},
	}
	for _, c := range cases {
		if got := c.p.Retries(c.err); got != c.want {
			t.Errorf("%s: Retries(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// The hint a RetryError or a CircuitTrippedError reports is the longest one it knows: a
// server's Retry-After behind them is not hidden by their own zero hint or shorter open time.
func TestWrappedHintsAreKept(t *testing.T) {
	inner := &statusErr{Code: 503, After: 3 * time.Second}
	if got := (&retry.ExhaustedError{Attempts: 2, Err: inner}).RetryAfter(); got != 3*time.Second {
		t.Errorf("RetryError over a 3s hint: %v", got)
	}
	tripped := &breaker.TrippedError{Key: "k", Remaining: 30 * time.Second, Err: &statusErr{Code: 503, After: time.Minute}}
	if got := tripped.RetryAfter(); got != time.Minute {
		t.Errorf("tripped 30s over a 1m hint: %v", got)
	}
	if got := (&retry.ExhaustedError{Attempts: 2, Err: tripped}).RetryAfter(); got != time.Minute {
		t.Errorf("RetryError over a tripped breaker: %v", got)
	}
}

func TestRetryPolicyRejectsImpossibleStatusCodes(t *testing.T) {
	err := retry.Policy{RetryableStatusCodes: []int{503, 0, 999}}.Validate()
	if err == nil || !strings.Contains(err.Error(), "0 is not an HTTP-like status code") || !strings.Contains(err.Error(), "999") {
		t.Fatalf("Validate: %v", err)
	}
}

// Boundaries of the validation rules.
func TestPolicyAndClassifierBoundaries(t *testing.T) {
	if err := (retry.Policy{RetryableStatusCodes: []int{100, 599}, Jitter: behaviors.Off, RetryOnTimeout: behaviors.On}).Validate(); err != nil {
		t.Errorf("valid policy refused: %v", err)
	}
	for _, c := range []int{99, 600} {
		if err := (retry.Policy{RetryableStatusCodes: []int{c}}).Validate(); err == nil {
			t.Errorf("status code %d accepted", c)
		}
	}
	// The breaker's classification boundaries are tested beside it (TestBreakerClassifier).
}

// A Retry-After hint equal to MaxDelay is waited for: only a longer one ends the retries.
func TestRetryAfterAtMaxDelayIsWaited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, s, _ := retrying(t, retry.Config{Policy: retry.Policy{MaxAttempts: 2, MaxDelay: 30 * time.Second}},
			&statusErr{Code: 503, After: 30 * time.Second})
		start := time.Now()
		if _, err := mediator.Send(context.Background(), m, &Call{}); err != nil || s.Calls != 2 || time.Since(start) != 30*time.Second {
			t.Fatalf("%v after %d calls and %s", err, s.Calls, time.Since(start))
		}
	})
}

// MaxAttempts caps the attempts whatever a custom BackOff says.
func TestRetryMaxAttemptsCapsACustomBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, s, _ := retrying(t, retry.Config{
			Policy:  retry.Policy{MaxAttempts: 3},
			BackOff: func(retry.Policy) backoff.BackOff { return backoff.NewConstantBackOff(time.Second) },
		}, &statusErr{Code: 503}, &statusErr{Code: 503}, &statusErr{Code: 503}, &statusErr{Code: 503})
		_, err := mediator.Send(context.Background(), m, &Call{})
		var re *retry.ExhaustedError
		if s.Calls != 3 || !errors.As(err, &re) || re.Attempts != 3 {
			t.Fatalf("%d calls: %v", s.Calls, err)
		}
	})
}
