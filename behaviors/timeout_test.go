package behaviors_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/mediator"
)

// sleeper waits d per call, honouring its context.
func sleeper(d time.Duration, calls *int) func(context.Context, *Call) (*Reply, error) {
	return func(ctx context.Context, q *Call) (*Reply, error) {
		*calls++
		select {
		case <-time.After(d):
			return &Reply{Text: "slow ok"}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func TestTimeoutTypedError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		m := build(t, sleeper(time.Hour, &calls), behaviors.NewTimeout(2*time.Second))
		start := time.Now()
		_, err := mediator.Send(context.Background(), m, &Call{})
		var te *behaviors.TimeoutError
		if !errors.As(err, &te) || te.Duration != 2*time.Second || !errors.Is(err, behaviors.ErrTimeout) ||
			!errors.Is(err, context.DeadlineExceeded) || !behaviors.IsTimeout(err) || time.Since(start) != 2*time.Second {
			t.Fatal(err, time.Since(start))
		}
		// Fast enough: no error.
		m = build(t, sleeper(time.Second, &calls), behaviors.NewTimeout(2*time.Second))
		if r, err := mediator.Send(context.Background(), m, &Call{}); err != nil || r.Text != "slow ok" {
			t.Fatal(r, err)
		}
	})
}

// The caller's own deadline, shorter than the timeout, passes on unchanged.
func TestTimeoutCallerDeadlineUnchanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		m := build(t, sleeper(time.Hour, &calls), behaviors.NewTimeout(time.Minute))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := mediator.Send(ctx, m, &Call{})
		if err != context.DeadlineExceeded || !mediator.IsCallerCancellation(ctx, err) {
			t.Fatal(err)
		}
	})
}

// Inside retry (the default order) the timeout bounds each attempt; outside it bounds the
// whole call.
func TestTimeoutPerAttemptVsTotal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		policy := behaviors.RetryConfig{Policy: behaviors.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Second, RetryOnTimeout: behaviors.On}}

		calls := 0
		m := build(t, sleeper(time.Hour, &calls), behaviors.NewRetry(policy), behaviors.NewTimeout(2*time.Second))
		start := time.Now()
		_, err := mediator.Send(context.Background(), m, &Call{})
		var re *behaviors.RetryError
		if !errors.As(err, &re) || re.Attempts != 3 || !errors.Is(err, behaviors.ErrTimeout) || calls != 3 ||
			time.Since(start) != 3*2*time.Second+2*time.Second {
			t.Fatalf("per attempt: %v, %d calls, %s", err, calls, time.Since(start))
		}

		calls = 0
		m = build(t, sleeper(time.Hour, &calls), behaviors.NewRetry(policy), behaviors.NewTotalTimeout(5*time.Second))
		chain, _ := mediator.Explain[*Call](m)
		if chain[0].Name != "timeout" || chain[1].Name != "retry" {
			t.Fatal(chain)
		}
		start = time.Now()
		_, err = mediator.Send(context.Background(), m, &Call{})
		if !errors.Is(err, behaviors.ErrTimeout) || calls != 1 || time.Since(start) != 5*time.Second {
			t.Fatalf("total: %v, %d calls, %s", err, calls, time.Since(start))
		}
	})
}

// A breaker counts timeouts.
func TestTimeoutCountedByBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := behaviors.NewBreakerRegistry(behaviors.BreakerConfig{FailureThreshold: 2})
		calls := 0
		m := build(t, sleeper(time.Hour, &calls), behaviors.NewTimeout(time.Second), behaviors.NewCircuitBreaker(r, endpointKey))
		for range 2 {
			_, _ = mediator.Send(context.Background(), m, &Call{Endpoint: "t"})
		}
		wantState(t, r, "t", behaviors.StateOpen)
	})
}

func TestTimeoutValidate(t *testing.T) {
	if behaviors.NewTimeout(0).Validate() == nil {
		t.Fatal("zero timeout accepted")
	}
}
