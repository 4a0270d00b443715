package benchmarks

import (
	"context"
	"testing"

	retrygo "github.com/avast/retry-go/v4"
	"github.com/cenkalti/backoff/v4"

	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/mediator"
)

// The retry loops of make bench: switchboard's retry behavior beside cenkalti/backoff/v4 and
// avast/retry-go/v4, each allowing 3 attempts with no delay between them, on two paths. On
// success the first attempt returns; on failonce the first attempt fails with an error each
// system retries and the second succeeds. The delay is zero so that the figures are the
// loops' own work (classifying the error, asking the backoff, starting the next attempt), not
// a sleep. Each system is used as its documentation shows: switchboard's behavior built once
// and called with the rest of the pipeline (here only the handler), backoff's BackOff built
// per call (it holds the call's state), retry-go's options built once and passed to every call.

// errTransient is the failure of failonce's first attempt: a value, so failing allocates
// nothing, and retryable under switchboard's default classification (behaviors.Retryable asks
// the error), as any error is under the peers' defaults.
var errTransient error = transientError{}

type transientError struct{}

func (transientError) Error() string   { return "transient failure" }
func (transientError) Retryable() bool { return true }

// flaky is the handler of the retry loops: with failOnce, every odd call fails and every even
// call succeeds, so each op of failonce is one failure and one success.
type flaky struct {
	failOnce bool
	calls    int
	r        resp
}

func (f *flaky) call() (*resp, error) {
	f.calls++
	if f.failOnce && f.calls%2 == 1 {
		return nil, errTransient
	}
	return &f.r, nil
}

// retryAttempts is the attempts each system allows: the first and two retries.
const retryAttempts = 3

func BenchmarkRetryLoop(b *testing.B) {
	for _, path := range []struct {
		name     string
		failOnce bool
	}{{"success", false}, {"failonce", true}} {
		b.Run(path.name, func(b *testing.B) {
			ctx := context.Background()
			q := &req{}
			b.Run("switchboard", func(b *testing.B) {
				f := &flaky{failOnce: path.failOnce}
				rt := retry.New(retry.Config{
					Policy: retry.Policy{MaxAttempts: retryAttempts},
					// The policy's smallest delay is BaseDelay, whose zero means the 500 ms
					// default: a BackOff of zero delays is how a caller asks for none.
					BackOff: func(retry.Policy) backoff.BackOff { return &backoff.ZeroBackOff{} },
				})
				next := mediator.Next(func(context.Context, any) (any, error) { return f.call() })
				b.ReportAllocs()
				for b.Loop() {
					r, err := rt.Handle(ctx, q, next)
					sink, _ = r.(*resp)
					errSink = err
				}
				checkCalls(b, f, path.failOnce)
			})
			b.Run("backoff", func(b *testing.B) {
				f := &flaky{failOnce: path.failOnce}
				b.ReportAllocs()
				for b.Loop() {
					bo := backoff.WithContext(backoff.WithMaxRetries(&backoff.ZeroBackOff{}, retryAttempts-1), ctx)
					sink, errSink = backoff.RetryWithData(f.call, bo)
				}
				checkCalls(b, f, path.failOnce)
			})
			b.Run("retry-go", func(b *testing.B) {
				f := &flaky{failOnce: path.failOnce}
				opts := []retrygo.Option{
					retrygo.Context(ctx), retrygo.Attempts(retryAttempts),
					retrygo.Delay(0), retrygo.DelayType(retrygo.FixedDelay),
				}
				b.ReportAllocs()
				for b.Loop() {
					sink, errSink = retrygo.DoWithData(f.call, opts...)
				}
				checkCalls(b, f, path.failOnce)
			})
		})
	}
}

// checkCalls fails the benchmark when its last op did not succeed, or when failonce did not
// make two attempts per op: the figures would then measure another path.
func checkCalls(b *testing.B, f *flaky, failOnce bool) {
	b.Helper()
	if errSink != nil || sink == nil {
		b.Fatalf("last op: %v, %v; want a response", sink, errSink)
	}
	if failOnce && f.calls%2 != 0 {
		b.Fatalf("%d attempts: not two per op", f.calls)
	}
}
