package logging_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/fallback"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/logging"
	"github.com/switchboard-go/switchboard/mediator"
	"github.com/switchboard-go/switchboard/metrics"
	"github.com/switchboard-go/switchboard/tracing"
)

// GetStock asks the warehouse how many items it holds.
type GetStock struct{ mediator.Returns[int] }

// busy is the warehouse's answer while it is overloaded: a 503, which retry retries.
type busy struct{}

func (busy) Error() string   { return "warehouse busy" }
func (busy) StatusCode() int { return 503 }

// Logging, metrics and tracing attach once each, to the mediator, and hear the retry,
// fallback and breaker of every pipeline, in the order attached; logging writes the breaker's
// opening too. (A durable queue started with the mediator tells them its claims, settled
// items and dead letters the same way.)
func Example_observers() {
	logger := zap.NewExample(zap.WrapCore(func(c zapcore.Core) zapcore.Core { // (ids and durations vary: left out)
		return without{c, []string{"duration", "trace_id", "span_id"}}
	}))
	lg := logging.New(logging.Config{Logger: logger, Steps: zap.NewAtomicLevelAt(zap.InfoLevel)})
	rec, err := metrics.New(metrics.Config{AppID: "shop"})
	if err != nil {
		panic(err)
	}
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	defer tp.Shutdown(context.Background())

	breakers := breaker.NewRegistry(breaker.Config{
		FailureThreshold: 2,
		Clock:            &stoppedClock{now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}, // (exact open times)
	})
	m := mediator.New(nil, mediator.Config{})
	m.Observe(lg)
	m.Observe(rec)
	m.Observe(tracing.SpanEvents{})
	mediator.HandleFunc(m, func(context.Context, *GetStock) (int, error) { return 0, busy{} })
	m.Use(tracing.New(tracing.Config{TracerProvider: tp}))
	m.Use(lg)
	m.Use(rec.Behavior())
	m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3, BaseDelay: time.Millisecond}}))
	m.Use(breaker.New(breakers))
	m.Use(fallback.NewFor(func(context.Context, *GetStock, error) (int, error) { return -1, nil }, fallback.Config{}))
	if err := m.Build(); err != nil {
		panic(err)
	}

	for range 2 { // the first trips the breaker, which refuses the second
		_, _ = mediator.Send(context.Background(), m, &GetStock{})
	}

	scrape := httptest.NewRecorder()
	rec.Handler().ServeHTTP(scrape, httptest.NewRequest("GET", "/metrics", nil))
	for _, line := range strings.Split(scrape.Body.String(), "\n") {
		if strings.HasPrefix(line, "switchboard_") && !strings.Contains(line, "_seconds") && !strings.HasSuffix(line, " 0") &&
			!strings.Contains(line, "breaker_state") && !strings.Contains(line, "breaker_half_open") {
			fmt.Println(line)
		}
	}
	for _, s := range exporter.GetSpans() {
		var events []string
		for _, e := range s.Events {
			events = append(events, e.Name)
		}
		fmt.Println(s.Name, events)
	}
	// Output:
	// {"level":"info","msg":"switchboard: retrying","request":"logging_test.GetStock","attempt":1,"delay":"1ms","error":"warehouse busy"}
	// {"level":"warn","msg":"switchboard: circuit breaker state changed","breaker":"*logging_test.GetStock","from":"closed","to":"open","reason":"failure-threshold"}
	// {"level":"error","msg":"switchboard: request failed","request":"logging_test.GetStock","attempt":2,"outcome":"failed","error":"retry: failed after 2 attempts: warehouse busy (circuit \"*logging_test.GetStock\" opened for 30s)","breaker":"*logging_test.GetStock"}
	// {"level":"info","msg":"switchboard: fallback","request":"logging_test.GetStock","fallback":"answered","error":"retry: failed after 2 attempts: warehouse busy (circuit \"*logging_test.GetStock\" opened for 30s)"}
	// {"level":"warn","msg":"switchboard: request refused","request":"logging_test.GetStock","attempt":1,"outcome":"refused","error":"breaker: circuit open for \"*logging_test.GetStock\" (probe in 30s)","breaker":"*logging_test.GetStock"}
	// {"level":"info","msg":"switchboard: fallback","request":"logging_test.GetStock","fallback":"answered","error":"breaker: circuit open for \"*logging_test.GetStock\" (probe in 30s)"}
	// switchboard_breaker_refused_total{app="shop",key="*logging_test.GetStock"} 1
	// switchboard_fallbacks_total{app="shop",outcome="answered",request="logging_test.GetStock"} 2
	// switchboard_requests_total{app="shop",outcome="succeeded",request="logging_test.GetStock"} 2
	// switchboard_retries_total{app="shop",request="logging_test.GetStock"} 1
	// logging_test.GetStock [switchboard.retry switchboard.fallback]
	// logging_test.GetStock [switchboard.fallback switchboard.breaker.refused]
}
