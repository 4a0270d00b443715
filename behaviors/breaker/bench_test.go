package breaker_test

import (
	"context"
	"testing"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/mediator"
)

type Ping struct {
	mediator.Returns[*Reply]
}

type benchHandler struct{ reply Reply }

func (h *benchHandler) Handle(context.Context, *Ping) (*Reply, error) { return &h.reply, nil }

var (
	sinkReply *Reply
	sinkAny   any

	// directHandler is a package variable so the compiler cannot devirtualize and inline the
	// baseline's call: the baseline is one real call through the handler interface.
	directHandler mediator.Handler[*Ping, *Reply] = &benchHandler{}
)

// benchNext is the rest of a pipeline that is only the handler.
func benchNext() mediator.Next {
	h := directHandler
	return func(ctx context.Context, req any) (any, error) { return h.Handle(ctx, req.(*Ping)) }
}

// boundBreaker returns the breaker behavior as Build binds it for *Ping.
func boundBreaker(b *testing.B) mediator.Behavior {
	reg := breaker.NewRegistry(breaker.Config{})
	cb, err := breaker.New(reg).Bind(mediator.RequestInfo{
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
		reg := breaker.NewRegistry(breaker.Config{Key: func(any) string { return "https://prices.example" }})
		cb := breaker.New(reg)
		b.ReportAllocs()
		for b.Loop() {
			sinkAny, _ = cb.Handle(ctx, req, next)
		}
	})
	b.Run("keyed/shared", func(b *testing.B) {
		// The same, with a Store attached: the closed path makes no store call.
		reg := breaker.NewRegistry(breaker.Config{Key: func(any) string { return "https://prices.example" }, Store: newMemStore(&stepClock{})})
		cb := breaker.New(reg)
		b.ReportAllocs()
		for b.Loop() {
			sinkAny, _ = cb.Handle(ctx, req, next)
		}
	})
	b.Run("gate", func(b *testing.B) {
		reg := breaker.NewRegistry(breaker.Config{Key: func(any) string { return "https://prices.example" }})
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
