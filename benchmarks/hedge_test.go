package benchmarks

import (
	"context"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"
	"github.com/samber/do/v2"

	"github.com/switchboard-go/switchboard/behaviors/hedge"
	"github.com/switchboard-go/switchboard/mediator"
)

// Hedging's success path: a call that ends long before the hedge delay. switchboard's
// behavior called with the rest of the pipeline as next, against failsafe-go's hedge policy
// executing the same function; and the behavior in a built pipeline, through Send.

func BenchmarkHedge(b *testing.B) {
	ctx := context.Background()
	q := &req{}
	h := &handler{}
	b.Run("switchboard", func(b *testing.B) {
		hb := hedge.New(hedge.Config{Delay: time.Second})
		next := func(ctx context.Context, r any) (any, error) { return h.Handle(ctx, r.(*req)) }
		b.ReportAllocs()
		for b.Loop() {
			v, err := hb.Handle(ctx, q, next)
			sink, errSink = v.(*resp), err
		}
	})
	b.Run("switchboard-percentile", func(b *testing.B) {
		hb := hedge.New(hedge.Config{Delay: time.Second, Percentile: 95})
		next := func(ctx context.Context, r any) (any, error) { return h.Handle(ctx, r.(*req)) }
		b.ReportAllocs()
		for b.Loop() {
			v, err := hb.Handle(ctx, q, next)
			sink, errSink = v.(*resp), err
		}
	})
	b.Run("switchboard-send", func(b *testing.B) {
		m := mediator.New(nil, mediator.Config{})
		mediator.Handle[*req, *resp](m, func(do.Injector) (*handler, error) { return h, nil })
		m.Use(hedge.New(hedge.Config{Delay: time.Second}))
		if err := m.Build(); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			sink, errSink = mediator.Send(ctx, m, q)
		}
	})
	b.Run("failsafe-go", func(b *testing.B) {
		hp := hedgepolicy.NewWithDelay[*resp](time.Second)
		ex := failsafe.With[*resp](hp)
		b.ReportAllocs()
		for b.Loop() {
			sink, errSink = ex.Get(func() (*resp, error) { return h.Handle(ctx, q) })
		}
	})
	b.Run("failsafe-go-quantile", func(b *testing.B) {
		hp := hedgepolicy.NewWithDelayQuantile[*resp](0.95, 1000, 100)
		ex := failsafe.With[*resp](hp)
		b.ReportAllocs()
		for b.Loop() {
			sink, errSink = ex.Get(func() (*resp, error) { return h.Handle(ctx, q) })
		}
	})
}

func BenchmarkHedgeParallel(b *testing.B) {
	h := &handler{}
	b.Run("switchboard", func(b *testing.B) {
		hb := hedge.New(hedge.Config{Delay: time.Second})
		next := func(ctx context.Context, r any) (any, error) { return h.Handle(ctx, r.(*req)) }
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			ctx, q := context.Background(), &req{}
			for pb.Next() {
				_, _ = hb.Handle(ctx, q, next)
			}
		})
	})
	b.Run("failsafe-go", func(b *testing.B) {
		ex := failsafe.With[*resp](hedgepolicy.NewWithDelay[*resp](time.Second))
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			ctx, q := context.Background(), &req{}
			for pb.Next() {
				_, _ = ex.Get(func() (*resp, error) { return h.Handle(ctx, q) })
			}
		})
	})
}
