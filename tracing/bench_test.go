package tracing_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/switchboard-go/switchboard/mediator"
	"github.com/switchboard-go/switchboard/tracing"
)

// The success path of one dispatch: without the tracing behavior, with it under a no-op provider,
// with sampling off (the SDK's NeverSample) and with every span sampled and recorded in memory.
func BenchmarkSuccessPath(b *testing.B) {
	handler := func(context.Context, *Charge) (*Receipt, error) { return nil, nil }
	never := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	always := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b.Cleanup(func() {
		_ = never.Shutdown(context.Background())
		_ = always.Shutdown(context.Background())
	})
	cases := []struct {
		name string
		bs   []mediator.Behavior
	}{
		{"untraced", nil},
		{"noop-provider", []mediator.Behavior{tracing.New(tracing.Config{TracerProvider: noop.NewTracerProvider()})}},
		{"never-sampled", []mediator.Behavior{tracing.New(tracing.Config{TracerProvider: never})}},
		{"sampled", []mediator.Behavior{tracing.New(tracing.Config{TracerProvider: always})}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			m := build(b, handler, c.bs...)
			req, ctx := &Charge{}, context.Background()
			b.ReportAllocs()
			for b.Loop() {
				_, _ = mediator.Send(ctx, m, req)
			}
		})
	}
	b.Run("bare-start-never-sampled", func(b *testing.B) {
		tracer, ctx := never.Tracer("bare"), context.Background()
		b.ReportAllocs()
		for b.Loop() {
			_, s := tracer.Start(ctx, "x")
			s.End()
		}
	})
}
