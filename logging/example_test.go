package logging_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
	"go.uber.org/zap/zapcore"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/logging"
	"github.com/switchboard-go/switchboard/mediator"
)

// An application that logs with log/slog gives switchboard a zap logger and slog a handler
// over the same zap core (zapslog, from go.uber.org/zap/exp), so both write one stream with one
// configuration.
func Example_slog() {
	defer slog.SetDefault(slog.Default())                        // (the example restores the default it replaces)
	logger := zap.NewExample()                                   // the application's zap logger (JSON to stdout here)
	slog.SetDefault(slog.New(zapslog.NewHandler(logger.Core()))) // the application's slog calls go to the same core

	m := mediator.New(nil, mediator.Config{Logger: logger}) // the library logs to zap
	m.Use(logging.New(logging.Config{Logger: logger}))
	mediator.SubscribeFunc(m, func(context.Context, *Shipped) error { return errors.New("mailer down") })
	if err := m.Build(); err != nil {
		panic(err)
	}
	slog.Info("order shipped", "order", 7)
	_ = mediator.PublishWith(context.Background(), m, &Shipped{Order: 7}, mediator.FireAndForget)
	_ = m.Close()
	// Output:
	// {"level":"info","msg":"order shipped","order":7}
	// {"level":"error","msg":"mediator: notification handler failed","notification":"*logging_test.Shipped","error":"mailer down"}
}

// Shipped is a notification.
type Shipped struct{ Order int }

// Every entry gets the fields of Config.Fields (an event id here, from the context, so that the
// requests the handler sends have it too) and, when a span is active, its trace and span ids.
func ExampleConfig_fields() {
	logger := zap.NewExample(zap.WrapCore(withoutDuration)) // (durations vary: the example leaves them out)
	eventID := mediator.NewContextKey[string]("event")
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *Notify) (mediator.Void, error) { return mediator.Void{}, nil })
	m.Use(logging.New(logging.Config{Logger: logger, Fields: []func(context.Context, any) []zap.Field{
		func(ctx context.Context, _ any) []zap.Field {
			return []zap.Field{zap.String("event_id", eventID.GetOr(ctx, "-"))}
		},
	}}))
	if err := m.Build(); err != nil {
		panic(err)
	}
	span := trace.NewSpanContext(trace.SpanContextConfig{ // as a tracer's Start would put it on the context
		TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:  trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
	})
	ctx := trace.ContextWithSpanContext(eventID.With(context.Background(), "evt-42"), span)
	_, _ = mediator.Send(ctx, m, &Notify{})
	// Output:
	// {"level":"debug","msg":"switchboard: request handled","request":"logging_test.Notify","attempt":1,"outcome":"succeeded","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"00f067aa0ba902b7","event_id":"evt-42"}
}

// A request a handler sends while its own request is in flight is an inner request: when the
// outer request succeeds (here the handler falls back on a cached rate) or is deferred, the
// inner failure is written at Config.Inner (debug), after the outer outcome is known, and
// names it; the outer request's entry is the one line at its own level. Had the outer request
// failed, the inner entry would keep its level (error), since it explains the failure.
func ExampleConfig_inner() {
	logger := zap.NewExample(zap.WrapCore(withoutDuration))
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *Rate) (float64, error) { return 0, errors.New("rates service down") })
	mediator.HandleFunc(m, func(ctx context.Context, n *Notify) (mediator.Void, error) {
		if _, err := mediator.Send(ctx, m, &Rate{}); err != nil {
			n.Rate = 1.1 // the cached rate
		}
		return mediator.Void{}, nil
	})
	m.Use(logging.New(logging.Config{Logger: logger, Success: zap.NewAtomicLevelAt(zap.InfoLevel)}))
	if err := m.Build(); err != nil {
		panic(err)
	}
	_, _ = mediator.Send(context.Background(), m, &Notify{})
	// Output:
	// {"level":"debug","msg":"switchboard: request failed","request":"logging_test.Rate","attempt":1,"outcome":"failed","error":"rates service down","outer_outcome":"succeeded"}
	// {"level":"info","msg":"switchboard: request handled","request":"logging_test.Notify","attempt":1,"outcome":"succeeded"}
}

// A refusal by the request's own open breaker is written at Config.Refusal (warn), once per
// breaker key every Config.RefusalEvery; the next entry of the key counts the refusals held
// back in suppressed.
func ExampleConfig_refusal() {
	logger := zap.NewExample(zap.WrapCore(withoutDuration))
	clock := &stoppedClock{now: time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)}
	reg := breaker.NewRegistry(breaker.Config{FailureThreshold: 1, OpenDuration: time.Hour, Clock: clock})
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *Rate) (float64, error) { return 0, errors.New("rates service down") })
	m.Use(breaker.New(reg))
	m.Use(logging.New(logging.Config{Logger: logger, Clock: clock, RefusalEvery: time.Minute}))
	if err := m.Build(); err != nil {
		panic(err)
	}
	for range 4 { // the first trips the breaker, which refuses the other three
		_, _ = mediator.Send(context.Background(), m, &Rate{})
	}
	clock.now = clock.now.Add(time.Minute)
	_, _ = mediator.Send(context.Background(), m, &Rate{})
	// Output:
	// {"level":"error","msg":"switchboard: request failed","request":"logging_test.Rate","attempt":1,"outcome":"failed","error":"rates service down (circuit \"*logging_test.Rate\" opened for 1h0m0s)","breaker":"*logging_test.Rate"}
	// {"level":"warn","msg":"switchboard: request refused","request":"logging_test.Rate","attempt":1,"outcome":"refused","error":"breaker: circuit open for \"*logging_test.Rate\" (probe in 1h0m0s)","breaker":"*logging_test.Rate"}
	// {"level":"warn","msg":"switchboard: request refused","request":"logging_test.Rate","attempt":1,"outcome":"refused","error":"breaker: circuit open for \"*logging_test.Rate\" (probe in 59m0s)","breaker":"*logging_test.Rate","suppressed":2}
}

// Notify is a request of the examples.
type Notify struct {
	mediator.Returns[mediator.Void]
	Rate float64
}

// Rate is a request of the examples: an exchange rate.
type Rate struct{ mediator.Returns[float64] }

// stoppedClock is a behaviors.Clock that moves only when the example moves it.
type stoppedClock struct{ now time.Time }

func (c *stoppedClock) Now() time.Time { return c.now }

func (c *stoppedClock) After(time.Duration) (<-chan time.Time, func() bool) {
	return make(chan time.Time), func() bool { return true }
}

// withoutDuration wraps a core so that it leaves the duration field out of every entry.
func withoutDuration(c zapcore.Core) zapcore.Core { return without{c, []string{"duration"}} }

// without is a core that leaves the fields named drop out of the entries it writes.
type without struct {
	zapcore.Core
	drop []string
}

func (d without) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if d.Enabled(e.Level) {
		return ce.AddCore(e, d)
	}
	return ce
}

func (d without) Write(e zapcore.Entry, fields []zapcore.Field) error {
	kept := fields[:0:0]
	for _, f := range fields {
		if !slices.Contains(d.drop, f.Key) {
			kept = append(kept, f)
		}
	}
	return d.Core.Write(e, kept)
}
