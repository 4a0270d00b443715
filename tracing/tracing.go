package tracing

import (
	"context"
	"errors"
	"reflect"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/fallback"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/mediator"
)

// scope is the instrumentation scope of the behavior's tracer.
const scope = "github.com/switchboard-go/switchboard/tracing"

// Config configures the tracing behavior (New) and the trace-context propagator of a durable
// queue (Propagator). The zero Config is complete.
type Config struct {
	// TracerProvider makes the behavior's tracer. nil: otel.GetTracerProvider(), the global
	// provider an application sets once at startup; it forwards to a provider set after New,
	// so the order of setup does not matter.
	TracerProvider trace.TracerProvider
	// Propagator is the format Propagator stores a deferred item's trace context in. nil: W3C
	// Trace Context and Baggage. Not the global otel.GetTextMapPropagator(), because that one
	// propagates nothing until the application sets it, and an item stored without its trace
	// context is lost to its trace for good; the stored format is read back only by the queue's
	// own schedulers, so it need not match what the application sends over the wire.
	Propagator propagation.TextMapPropagator
}

// Behavior is the tracing behavior: one span per dispatch, named after the request type, with
// the outcome, the error of a failure, and the events the resilience behaviors report (see the
// package documentation). It is in mediator.StagePre at behaviors.TracingOrder, outside every
// other built-in behavior. With sampling off it adds nothing to a dispatch but what the
// tracer's Start costs.
type Behavior struct {
	tracer trace.Tracer
}

// New returns a tracing behavior configured by cfg.
func New(cfg Config) *Behavior {
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return &Behavior{tracer: tp.Tracer(scope)}
}

// Placement implements mediator.PlacedBehavior: Explain shows it as "tracing", in
// mediator.StagePre, at behaviors.TracingOrder: outside recovery, so a behavior's panic is on
// the span as the error recovery makes of it, and outside everything else, so the span covers
// the whole dispatch and every behavior and the handler see it.
func (b *Behavior) Placement() mediator.Placement {
	return mediator.Placement{Name: "tracing", Stage: mediator.StagePre, Order: behaviors.TracingOrder}
}

// AppliesTo implements mediator.SelectiveBehavior: every request type, no stream.
func (b *Behavior) AppliesTo(info mediator.RequestInfo) bool { return !info.Stream }

// Bind implements mediator.BindingBehavior: it names the spans of a request type once, so a
// dispatch computes no name.
func (b *Behavior) Bind(info mediator.RequestInfo) (mediator.Behavior, error) {
	return &bound{tracer: b.tracer, name: behaviors.RequestName(info.Request)}, nil
}

// Handle implements mediator.Behavior for a behavior used without Build's binding (called
// directly); it names the span after req's type on every call.
func (b *Behavior) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	name := "<nil>"
	if t := reflect.TypeOf(req); t != nil {
		name = behaviors.RequestName(t)
	}
	return (&bound{tracer: b.tracer, name: name}).Handle(ctx, req, next)
}

// bound is the behavior bound to one request type.
type bound struct {
	tracer trace.Tracer
	name   string
}

// The attributes and events of the spans. Durations are in seconds, as OpenTelemetry's
// conventions have them.
const (
	keyOutcome           = attribute.Key("switchboard.outcome")
	keyItemID            = attribute.Key("switchboard.durable.item_id")
	keyItemName          = attribute.Key("switchboard.durable.name")
	keyAttempt           = attribute.Key("switchboard.durable.attempt")
	keyInstance          = attribute.Key("switchboard.durable.instance")
	keyDuplicate         = attribute.Key("switchboard.durable.duplicate")
	keyRetryAttempt      = attribute.Key("switchboard.retry.attempt")
	keyRetryDelay        = attribute.Key("switchboard.retry.delay")
	keyError             = attribute.Key("switchboard.error")
	keyBreakerKey        = attribute.Key("switchboard.breaker.key")
	keyFallbackOutcome   = attribute.Key("switchboard.fallback.outcome")
	keyFallbackError     = attribute.Key("switchboard.fallback.error")
	keyBreakerRemaining  = attribute.Key("switchboard.breaker.remaining")
	eventRetry           = "switchboard.retry"
	eventFallback        = "switchboard.fallback"
	eventBreakerRejected = "switchboard.breaker.refused"
	eventDeferred        = "switchboard.deferred"
	eventCancelled       = "switchboard.cancelled"
)

// succeeded is the outcome of a successful dispatch, kept in a slice so that setting it
// allocates no argument slice.
var succeeded = []attribute.KeyValue{keyOutcome.String(behaviors.OutcomeSucceeded)}

func (b *bound) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	ctx, span := b.tracer.Start(ctx, b.name)
	recording := span.IsRecording()
	if recording {
		if d, ok := dispatchKey.GetFor(ctx, req); ok {
			span.SetAttributes(keyItemID.Int64(d.item), keyItemName.String(d.name),
				keyAttempt.Int(d.attempt), keyInstance.String(d.instance))
		}
	}
	done := false
	defer func() {
		if !done { // a panic of the pipeline (no recovery behavior inside): end the span anyway
			span.SetStatus(codes.Error, "panic")
			span.End()
		}
	}()
	resp, err := next(ctx, req)
	done = true
	if recording {
		if err == nil {
			span.SetAttributes(succeeded...)
		} else {
			finish(ctx, span, req, err)
		}
	}
	span.End()
	return resp, err
}

// deferredItem is what the tracing behavior reads of a deferral's error (behaviors.Deferring):
// the item stored, whether it was already pending, and the last in-process error. The durable
// package's *DeferredError is one; reading it through this method set keeps durable, and the
// database drivers it is built for, out of a traced program.
type deferredItem interface {
	error
	DeferredItem() (item int64, duplicate bool, cause error)
}

// finish records a dispatch's error on its span under its outcome (behaviors.OutcomeOf): the
// caller's cancellation as such, deferred work as deferred, anything else as a failure.
func finish(ctx context.Context, span trace.Span, req any, err error) {
	outcome := behaviors.OutcomeOf(ctx, req, err)
	switch outcome {
	case behaviors.OutcomeCancelled:
		// The caller gave up (whatever error the pipeline made of it: clients report a
		// cancellation in their own ways), which says nothing about the service.
		span.AddEvent(eventCancelled, trace.WithAttributes(keyError.String(err.Error())))
	case behaviors.OutcomeDeferred:
		// Accepted for later, not failed: the deferral's own answer.
		if deferred, ok := errors.AsType[deferredItem](err); ok {
			item, duplicate, cause := deferred.DeferredItem()
			span.AddEvent(eventDeferred, trace.WithAttributes(keyItemID.Int64(item),
				keyDuplicate.Bool(duplicate), keyError.String(errorText(cause))))
			rejected(span, cause)
		}
	default:
		rejected(span, err)
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.SetAttributes(keyOutcome.String(outcome))
}

// rejected adds a breaker-rejection event when err is a circuit breaker's refusal.
func rejected(span trace.Span, err error) {
	var open *breaker.OpenError
	if err != nil && errors.As(err, &open) {
		span.AddEvent(eventBreakerRejected, trace.WithAttributes(keyBreakerKey.String(open.Key),
			keyBreakerRemaining.Float64(open.Remaining.Seconds())))
	}
}

func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// OnRetry is a ready observer for retry.Config.OnRetry: it adds a switchboard.retry event (the failed
// attempt, the delay before the next one in seconds, the error) to the span in ctx, the
// dispatch's span when the tracing behavior is outside the retry behavior, as its default
// order puts it; and a switchboard.breaker.refused event when an open breaker refused the
// attempt. It does nothing when the span is not recording. SpanEvents calls it for every retry
// of a mediator's pipelines (mediator.Mediator.Observe).
func OnRetry(ctx context.Context, e retry.Event) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.AddEvent(eventRetry, trace.WithAttributes(keyRetryAttempt.Int(e.Attempt),
		keyRetryDelay.Float64(e.Delay.Seconds()), keyError.String(errorText(e.Err))))
	rejected(span, e.Err)
}

// OnFallback is a ready observer for fallback.Config.OnFallback: it adds a switchboard.fallback event to the
// span in ctx, after the fallback function ran, with what the fallback did
// (switchboard.fallback.outcome: answered, declined, failed or cancelled), the error it handled
// (switchboard.error) and, when its function failed, that function's error
// (switchboard.fallback.error); and a switchboard.breaker.refused event when the error handled
// is an open breaker's refusal and the fallback did not decline it (a declined error reaches
// the dispatch's end, which records the refusal). A dispatch a fallback answered succeeds, so without it the span
// would not show that the answer was degraded. It does nothing when the span is not recording.
func OnFallback(ctx context.Context, f fallback.Fallback) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{keyFallbackOutcome.String(f.Verdict.String()), keyError.String(errorText(f.Err))}
	if f.FallbackErr != nil {
		attrs = append(attrs, keyFallbackError.String(errorText(f.FallbackErr)))
	}
	span.AddEvent(eventFallback, trace.WithAttributes(attrs...))
	if f.Verdict != fallback.Declined {
		// A declined fallback passes the error on unchanged: the dispatch's end records the
		// refusal in it, once.
		rejected(span, f.Err)
	}
}

// Propagator returns the ItemPropagator that stores the trace context of the caller that
// enqueues or defers an item (the span of its dispatch, and its baggage) as the item's
// metadata, in cfg.Propagator's format, and restores it into the context of the item's
// dispatch. Give it to the queue (durable.Config.Propagators): the tracing behavior's span of
// each dispatch of the item is then a child of the span that stored it, in the same trace, and
// names the item, its attempt and the dispatching instance.
func Propagator(cfg Config) ItemPropagator {
	p := cfg.Propagator
	if p == nil {
		p = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	return ItemPropagator{p: p}
}

// ItemPropagator carries a trace context with a durable queue's items: it is a
// durable.Propagator (its methods mention only standard and OpenTelemetry types, so the
// tracing package does not import durable, and a traced program links no queue or database
// driver it does not use). Make it with Propagator; the zero ItemPropagator carries nothing.
type ItemPropagator struct{ p propagation.TextMapPropagator }

// Inject implements durable.Propagator: it writes the trace context of ctx into carrier.
func (t ItemPropagator) Inject(ctx context.Context, carrier map[string]string) {
	if t.p != nil {
		t.p.Inject(ctx, propagation.MapCarrier(carrier))
	}
}

// Extract implements durable.Propagator: it returns ctx with the trace context stored in
// carrier, the parent of the dispatch's span.
func (t ItemPropagator) Extract(ctx context.Context, carrier map[string]string) context.Context {
	if t.p == nil {
		return ctx
	}
	return t.p.Extract(ctx, propagation.MapCarrier(carrier))
}

// Dispatching is the method a durable queue calls at the start of each dispatch of an item
// (see durable.Propagator): it returns ctx telling the tracing behavior's span of req the
// item's id, request name, durable attempt and dispatching instance
// (switchboard.durable.item_id, .name, .attempt, .instance).
func (t ItemPropagator) Dispatching(ctx context.Context, req any, item int64, name string, attempt int, instance string) context.Context {
	return dispatchKey.WithFor(ctx, req, dispatch{item: item, name: name, attempt: attempt, instance: instance})
}

// dispatch is the durable dispatch a context belongs to, as Dispatching was told of it.
type dispatch struct {
	item     int64
	name     string
	attempt  int
	instance string
}

var dispatchKey = mediator.NewContextKey[dispatch]("tracing.dispatch")
