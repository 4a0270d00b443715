package tracing_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/fallback"
	"github.com/switchboard-go/switchboard/behaviors/recovery"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/durabletest"
	"github.com/switchboard-go/switchboard/mediator"
	"github.com/switchboard-go/switchboard/tracing"
)

// Charge is the test request: charging an invoice through a payment provider.
type Charge struct {
	mediator.Returns[*Receipt]
	Invoice string
}

// Receipt is the response of a Charge.
type Receipt struct{ ID string }

// unavailable is the payment provider's 503: retried in process, deferred when retries run out.
type unavailable struct{}

func (unavailable) Error() string   { return "503 service unavailable" }
func (unavailable) StatusCode() int { return 503 }

// instantClock is a behaviors.Clock whose waits are over at once, so in-process retries take no
// time.
type instantClock struct{}

func (instantClock) Now() time.Time { return time.Unix(0, 0) }
func (instantClock) After(time.Duration) (<-chan time.Time, func() bool) {
	c := make(chan time.Time, 1)
	c <- time.Unix(0, 0)
	return c, func() bool { return false }
}

// recorder returns a tracer provider that keeps every ended span in memory.
func recorder(t testing.TB, opts ...sdktrace.TracerProviderOption) (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(append(opts, sdktrace.WithSpanProcessor(rec))...)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return rec, tp
}

func build(t testing.TB, h func(context.Context, *Charge) (*Receipt, error), bs ...mediator.Behavior) *mediator.Mediator {
	t.Helper()
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, h)
	for _, b := range bs {
		m.Use(b)
	}
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	return m
}

// attrs returns a span's (or event's) attributes by key.
func attrs(kvs []attribute.KeyValue) map[string]attribute.Value {
	out := map[string]attribute.Value{}
	for _, kv := range kvs {
		out[string(kv.Key)] = kv.Value
	}
	return out
}

func eventNames(s sdktrace.ReadOnlySpan) []string {
	var names []string
	for _, e := range s.Events() {
		names = append(names, e.Name)
	}
	return names
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The acceptance test: a request retried twice in process, then deferred, then run by the
// scheduler a day later, yields one trace: the caller's span, the dispatch span that retried and
// deferred (its child), and the durable dispatch span that succeeded (the child of the span that
// deferred it), marked with the item id, attempt and instance.
func TestDeferredRequestIsOneTrace(t *testing.T) {
	rec, tp := recorder(t)
	cfg := tracing.Config{TracerProvider: tp}
	clock := durabletest.NewManualClock(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC))
	q := durabletest.NewQueue(t, durable.Config{Clock: clock, Propagators: []durable.Propagator{tracing.Propagator(cfg)}})
	durable.Register[*Charge](q, "billing.charge")
	m := build(t, func(ctx context.Context, c *Charge) (*Receipt, error) {
		if _, stored := durable.FromContext(ctx, c); !stored {
			return nil, unavailable{} // down while the caller waits
		}
		return &Receipt{ID: "r-" + c.Invoice}, nil // back a day later
	},
		tracing.New(cfg),
		retry.New(retry.Config{
			Policy:  retry.Policy{MaxAttempts: 3, BaseDelay: 200 * time.Millisecond},
			OnRetry: []func(context.Context, retry.Event){tracing.OnRetry},
			Clock:   instantClock{},
		}),
		durable.NewDeferral(q, durable.DeferralConfig{}))

	ctx, checkout := tp.Tracer("test").Start(context.Background(), "checkout")
	_, err := mediator.Send(ctx, m, &Charge{Invoice: "INV-1"})
	checkout.End()
	var deferred *durable.DeferredError
	if !errors.As(err, &deferred) {
		t.Fatalf("want a deferral, got %v", err)
	}

	clock.Advance(24 * time.Hour)
	if res := durabletest.Work(context.Background(), t, q, m, durabletest.AsInstance("worker-1")); res.Succeeded != 1 {
		t.Fatal(res)
	}

	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("want 3 spans, got %d", len(spans))
	}
	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byName[s.Name()] = append(byName[s.Name()], s)
	}
	root := byName["checkout"][0]
	charges := byName["tracing_test.Charge"]
	if len(charges) != 2 {
		t.Fatalf("want 2 dispatch spans, got %d", len(charges))
	}
	first, later := charges[0], charges[1]
	traceID := root.SpanContext().TraceID()
	for _, s := range charges {
		if s.SpanContext().TraceID() != traceID {
			t.Errorf("%s: trace %s, want the caller's %s", s.Name(), s.SpanContext().TraceID(), traceID)
		}
	}
	if first.Parent().SpanID() != root.SpanContext().SpanID() {
		t.Error("the first dispatch is not the caller's child")
	}
	if later.Parent().SpanID() != first.SpanContext().SpanID() || !later.Parent().IsRemote() {
		t.Error("the durable dispatch is not the (remote) child of the dispatch that deferred it")
	}

	// The first dispatch: two retries, then the deferral; not an error.
	if got, want := eventNames(first), []string{"switchboard.retry", "switchboard.retry", "switchboard.deferred"}; !equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	for i, e := range first.Events()[:2] {
		a := attrs(e.Attributes)
		if a["switchboard.retry.attempt"].AsInt64() != int64(i+1) || a["switchboard.retry.delay"].AsFloat64() != 0.2 ||
			a["switchboard.error"].AsString() != "503 service unavailable" {
			t.Errorf("retry event %d: %v", i, e.Attributes)
		}
	}
	if a := attrs(first.Events()[2].Attributes); a["switchboard.durable.item_id"].AsInt64() != int64(deferred.ItemID) ||
		a["switchboard.durable.duplicate"].AsBool() {
		t.Errorf("deferred event: %v", first.Events()[2].Attributes)
	}
	if first.Status().Code != codes.Unset || attrs(first.Attributes())["switchboard.outcome"].AsString() != "deferred" {
		t.Errorf("first dispatch: status %v, attributes %v", first.Status(), first.Attributes())
	}

	// The durable dispatch: marked with the item, attempt and instance; succeeded.
	a := attrs(later.Attributes())
	if a["switchboard.durable.item_id"].AsInt64() != int64(deferred.ItemID) || a["switchboard.durable.attempt"].AsInt64() != 1 ||
		a["switchboard.durable.instance"].AsString() != "worker-1" || a["switchboard.durable.name"].AsString() != "billing.charge" ||
		a["switchboard.outcome"].AsString() != "succeeded" {
		t.Errorf("durable dispatch attributes: %v", later.Attributes())
	}
	if later.Status().Code != codes.Unset || len(later.Events()) != 0 {
		t.Errorf("durable dispatch: status %v, events %v", later.Status(), eventNames(later))
	}
	if later.StartTime().Before(first.EndTime()) {
		t.Error("the durable dispatch started before the deferral ended")
	}
}

var errDeclined = errors.New("card declined")

// A failure sets the span's status to Error with the error's text and records the error.
func TestFailureStatusAndRecordedError(t *testing.T) {
	rec, tp := recorder(t)
	m := build(t, func(context.Context, *Charge) (*Receipt, error) { return nil, errDeclined },
		tracing.New(tracing.Config{TracerProvider: tp}))
	if _, err := mediator.Send(context.Background(), m, &Charge{}); err != errDeclined {
		t.Fatal(err)
	}
	s := rec.Ended()[0]
	if s.Status().Code != codes.Error || s.Status().Description != "card declined" {
		t.Errorf("status %v", s.Status())
	}
	if got := eventNames(s); !equal(got, []string{"exception"}) {
		t.Fatalf("events %v", got)
	}
	if a := attrs(s.Events()[0].Attributes); a["exception.message"].AsString() != "card declined" {
		t.Errorf("exception event %v", s.Events()[0].Attributes)
	}
	if attrs(s.Attributes())["switchboard.outcome"].AsString() != "failed" {
		t.Errorf("attributes %v", s.Attributes())
	}
}

// The caller's cancellation is recorded as such, not as an error: no Error status, no
// exception event, and the outcome says "cancelled".
func TestCancelledCallIsNotAnError(t *testing.T) {
	rec, tp := recorder(t)
	ctx, cancel := context.WithCancel(context.Background())
	m := build(t, func(ctx context.Context, _ *Charge) (*Receipt, error) {
		cancel() // the caller gives up while the call runs
		return nil, ctx.Err()
	}, tracing.New(tracing.Config{TracerProvider: tp}))
	if _, err := mediator.Send(ctx, m, &Charge{}); err != context.Canceled {
		t.Fatal(err)
	}
	s := rec.Ended()[0]
	if s.Status().Code != codes.Unset {
		t.Errorf("status %v", s.Status())
	}
	if got := eventNames(s); !equal(got, []string{"switchboard.cancelled"}) {
		t.Errorf("events %v", got)
	}
	if attrs(s.Attributes())["switchboard.outcome"].AsString() != "cancelled" {
		t.Errorf("attributes %v", s.Attributes())
	}
}

// An open breaker's refusal is on the span: as the failure when nothing answers it, and beside
// the fallback's event when a fallback does (the dispatch then succeeds).
func TestBreakerRejectionAndFallback(t *testing.T) {
	rec, tp := recorder(t)
	reg := breaker.NewRegistry(breaker.Config{Key: func(any) string { return "payments" }})
	p, _ := reg.Gate("payments") // the breaker exists once a call used it
	p.Success()
	if err := reg.Trip("payments"); err != nil {
		t.Fatal(err)
	}
	handler := func(context.Context, *Charge) (*Receipt, error) { return &Receipt{}, nil }
	bare := build(t, handler, tracing.New(tracing.Config{TracerProvider: tp}), breaker.New(reg))
	if _, err := mediator.Send(context.Background(), bare, &Charge{}); !errors.Is(err, breaker.ErrOpen) {
		t.Fatal(err)
	}
	degraded := build(t, handler, tracing.New(tracing.Config{TracerProvider: tp}), breaker.New(reg),
		fallback.NewFor(func(context.Context, *Charge, error) (*Receipt, error) { return &Receipt{ID: "later"}, nil },
			fallback.Config{OnFallback: []func(context.Context, fallback.Fallback){tracing.OnFallback}}))
	if r, err := mediator.Send(context.Background(), degraded, &Charge{}); err != nil || r.ID != "later" {
		t.Fatal(r, err)
	}

	spans := rec.Ended()
	refused, answered := spans[0], spans[1]
	if got, want := eventNames(refused), []string{"switchboard.breaker.refused", "exception"}; !equal(got, want) {
		t.Errorf("refused: events %v, want %v", got, want)
	}
	if a := attrs(refused.Events()[0].Attributes); a["switchboard.breaker.key"].AsString() != "payments" ||
		a["switchboard.breaker.remaining"].AsFloat64() <= 0 {
		t.Errorf("rejection event %v", refused.Events()[0].Attributes)
	}
	if refused.Status().Code != codes.Error {
		t.Errorf("refused: status %v", refused.Status())
	}
	if got, want := eventNames(answered), []string{"switchboard.fallback", "switchboard.breaker.refused"}; !equal(got, want) {
		t.Errorf("answered: events %v, want %v", got, want)
	}
	if answered.Status().Code != codes.Unset || attrs(answered.Attributes())["switchboard.outcome"].AsString() != "succeeded" {
		t.Errorf("answered: status %v, attributes %v", answered.Status(), answered.Attributes())
	}
	if a := attrs(answered.Events()[0].Attributes); a["switchboard.fallback.outcome"].AsString() != "answered" ||
		a["switchboard.error"].AsString() == "" {
		t.Errorf("fallback event %v", answered.Events()[0].Attributes)
	}
}

// A fallback whose function fails is on the span as such, with both errors, and the dispatch
// fails: the event says what the fallback did, not that it answered.
func TestFallbackThatFailsIsNotAnAnswer(t *testing.T) {
	rec, tp := recorder(t)
	m := build(t, func(context.Context, *Charge) (*Receipt, error) { return nil, errors.New("gateway down") },
		tracing.New(tracing.Config{TracerProvider: tp}),
		fallback.NewFor(func(context.Context, *Charge, error) (*Receipt, error) { return nil, errors.New("no cached receipt") },
			fallback.Config{OnFallback: []func(context.Context, fallback.Fallback){tracing.OnFallback}}))
	if _, err := mediator.Send(context.Background(), m, &Charge{}); err == nil {
		t.Fatal("answered")
	}
	s := rec.Ended()[0]
	if got := eventNames(s); !equal(got, []string{"switchboard.fallback", "exception"}) {
		t.Fatalf("events %v", got)
	}
	a := attrs(s.Events()[0].Attributes)
	if a["switchboard.fallback.outcome"].AsString() != "failed" || a["switchboard.error"].AsString() != "gateway down" ||
		a["switchboard.fallback.error"].AsString() != "no cached receipt" {
		t.Errorf("fallback event %v", s.Events()[0].Attributes)
	}
	if s.Status().Code != codes.Error {
		t.Errorf("status %v", s.Status())
	}
}

// A behavior's panic turned into an error by recovery (inside tracing) is recorded as that
// error; without recovery, the panic passes through and the span still ends, as an error.
func TestPanics(t *testing.T) {
	rec, tp := recorder(t)
	panicking := mediator.BehaviorFunc(func(context.Context, any, mediator.Next) (any, error) { panic("bug") })
	handler := func(context.Context, *Charge) (*Receipt, error) { return &Receipt{}, nil }
	recovered := build(t, handler, tracing.New(tracing.Config{TracerProvider: tp}), recovery.New(), panicking)
	if _, err := mediator.Send(context.Background(), recovered, &Charge{}); !errors.Is(err, mediator.ErrPanic) {
		t.Fatal(err)
	}
	bare := build(t, handler, tracing.New(tracing.Config{TracerProvider: tp}), panicking)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not pass through")
			}
		}()
		_, _ = mediator.Send(context.Background(), bare, &Charge{})
	}()
	spans := rec.Ended()
	if len(spans) != 2 || spans[0].Status().Code != codes.Error || spans[1].Status() != (sdktrace.Status{Code: codes.Error, Description: "panic"}) {
		t.Fatalf("%d spans: %v", len(spans), spans)
	}
}

// The tracing behavior is the outermost behavior of a pipeline, in StagePre.
func TestPlacement(t *testing.T) {
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *Charge) (*Receipt, error) { return &Receipt{}, nil })
	m.Use(retry.New(retry.Config{}))
	m.Use(recovery.New())
	m.Use(tracing.New(tracing.Config{}))
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	chain, err := mediator.Explain[*Charge](m)
	if err != nil {
		t.Fatal(err)
	}
	if chain[0].Name != "tracing" || chain[0].Stage != mediator.StagePre {
		t.Fatalf("\n%s", chain)
	}
}

// With sampling off, a dispatch through the tracing behavior allocates what the tracer's Start
// allocates, and nothing more.
func TestNoAllocationBeyondTheSpanWhenNotSampled(t *testing.T) {
	_, tp := recorder(t, sdktrace.WithSampler(sdktrace.NeverSample()))
	handler := func(context.Context, *Charge) (*Receipt, error) { return nil, nil }
	plain := build(t, handler)
	traced := build(t, handler, tracing.New(tracing.Config{TracerProvider: tp}))
	req, ctx := &Charge{}, context.Background()
	base := testing.AllocsPerRun(200, func() { _, _ = mediator.Send(ctx, plain, req) })
	with := testing.AllocsPerRun(200, func() { _, _ = mediator.Send(ctx, traced, req) })
	tracer := tp.Tracer("bare")
	start := testing.AllocsPerRun(200, func() {
		_, s := tracer.Start(ctx, "x")
		s.End()
	})
	if with-base != start {
		t.Fatalf("the behavior allocates %v per dispatch, the tracer's Start alone %v", with-base, start)
	}
	t.Logf("not sampled: %v allocations per dispatch, all of them the tracer's Start", with-base)
}

// A fallback that declines an open breaker's refusal passes it on unchanged: the span has one
// rejection event, the dispatch's, not one from the fallback hook too.
func TestDeclinedFallbackRecordsTheRejectionOnce(t *testing.T) {
	rec, tp := recorder(t)
	reg := breaker.NewRegistry(breaker.Config{Key: func(any) string { return "payments" }})
	p, _ := reg.Gate("payments")
	p.Success()
	if err := reg.Trip("payments"); err != nil {
		t.Fatal(err)
	}
	handler := func(context.Context, *Charge) (*Receipt, error) { return &Receipt{}, nil }
	answer := func(context.Context, *Charge, error) (*Receipt, error) { return &Receipt{ID: "later"}, nil }
	never := func(context.Context, any, error) bool { return false }
	declining := build(t, handler, tracing.New(tracing.Config{TracerProvider: tp}), breaker.New(reg),
		fallback.NewFor(answer, fallback.Config{When: never, OnFallback: []func(context.Context, fallback.Fallback){tracing.OnFallback}}))
	if _, err := mediator.Send(context.Background(), declining, &Charge{}); !errors.Is(err, breaker.ErrOpen) {
		t.Fatal(err)
	}
	s := rec.Ended()[0]
	if got, want := eventNames(s), []string{"switchboard.fallback", "switchboard.breaker.refused", "exception"}; !equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if a := attrs(s.Events()[0].Attributes); a["switchboard.fallback.outcome"].AsString() != "declined" {
		t.Errorf("fallback event %v", s.Events()[0].Attributes)
	}
}

// The propagator Propagator returns is a durable.Propagator, and the queue tells it of each
// dispatch, although package tracing does not import durable; a deferral's error is read
// through its methods.
var (
	_ durable.Propagator = tracing.ItemPropagator{}
	_ interface {
		Dispatching(ctx context.Context, req any, item int64, name string, attempt int, instance string) context.Context
	} = tracing.ItemPropagator{}
	_ interface {
		DeferredItem() (item int64, duplicate bool, cause error)
	} = (*durable.DeferredError)(nil)
)

// An item enqueued without a span stores no trace context, yet its durable dispatch's span
// still names the item, its attempt and the instance: the queue tells the propagator of every
// dispatch, metadata or none.
func TestDispatchWithoutStoredContextNamesTheItem(t *testing.T) {
	rec, tp := recorder(t)
	cfg := tracing.Config{TracerProvider: tp}
	q := durabletest.NewQueue(t, durable.Config{Propagators: []durable.Propagator{tracing.Propagator(cfg)}})
	durable.Register[*Charge](q, "billing.charge")
	m := build(t, func(context.Context, *Charge) (*Receipt, error) { return &Receipt{ID: "r"}, nil }, tracing.New(cfg))
	res, err := q.Enqueue(context.Background(), &Charge{Invoice: "INV-2"})
	if err != nil {
		t.Fatal(err)
	}
	if it, err := q.Item(context.Background(), res.ID); err != nil || len(it.Metadata) != 0 {
		t.Fatalf("item metadata %v (%v), want none", it.Metadata, err)
	}
	if r := durabletest.Work(context.Background(), t, q, m, durabletest.AsInstance("worker-2")); r.Succeeded != 1 {
		t.Fatal(r)
	}
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("want 1 span, got %d", len(spans))
	}
	a := attrs(spans[0].Attributes())
	if a["switchboard.durable.item_id"].AsInt64() != int64(res.ID) || a["switchboard.durable.attempt"].AsInt64() != 1 ||
		a["switchboard.durable.instance"].AsString() != "worker-2" || a["switchboard.durable.name"].AsString() != "billing.charge" {
		t.Errorf("durable dispatch attributes: %v", spans[0].Attributes())
	}
	if spans[0].Parent().IsValid() {
		t.Error("a dispatch of an item stored without a trace context has a parent")
	}
}

// The requests a durable dispatch's handler sends are not that dispatch: their spans carry no
// item attributes.
func TestNestedRequestIsNotTheDispatch(t *testing.T) {
	rec, tp := recorder(t)
	cfg := tracing.Config{TracerProvider: tp}
	q := durabletest.NewQueue(t, durable.Config{Propagators: []durable.Propagator{tracing.Propagator(cfg)}})
	durable.Register[*Charge](q, "billing.charge")
	var m *mediator.Mediator
	m = build(t, func(ctx context.Context, c *Charge) (*Receipt, error) {
		if c.Invoice == "outer" {
			return mediator.Send(ctx, m, &Charge{Invoice: "inner"})
		}
		return &Receipt{ID: "r"}, nil
	}, tracing.New(cfg))
	if _, err := q.Enqueue(context.Background(), &Charge{Invoice: "outer"}); err != nil {
		t.Fatal(err)
	}
	if r := durabletest.Work(context.Background(), t, q, m); r.Succeeded != 1 {
		t.Fatal(r)
	}
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("want 2 spans, got %d", len(spans))
	}
	inner, outer := attrs(spans[0].Attributes()), attrs(spans[1].Attributes())
	if _, ok := inner["switchboard.durable.item_id"]; ok {
		t.Errorf("the nested request's span names the item: %v", spans[0].Attributes())
	}
	if _, ok := outer["switchboard.durable.item_id"]; !ok {
		t.Errorf("the dispatch's span does not name the item: %v", spans[1].Attributes())
	}
}
