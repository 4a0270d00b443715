package fallback

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/mediator"
)

// Config configures a fallback.
type Config struct {
	// Classifier decides which final errors the fallback answers. nil: every error, since a
	// fallback exists to answer when the dependency cannot, an open circuit included. Whatever
	// it says, the caller's cancellation and deferred work are passed on unchanged.
	Classifier behaviors.Classifier
	// OnFallback is called with the request and the error each time the fallback answers a
	// failure, just before its function runs (for a counter or a trace event). nil: nothing is
	// called.
	OnFallback func(ctx context.Context, req any, err error)
}

// Behavior is the fallback behavior: it turns the final failure of a call into a degraded
// response (cached data, an empty list, a placeholder). It catches every error (or those
// Config.Classifier accepts), a *breaker.OpenError included, except the caller's own cancellation, which passes on unchanged: any error of a
// call whose context is done, since clients report cancellation in their own ways (a gRPC
// Canceled status does not wrap context.Canceled). It steps aside for a dispatch marked
// mediator.Unattended: nobody waits for a degraded answer there, and the caller (a scheduler
// running stored work) must record what the handler did. Errors that mean the work was deferred
// (behaviors.Deferring) pass on too. It is in mediator.StageDefault at behaviors.FallbackOrder,
// outside retry and the circuit breaker, so it sees only what survives them.
type Behavior struct {
	result  reflect.Type // the fallback function's result type
	request reflect.Type // non-nil for a typed fallback: the one request type it serves
	fn      func(ctx context.Context, req any, err error) (any, error)
	catch   behaviors.Classifier
	on      func(ctx context.Context, req any, err error)
}

// New returns a fallback for any request type whose response type R can be assigned to: fn
// receives the request and the final error. Build fails for a request type the
// fallback applies to whose response type does not accept R; limit it with
// mediator.ForRequest, ForInterface or ForTypes.
func New[R any](fn func(ctx context.Context, req any, err error) (R, error), cfg Config) *Behavior {
	return &Behavior{
		catch:  cfg.Classifier,
		on:     cfg.OnFallback,
		result: reflect.TypeFor[R](),
		fn: func(ctx context.Context, req any, err error) (any, error) {
			return fn(ctx, req, err)
		},
	}
}

// NewFor returns a fallback for request type Q alone (R is inferred from fn). Q may
// also be an interface that request types implement (embedding mediator.Request[R]); the
// fallback then applies to each of them.
func NewFor[Q mediator.Request[R], R any](fn func(ctx context.Context, req Q, err error) (R, error), cfg Config) *Behavior {
	return &Behavior{
		catch:   cfg.Classifier,
		on:      cfg.OnFallback,
		result:  reflect.TypeFor[R](),
		request: reflect.TypeFor[Q](),
		fn: func(ctx context.Context, req any, err error) (any, error) {
			return fn(ctx, req.(Q), err)
		},
	}
}

// Placement implements mediator.PlacedBehavior: Explain shows it as "fallback", in
// mediator.StageDefault, at behaviors.FallbackOrder (see the table of orders in package behaviors).
func (f *Behavior) Placement() mediator.Placement {
	return mediator.Placement{Name: "fallback", Stage: mediator.StageDefault, Order: behaviors.FallbackOrder}
}

// AppliesTo limits a typed fallback to its request type, or to the request types that
// implement it when it is an interface.
func (f *Behavior) AppliesTo(info mediator.RequestInfo) bool {
	switch {
	case info.Stream:
		return false
	case f.request == nil:
		return true
	case f.request.Kind() == reflect.Interface:
		return info.Request.Implements(f.request)
	}
	return info.Request == f.request
}

// Bind checks at Build that the fallback's result fits the request's response type.
func (f *Behavior) Bind(info mediator.RequestInfo) (mediator.Behavior, error) {
	if !f.result.AssignableTo(info.Response) {
		return nil, fmt.Errorf("fallback returns %s, but %s responds with %s", f.result, info.Request, info.Response)
	}
	return f, nil
}

// Handle calls next and falls back on its error.
func (f *Behavior) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	resp, err := next(ctx, req)
	if err == nil || ctx.Err() != nil || (f.catch != nil && !f.catch(err)) || isDeferred(err) ||
		mediator.MarksOf(ctx, req).Has(mediator.Unattended) {
		return resp, err
	}
	if f.on != nil {
		f.on(ctx, req, err)
	}
	return f.fn(ctx, req, err)
}

func isDeferred(err error) bool {
	var d behaviors.Deferring
	return errors.As(err, &d) && d.Deferred()
}
