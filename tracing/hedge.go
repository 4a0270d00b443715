package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-go/switchboard/behaviors/hedge"
)

const (
	keyHedgePhase   = attribute.Key("switchboard.hedge.phase")
	keyHedgeAttempt = attribute.Key("switchboard.hedge.attempt")
	keyHedgeDelay   = attribute.Key("switchboard.hedge.delay")
	eventHedge      = "switchboard.hedge"
)

// OnHedge is a ready observer for hedge.Config.OnHedge: it adds a switchboard.hedge event to
// the span in ctx (the dispatch's span, the tracing behavior being outside the hedging one)
// for each step of a hedged call: switchboard.hedge.phase (sent, refused, won, cancelled),
// switchboard.hedge.attempt (0 for the first attempt) and, for a hedge sent or refused, the
// delay in seconds (switchboard.hedge.delay) and the refusal, the budget's or the pipeline's (switchboard.error). A
// call that ends before its delay adds none. It does nothing when the span is not recording.
func OnHedge(ctx context.Context, n hedge.Notice) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{keyHedgePhase.String(n.Phase.String()), keyHedgeAttempt.Int(n.Attempt)}
	if n.Phase == hedge.Sent || n.Phase == hedge.Refused {
		attrs = append(attrs, keyHedgeDelay.Float64(n.Delay.Seconds()))
	}
	if n.Err != nil {
		attrs = append(attrs, keyError.String(errorText(n.Err)))
	}
	span.AddEvent(eventHedge, trace.WithAttributes(attrs...))
}
