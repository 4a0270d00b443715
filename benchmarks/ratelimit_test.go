package benchmarks

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/ratelimiter"
	"github.com/samber/do/v2"

	"github.com/switchboard-go/switchboard/behaviors/ratelimit"
	"github.com/switchboard-go/switchboard/mediator"
)

// Rate limiter success path: a limit of one permit a nanosecond, which a call never waits for,
// in both libraries a smooth limiter (switchboard's GCRA with a burst of 1, failsafe-go's
// smooth limiter of a nanosecond's rate).

func BenchmarkRateLimiter(b *testing.B) {
	h := &handler{}
	ctx := context.Background()
	q := &req{}
	b.Run("switchboard", func(b *testing.B) {
		rl := ratelimit.New(ratelimit.Config{Rate: 1e9})
		bh, err := rl.Bind(mediator.RequestInfo{Request: reflect.TypeFor[*req]()})
		if err != nil {
			b.Fatal(err)
		}
		next := func(ctx context.Context, _ any) (any, error) { return h.Handle(ctx, q) }
		b.ReportAllocs()
		for b.Loop() {
			_, errSink = bh.Handle(ctx, q, next)
		}
		if errSink != nil {
			b.Fatal(errSink)
		}
	})
	b.Run("failsafe-go", func(b *testing.B) {
		rl := ratelimiter.NewSmoothWithMaxRate[*resp](time.Nanosecond)
		b.ReportAllocs()
		for b.Loop() {
			if !rl.TryAcquirePermit() {
				b.Fatal("no permit")
			}
			sink, errSink = h.Handle(ctx, q)
		}
	})
}

// The same through each library's pipeline: Send with the rate limiter against failsafe-go's
// executor with its rate limiter.
func BenchmarkRateLimiterPipeline(b *testing.B) {
	ctx := context.Background()
	q := &req{}
	b.Run("switchboard", func(b *testing.B) {
		m := mediator.New(nil, mediator.Config{})
		h := &handler{}
		mediator.Handle[*req, *resp](m, func(do.Injector) (*handler, error) { return h, nil })
		m.Use(ratelimit.New(ratelimit.Config{Rate: 1e9}))
		if err := m.Build(); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			sink, errSink = mediator.Send(ctx, m, q)
		}
		if errSink != nil {
			b.Fatal(errSink)
		}
	})
	b.Run("failsafe-go", func(b *testing.B) {
		h := &handler{}
		ex := failsafe.With[*resp](ratelimiter.NewSmoothWithMaxRate[*resp](time.Nanosecond))
		b.ReportAllocs()
		for b.Loop() {
			sink, errSink = ex.Get(func() (*resp, error) { return h.Handle(ctx, q) })
		}
		if errSink != nil {
			b.Fatal(errSink)
		}
	})
}
