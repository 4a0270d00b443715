package tracing_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/mediator"
	"github.com/switchboard-go/switchboard/tracing"
)

// A request retried in process, deferred to the durable queue and run later by its scheduler is
// one trace: the dispatch that deferred it is the caller's child, and the scheduler's dispatch is
// the child of the dispatch that deferred it.
func Example() {
	dir, _ := os.MkdirTemp("", "tracing-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	defer tp.Shutdown(ctx)

	cfg := tracing.Config{TracerProvider: tp} // zero fields: the global provider, W3C trace context
	q, err := durable.Open(ctx, sqlite.Open(filepath.Join(dir, "queue.db")), durable.Config{
		Policy:       retry.Policy{BaseDelay: 10 * time.Millisecond}, // retry stored work soon, for the example
		Propagators:  []durable.Propagator{tracing.Propagator(cfg)},  // the trace context travels with the item
		PollInterval: 10 * time.Millisecond, Workers: 1,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	durable.Register[*Charge](q, "billing.charge")

	done := make(chan struct{})
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, c *Charge) (*Receipt, error) {
		if _, stored := durable.FromContext(ctx, c); !stored {
			return nil, unavailable{} // the provider is down while the caller waits
		}
		close(done)
		return &Receipt{ID: "r-" + c.Invoice}, nil
	})
	m.Use(tracing.New(cfg))         // outermost: StagePre, behaviors.TracingOrder
	m.Observe(tracing.SpanEvents{}) // a span event per retry, fallback, hedge, rate limit wait
	m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 2, BaseDelay: time.Millisecond}}))
	m.Use(durable.NewDeferral(q, durable.DeferralConfig{}))
	if err := m.Build(); err != nil {
		fmt.Println(err)
		return
	}

	reqCtx, checkout := tp.Tracer("shop").Start(ctx, "checkout")
	_, err = mediator.Send(reqCtx, m, &Charge{Invoice: "INV-7"})
	checkout.End()
	fmt.Println("deferred:", errors.Is(err, durable.ErrDeferred))

	if err := q.Start(m); err != nil {
		fmt.Println(err)
		return
	}
	<-done
	_ = q.Shutdown(ctx) // waits for the dispatch, whose span has ended by then

	spans := exporter.GetSpans()
	names := map[string]string{}
	for _, s := range spans {
		names[s.SpanContext.SpanID().String()] = s.Name
	}
	for _, s := range spans {
		parent := "none"
		if s.Parent.IsValid() {
			parent = names[s.Parent.SpanID().String()]
		}
		var events []string
		for _, e := range s.Events {
			events = append(events, e.Name)
		}
		fmt.Printf("%s, parent %s, same trace %v, events %v\n", s.Name, parent,
			s.SpanContext.TraceID() == spans[0].SpanContext.TraceID(), events)
	}
	// Output:
	// deferred: true
	// tracing_test.Charge, parent checkout, same trace true, events [switchboard.retry switchboard.deferred]
	// checkout, parent none, same trace true, events []
	// tracing_test.Charge, parent tracing_test.Charge, same trace true, events []
}
