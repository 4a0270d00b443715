package behaviors_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/fallback"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/behaviors/timeout"
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

// benchNext is the rest of a pipeline that is only the handler.
func benchNext() mediator.Next {
	h := directHandler
	return func(ctx context.Context, req any) (any, error) { return h.Handle(ctx, req.(*Ping)) }
}

// BenchmarkDirectCall is the baseline: the handler called through its interface.
func BenchmarkDirectCall(b *testing.B) {
	h := directHandler
	ctx, req := context.Background(), &Ping{}
	b.ReportAllocs()
	for b.Loop() {
		sinkReply, _ = h.Handle(ctx, req)
	}
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

func benchMediator(b *testing.B, bs ...mediator.Behavior) *mediator.TypedSender[*Ping, *Reply] {
	m := mediator.New(nil, mediator.Config{})
	h := &benchHandler{}
	mediator.HandleFunc(m, h.Handle)
	for _, x := range bs {
		m.Use(x)
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
	stack := func(withTimeout bool) []mediator.Behavior {
		bs := []mediator.Behavior{
			fallback.NewFor(func(context.Context, *Ping, error) (*Reply, error) { return &Reply{}, nil }, fallback.Config{}),
			retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3}}),
			breaker.New(breaker.NewRegistry(breaker.Config{})),
		}
		if withTimeout {
			bs = append(bs, timeout.New(timeout.Config{Duration: time.Second}))
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
