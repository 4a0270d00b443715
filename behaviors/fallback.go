package behaviors

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/switchboard-go/switchboard/mediator"
)

// Fallback is a behavior that turns the final failure of a call into a degraded response
// (cached data, an empty list, a placeholder). It catches every error, a *CircuitOpenError
// included, except the caller's own cancellation, which passes on unchanged: any error of a
// call whose context is done, since clients report cancellation in their own ways (a gRPC
// Canceled status does not wrap context.Canceled). It steps aside for a dispatch marked
// mediator.Unattended: nobody waits for a degraded answer there, and the caller (a scheduler
// running stored work) must record what the handler did. It is in StageDefault at
// FallbackOrder, outside Retry and CircuitBreaker, so it sees only what survives them.
type Fallback struct {
	result  reflect.Type // the fallback function's result type
	request reflect.Type // non-nil for a typed fallback: the one request type it serves
	fn      func(ctx context.Context, req any, err error) (any, error)
	catch   func(err error) bool
}

// NewFallback returns a fallback for any request type whose response type R can be assigned
// to: fn receives the request and the final error. Build fails for a request type the
// fallback applies to whose response type does not accept R; limit it with
// mediator.ForRequest, ForInterface or ForTypes.
func NewFallback[R any](fn func(ctx context.Context, req any, err error) (R, error)) *Fallback {
	return &Fallback{
		result: reflect.TypeFor[R](),
		fn: func(ctx context.Context, req any, err error) (any, error) {
			return fn(ctx, req, err)
		},
	}
}

// NewFallbackFor returns a fallback for request type Q alone (R is inferred from fn). Q may
// also be an interface that request types implement (embedding mediator.Request[R]); the
// fallback then applies to each of them.
func NewFallbackFor[Q mediator.Request[R], R any](fn func(ctx context.Context, req Q, err error) (R, error)) *Fallback {
	return &Fallback{
		result:  reflect.TypeFor[R](),
		request: reflect.TypeFor[Q](),
		fn: func(ctx context.Context, req any, err error) (any, error) {
			return fn(ctx, req.(Q), err)
		},
	}
}

// Catching returns a copy of f that falls back only on errors for which catch returns true.
func (f *Fallback) Catching(catch func(err error) bool) *Fallback {
	c := *f
	c.catch = catch
	return &c
}

// Name returns "fallback".
func (f *Fallback) Name() string { return "fallback" }

// Stage returns mediator.StageDefault.
func (f *Fallback) Stage() mediator.Stage { return mediator.StageDefault }

// Order returns FallbackOrder.
func (f *Fallback) Order() int { return FallbackOrder }

// AppliesTo limits a typed fallback to its request type, or to the request types that
// implement it when it is an interface.
func (f *Fallback) AppliesTo(info mediator.RequestInfo) bool {
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
func (f *Fallback) Bind(info mediator.RequestInfo) (mediator.Behavior, error) {
	if !f.result.AssignableTo(info.Response) {
		return nil, fmt.Errorf("fallback returns %s, but %s responds with %s", f.result, info.Request, info.Response)
	}
	return f, nil
}

// Handle calls next and falls back on its error.
func (f *Fallback) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	resp, err := next(ctx, req)
	if err == nil || ctx.Err() != nil || (f.catch != nil && !f.catch(err)) || isDeferred(err) ||
		mediator.MarksOf(ctx, req).Has(mediator.Unattended) {
		return resp, err
	}
	return f.fn(ctx, req, err)
}

// Deferring is implemented by errors that mean the work was accepted for later rather than
// failed, such as the durable package's *DeferredError. Fallback passes them on unchanged: the
// caller learns that the work was taken (and its id) instead of getting a degraded answer in
// its place.
type Deferring interface {
	Deferred() bool
}

func isDeferred(err error) bool {
	var d Deferring
	return errors.As(err, &d) && d.Deferred()
}
