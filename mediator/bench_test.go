package mediator_test

import (
	"context"
	"iter"
	"testing"

	"github.com/samber/do/v2"

	"github.com/switchboard-go/switchboard/mediator"
)

type benchResp struct{ N int }

type benchReq struct {
	mediator.Returns[*benchResp]
	N int
}

type benchHandler struct{ resp benchResp }

func (h *benchHandler) Handle(_ context.Context, q *benchReq) (*benchResp, error) {
	return &h.resp, nil
}

type passThrough struct{}

func (passThrough) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	return next(ctx, req)
}

type benchEvent struct{ N int }

type benchStream struct {
	mediator.Yields[*benchResp]
}

var benchItems = []*benchResp{{1}, {2}, {3}}

func benchStreamSeq(context.Context, *benchStream) iter.Seq2[*benchResp, error] {
	return func(yield func(*benchResp, error) bool) {
		for _, it := range benchItems {
			if !yield(it, nil) {
				return
			}
		}
	}
}

// newBenchMediator builds a mediator with the bench handlers and n pass-through behaviors.
func newBenchMediator(tb testing.TB, behaviors int) *mediator.Mediator {
	tb.Helper()
	m := mediator.New(nil, mediator.Config{})
	h := &benchHandler{}
	mediator.Handle[*benchReq, *benchResp](m, func(do.Injector) (*benchHandler, error) { return h, nil })
	for range behaviors {
		m.Use(passThrough{})
	}
	for range 3 {
		mediator.SubscribeFunc(m, func(context.Context, *benchEvent) error { return nil })
	}
	mediator.HandleStreamFunc(m, benchStreamSeq)
	if err := m.Build(); err != nil {
		tb.Fatal(err)
	}
	return m
}

var (
	sinkResp *benchResp

	// directHandler is a package variable so the compiler cannot devirtualize and inline the
	// baseline's call: the baseline is one real call through the handler interface.
	directHandler mediator.Handler[*benchReq, *benchResp] = &benchHandler{}
)

// BenchmarkDirectCall is the baseline: the handler called through its interface.
func BenchmarkDirectCall(b *testing.B) {
	h := directHandler
	ctx := context.Background()
	req := &benchReq{}
	b.ReportAllocs()
	for b.Loop() {
		sinkResp, _ = h.Handle(ctx, req)
	}
}

// BenchmarkDirectCallRecover is the direct call guarded the way every dispatch is: a deferred
// recover, so a handler panic cannot crash the process. It shows what that guard alone costs.
func BenchmarkDirectCallRecover(b *testing.B) {
	h := directHandler
	ctx := context.Background()
	req := &benchReq{}
	b.ReportAllocs()
	for b.Loop() {
		sinkResp, _ = guardedCall(ctx, h, req)
	}
}

func guardedCall(ctx context.Context, h mediator.Handler[*benchReq, *benchResp], req *benchReq) (resp *benchResp, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = mediator.NewPanicError(p)
		}
	}()
	return h.Handle(ctx, req)
}

func BenchmarkSend(b *testing.B) {
	for _, n := range []int{0, 3} {
		m := newBenchMediator(b, n)
		ctx := context.Background()
		req := &benchReq{}
		b.Run(behaviorsName(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sinkResp, _ = mediator.Send(ctx, m, req)
			}
		})
		s, err := mediator.SenderFor[*benchReq, *benchResp](m)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("typed/"+behaviorsName(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sinkResp, _ = s.Send(ctx, req)
			}
		})
	}
}

func behaviorsName(n int) string {
	return map[int]string{0: "behaviors=0", 3: "behaviors=3"}[n]
}

// BenchmarkPublishDirect is the baseline for Publish: three handlers called in a loop.
func BenchmarkPublishDirect(b *testing.B) {
	hs := []mediator.NotificationHandler[*benchEvent]{}
	for range 3 {
		hs = append(hs, mediator.NotificationHandlerFunc[*benchEvent](func(context.Context, *benchEvent) error { return nil }))
	}
	ctx := context.Background()
	ev := &benchEvent{}
	b.ReportAllocs()
	for b.Loop() {
		for _, h := range hs {
			if err := h.Handle(ctx, ev); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkPublish(b *testing.B) {
	m := newBenchMediator(b, 0)
	ctx := context.Background()
	ev := &benchEvent{}
	b.ReportAllocs()
	for b.Loop() {
		if err := mediator.Publish(ctx, m, ev); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStreamDirect is the baseline for Stream: the handler's sequence ranged directly.
func BenchmarkStreamDirect(b *testing.B) {
	ctx := context.Background()
	req := &benchStream{}
	b.ReportAllocs()
	for b.Loop() {
		for it, err := range benchStreamSeq(ctx, req) {
			if err != nil {
				b.Fatal(err)
			}
			sinkResp = it
		}
	}
}

// benchStreamVar holds the baseline's handler where the compiler cannot see it, as a mediator
// holds every handler.
var benchStreamVar = benchStreamSeq

// BenchmarkStreamOpaque is the floor of any dispatch of a stream: the handler's sequence ranged
// through a variable. The compiler can no longer inline the loop body into the sequence, so
// the body and its state are allocated (2 allocations); Stream adds one, the yield function
// that is the stream's own.
func BenchmarkStreamOpaque(b *testing.B) {
	ctx := context.Background()
	req := &benchStream{}
	b.ReportAllocs()
	for b.Loop() {
		for it, err := range benchStreamVar(ctx, req) {
			if err != nil {
				b.Fatal(err)
			}
			sinkResp = it
		}
	}
}

func BenchmarkStream(b *testing.B) {
	m := newBenchMediator(b, 0)
	ctx := context.Background()
	req := &benchStream{}
	b.ReportAllocs()
	for b.Loop() {
		for it, err := range mediator.Stream(ctx, m, req) {
			if err != nil {
				b.Fatal(err)
			}
			sinkResp = it
		}
	}
}
