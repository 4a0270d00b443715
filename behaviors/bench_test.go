package behaviors_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/mediator"
)

type benchHandler struct{ reply Reply }

func (h *benchHandler) Handle(context.Context, *Ping) (*Reply, error) { return &h.reply, nil }

var (
	sinkReply *Reply
	sinkAny   any

	// directHandler is a package variable so the compiler cannot devirtualize and inline the
	// baseline's call: the baseline is one real call through the handler interface.
	directHandler mediator.Handler[*Ping, *Reply] = &benchHandler{}
)

// BenchmarkDirectCall is the baseline: the handler called through its interface.
func BenchmarkDirectCall(b *testing.B) {
	h := directHandler
	ctx, req := context.Background(), &Ping{}
	b.ReportAllocs()
	for b.Loop() {
		sinkReply, _ = h.Handle(ctx, req)
	}
}

// benchNext is the rest of a pipeline that is only the handler.
func benchNext() mediator.Next {
	h := directHandler
	return func(ctx context.Context, req any) (any, error) { return h.Handle(ctx, req.(*Ping)) }
}

// boundBreaker returns the breaker behavior as Build binds it for *Ping.
func boundBreaker(b *testing.B) mediator.Behavior {
	reg := behaviors.NewBreakerRegistry(behaviors.BreakerConfig{})
	cb, err := behaviors.NewCircuitBreaker(reg, nil).Bind(mediator.RequestInfo{
		Request: typeOf[*Ping](), Response: typeOf[*Reply](),
	})
	if err != nil {
		b.Fatal(err)
	}
	return cb
}

// BenchmarkBreaker is the closed-path success of the breaker behavior around the handler:
// bound to the request type, keyed by a key function, and the registry's Gate/Done.
func BenchmarkBreaker(b *testing.B) {
	ctx, req, next := context.Background(), &Ping{}, benchNext()
	b.Run("type", func(b *testing.B) {
		cb := boundBreaker(b)
		b.ReportAllocs()
		for b.Loop() {
			sinkAny, _ = cb.Handle(ctx, req, next)
		}
	})
	b.Run("keyed", func(b *testing.B) {
		reg := behaviors.NewBreakerRegistry(behaviors.BreakerConfig{})
		cb := behaviors.NewCircuitBreaker(reg, func(any) string { return "https://prices.example" })
		b.ReportAllocs()
		for b.Loop() {
			sinkAny, _ = cb.Handle(ctx, req, next)
		}
	})
	b.Run("gate", func(b *testing.B) {
		reg := behaviors.NewBreakerRegistry(behaviors.BreakerConfig{})
		h := &benchHandler{}
		b.ReportAllocs()
		for b.Loop() {
			p, err := reg.Gate("https://prices.example")
			if err == nil {
				sinkReply, err = h.Handle(ctx, req)
				p.Done(ctx, err)
			}
		}
	})
}

// BenchmarkBreakerParallel is BenchmarkBreaker/type from every P at once: one breaker shared
// by all goroutines. Run with -cpu 1,2 to see it scale.
func BenchmarkBreakerParallel(b *testing.B) {
	ctx, req, next := context.Background(), &Ping{}, benchNext()
	cb := boundBreaker(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var r any
		for pb.Next() {
			r, _ = cb.Handle(ctx, req, next)
		}
		_ = r
	})
}

// BenchmarkDirectCallParallel is the parallel baseline.
func BenchmarkDirectCallParallel(b *testing.B) {
	h := directHandler
	ctx, req := context.Background(), &Ping{}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var r *Reply
		for pb.Next() {
			r, _ = h.Handle(ctx, req)
		}
		_ = r
	})
}

// BenchmarkRetry is the success path of the retry behavior around the handler.
func BenchmarkRetry(b *testing.B) {
	ctx, req, next := context.Background(), &Ping{}, benchNext()
	rt := behaviors.NewRetry(behaviors.RetryConfig{Policy: behaviors.RetryPolicy{MaxAttempts: 3, Strategy: behaviors.StrategyExponential}})
	b.ReportAllocs()
	for b.Loop() {
		sinkAny, _ = rt.Handle(ctx, req, next)
	}
}

func benchMediator(b *testing.B, bs ...mediator.Behavior) *mediator.TypedSender[*Ping, *Reply] {
	m := mediator.New(nil)
	h := &benchHandler{}
	_ = mediator.HandleFunc(m, h.Handle)
	for _, x := range bs {
		_ = m.Use(x)
	}
	if err := m.Build(); err != nil {
		b.Fatal(err)
	}
	s, err := mediator.SenderFor[*Ping](m)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkSend is the success path through a built mediator: no behaviors, the
// fallback+retry+breaker stack, and that stack with a per-attempt timeout.
func BenchmarkSend(b *testing.B) {
	ctx, req := context.Background(), &Ping{}
	stack := func(timeout bool) []mediator.Behavior {
		bs := []mediator.Behavior{
			behaviors.NewFallbackFor(func(context.Context, *Ping, error) (*Reply, error) { return &Reply{}, nil }),
			behaviors.NewRetry(behaviors.RetryConfig{Policy: behaviors.RetryPolicy{MaxAttempts: 3}}),
			behaviors.NewCircuitBreaker(behaviors.NewBreakerRegistry(behaviors.BreakerConfig{}), nil),
		}
		if timeout {
			bs = append(bs, behaviors.NewTimeout(time.Second))
		}
		return bs
	}
	for _, bc := range []struct {
		name string
		bs   []mediator.Behavior
	}{
		{"none", nil},
		{"fallback+retry+breaker", stack(false)},
		{"fallback+retry+breaker+timeout", stack(true)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := benchMediator(b, bc.bs...)
			b.ReportAllocs()
			for b.Loop() {
				sinkReply, _ = s.Send(ctx, req)
			}
		})
	}
}

// BenchmarkTimeout is the timeout behavior around the handler; BenchmarkContextWithTimeout
// is its baseline, a bare context.WithTimeout and cancel around the same call.
func BenchmarkTimeout(b *testing.B) {
	ctx, req, next := context.Background(), &Ping{}, benchNext()
	t := behaviors.NewTimeout(time.Second)
	b.ReportAllocs()
	for b.Loop() {
		sinkAny, _ = t.Handle(ctx, req, next)
	}
}

func BenchmarkContextWithTimeout(b *testing.B) {
	ctx, req, next := context.Background(), &Ping{}, benchNext()
	b.ReportAllocs()
	for b.Loop() {
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		sinkAny, _ = next(tctx, req)
		cancel()
	}
}
