package timeout_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/behaviors/timeout"
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
		m := build(t, sleeper(time.Hour, &calls), timeout.New(timeout.Config{Duration: 2 * time.Second}))
		start := time.Now()
		_, err := mediator.Send(context.Background(), m, &Call{})
		var te *timeout.ExceededError
		if !errors.As(err, &te) || te.Duration != 2*time.Second || !errors.Is(err, timeout.ErrExceeded) ||
			!errors.Is(err, context.DeadlineExceeded) || !behaviors.IsTimeout(err) || time.Since(start) != 2*time.Second {
			t.Fatal(err, time.Since(start))
		}
		// Fast enough: no error.
		m = build(t, sleeper(time.Second, &calls), timeout.New(timeout.Config{Duration: 2 * time.Second}))
		if r, err := mediator.Send(context.Background(), m, &Call{}); err != nil || r.Text != "slow ok" {
			t.Fatal(r, err)
		}
	})
}

// The caller's own deadline, shorter than the timeout, passes on unchanged.
func TestTimeoutCallerDeadlineUnchanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		m := build(t, sleeper(time.Hour, &calls), timeout.New(timeout.Config{Duration: time.Minute}))
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
		policy := retry.Config{Policy: retry.Policy{MaxAttempts: 3, BaseDelay: time.Second, RetryOnTimeout: behaviors.On}}

		calls := 0
		m := build(t, sleeper(time.Hour, &calls), retry.New(policy), timeout.New(timeout.Config{Duration: 2 * time.Second}))
		start := time.Now()
		_, err := mediator.Send(context.Background(), m, &Call{})
		var re *retry.ExhaustedError
		if !errors.As(err, &re) || re.Attempts != 3 || !errors.Is(err, timeout.ErrExceeded) || calls != 3 ||
			time.Since(start) != 3*2*time.Second+2*time.Second {
			t.Fatalf("per attempt: %v, %d calls, %s", err, calls, time.Since(start))
		}

		calls = 0
		m = build(t, sleeper(time.Hour, &calls), retry.New(policy), timeout.New(timeout.Config{Duration: 5 * time.Second, Total: true}))
		chain, _ := mediator.Explain[*Call](m)
		if chain[0].Name != "timeout" || chain[1].Name != "retry" {
			t.Fatal(chain)
		}
		start = time.Now()
		_, err = mediator.Send(context.Background(), m, &Call{})
		if !errors.Is(err, timeout.ErrExceeded) || calls != 1 || time.Since(start) != 5*time.Second {
			t.Fatalf("total: %v, %d calls, %s", err, calls, time.Since(start))
		}
	})
}

// A breaker counts timeouts.
func TestTimeoutCountedByBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := breaker.NewRegistry(breaker.Config{Key: endpointKey, FailureThreshold: 2})
		calls := 0
		m := build(t, sleeper(time.Hour, &calls), timeout.New(timeout.Config{Duration: time.Second}), breaker.New(r))
		for range 2 {
			_, _ = mediator.Send(context.Background(), m, &Call{Endpoint: "t"})
		}
		wantState(t, r, "t", breaker.StateOpen)
	})
}

func TestTimeoutValidate(t *testing.T) {
	if timeout.New(timeout.Config{Duration: 0}).Validate() == nil {
		t.Fatal("zero timeout accepted")
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
