package benchmarks

import (
	"context"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/fallback"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	fstimeout "github.com/failsafe-go/failsafe-go/timeout"
	"github.com/samber/do/v2"
	"github.com/sony/gobreaker/v2"
	"go.uber.org/goleak"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	sbfallback "github.com/switchboard-go/switchboard/behaviors/fallback"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/behaviors/timeout"
	"github.com/switchboard-go/switchboard/mediator"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type resp struct{ N int }

type req struct {
	mediator.Returns[*resp]
}

type handler struct{ r resp }

func (h *handler) Handle(context.Context, *req) (*resp, error) { return &h.r, nil }

var (
	sink    *resp
	errSink error

	// directHandler is a package variable so the compiler cannot devirtualize and inline the
	// baseline's call: the baseline is one real call through the handler interface.
	directHandler mediator.Handler[*req, *resp] = &handler{}
)

// BenchmarkDirectCall is the baseline of every ratio: the handler called through its interface.
func BenchmarkDirectCall(b *testing.B) {
	h := directHandler
	ctx := context.Background()
	q := &req{}
	b.ReportAllocs()
	for b.Loop() {
		sink, errSink = h.Handle(ctx, q)
	}
}

func BenchmarkDirectCallParallel(b *testing.B) {
	h := directHandler
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		q := &req{}
		var r *resp
		for pb.Next() {
			r, _ = h.Handle(ctx, q)
		}
		_ = r
	})
}

// Breaker success path: switchboard's gate against sony/gobreaker's Execute and failsafe-go's
// circuit breaker, each with its defaults.

func BenchmarkBreaker(b *testing.B) {
	h := &handler{}
	ctx := context.Background()
	q := &req{}
	b.Run("switchboard", func(b *testing.B) {
		reg := breaker.NewRegistry(breaker.Config{})
		b.ReportAllocs()
		for b.Loop() {
			p, err := reg.Gate("api")
			if err != nil {
				b.Fatal(err)
			}
			sink, errSink = h.Handle(ctx, q)
			p.Done(ctx, errSink)
		}
	})
	b.Run("gobreaker", func(b *testing.B) {
		cb := gobreaker.NewCircuitBreaker[*resp](gobreaker.Settings{Name: "api"})
		b.ReportAllocs()
		for b.Loop() {
			sink, errSink = cb.Execute(func() (*resp, error) { return h.Handle(ctx, q) })
		}
	})
	b.Run("failsafe-go", func(b *testing.B) {
		ex := failsafe.With[*resp](circuitbreaker.NewWithDefaults[*resp]())
		b.ReportAllocs()
		for b.Loop() {
			sink, errSink = ex.Get(func() (*resp, error) { return h.Handle(ctx, q) })
		}
	})
}

func BenchmarkBreakerParallel(b *testing.B) {
	h := &handler{}
	b.Run("switchboard", func(b *testing.B) {
		reg := breaker.NewRegistry(breaker.Config{})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			q := &req{}
			for pb.Next() {
				p, err := reg.Gate("api")
				if err != nil {
					panic(err)
				}
				_, err = h.Handle(ctx, q)
				p.Done(ctx, err)
			}
		})
	})
	b.Run("gobreaker", func(b *testing.B) {
		cb := gobreaker.NewCircuitBreaker[*resp](gobreaker.Settings{Name: "api"})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			q := &req{}
			for pb.Next() {
				_, _ = cb.Execute(func() (*resp, error) { return h.Handle(ctx, q) })
			}
		})
	})
	b.Run("failsafe-go", func(b *testing.B) {
		ex := failsafe.With[*resp](circuitbreaker.NewWithDefaults[*resp]())
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			q := &req{}
			for pb.Next() {
				_, _ = ex.Get(func() (*resp, error) { return h.Handle(ctx, q) })
			}
		})
	})
}

// Fallback + retry + breaker on the success path: switchboard's pipeline against failsafe-go.
// BenchmarkFallbackRetryBreakerTimeout adds a timeout of each (1 s, never reached) inside.

func BenchmarkFallbackRetryBreaker(b *testing.B) { benchStack(b, 0) }

func BenchmarkFallbackRetryBreakerTimeout(b *testing.B) { benchStack(b, time.Second) }

// benchStack runs the fallback + retry + breaker stack of each system, with a timeout
// innermost when limit is above zero.
func benchStack(b *testing.B, limit time.Duration) {
	ctx := context.Background()
	q := &req{}
	b.Run("switchboard", func(b *testing.B) {
		m := mediator.New(nil, mediator.Config{})
		h := &handler{}
		mediator.Handle[*req, *resp](m, func(do.Injector) (*handler, error) { return h, nil })
		stack := []mediator.Behavior{
			sbfallback.New(func(context.Context, any, error) (*resp, error) { return &resp{}, nil }, sbfallback.Config{}),
			retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3, BaseDelay: time.Millisecond}}),
			breaker.New(breaker.NewRegistry(breaker.Config{})),
		}
		if limit > 0 {
			stack = append(stack, timeout.New(timeout.Config{Duration: limit}))
		}
		for _, bh := range stack {
			m.Use(bh)
		}
		if err := m.Build(); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			sink, errSink = mediator.Send(ctx, m, q)
		}
	})
	b.Run("failsafe-go", func(b *testing.B) {
		h := &handler{}
		policies := []failsafe.Policy[*resp]{
			fallback.NewWithResult[*resp](&resp{}),
			retrypolicy.NewBuilder[*resp]().WithMaxAttempts(3).WithDelay(time.Millisecond).Build(),
			circuitbreaker.NewWithDefaults[*resp](),
		}
		if limit > 0 {
			policies = append(policies, fstimeout.New[*resp](limit))
		}
		ex := failsafe.With[*resp](policies...)
		b.ReportAllocs()
		for b.Loop() {
			sink, errSink = ex.Get(func() (*resp, error) { return h.Handle(ctx, q) })
		}
	})
}

// Correctness, not speed: a caller's cancellation is not a failure of the dependency, so it
// must not open the breaker. switchboard ignores it by default; gobreaker, by default, trips.
func TestCancellationDoesNotTripTheBreaker(t *testing.T) {
	reg := breaker.NewRegistry(breaker.Config{FailureThreshold: 1})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p, err := reg.Gate("api")
	if err != nil {
		t.Fatal(err)
	}
	p.Done(ctx, ctx.Err())
	if _, open := reg.OpenFor("api"); open {
		t.Fatal("switchboard: a cancelled call opened the breaker")
	}

	cb := gobreaker.NewCircuitBreaker[*resp](gobreaker.Settings{
		Name:        "api",
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
	})
	_, _ = cb.Execute(func() (*resp, error) { return nil, context.Canceled })
	// gobreaker counts every error unless IsSuccessful is configured: the same call opens it.
	if cb.State() != gobreaker.StateOpen {
		t.Fatalf("gobreaker after one cancelled call: %s, want open (the comparison is out of date)", cb.State())
	}
}
