// Command otel is a mediator with the OpenTelemetry API alone, tracing a request by hand (a
// span with an attribute and an event) and carrying its context in a map: TestObserverBinarySizes
// compares the binary of the tracing program with its binary.
package main

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-go/switchboard/mediator"
)

// Ping is the request the program sends.
type Ping struct{ mediator.Returns[string] }

func main() {
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *Ping) (string, error) { return "pong", nil })
	if err := m.Build(); err != nil {
		panic(err)
	}
	ctx, span := otel.Tracer("sizecheck").Start(context.Background(), "Ping")
	if _, err := mediator.Send(ctx, m, &Ping{}); err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.AddEvent("sent", trace.WithAttributes(attribute.String("outcome", "success")))
	span.End()
	p := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	carrier := propagation.MapCarrier{}
	p.Inject(ctx, carrier)
	_ = p.Extract(ctx, carrier)
}
