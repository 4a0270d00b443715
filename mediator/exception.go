package mediator

import (
	"context"
	"errors"
	"fmt"
	"reflect"
)

// Default orders of the exception behaviors within StageDefault. The fallback (30), retry (50)
// and circuit breaker (60) behaviors sit inside them, so exception handlers and actions see the
// final error of a request, after resilience has done what it can.
const (
	// ExceptionHandlerOrder is the default order of exception handlers.
	ExceptionHandlerOrder = 10
	// ExceptionActionOrder is the default order of exception actions; they are inside the
	// handlers, so an action sees every final error, recovered or not.
	ExceptionActionOrder = 20
)

// HandleException registers an exception handler for request type Q: when the pipeline inside
// it fails with an error that errors.As matches to E, fn may turn it into a response by
// returning handled = true. Unmatched or unhandled errors pass on unchanged. Caller
// cancellation (context.Canceled, context.DeadlineExceeded from ctx) is never offered to fn,
// nor is any other error once ctx is done: clients report a cancelled call in their own ways (a
// gRPC Canceled status does not wrap context.Canceled), and a caller that gave up must not
// receive a response made up from its own cancellation. Nor is anything offered for a dispatch
// marked Unattended (see WithMarks): a scheduler running stored work records what the handler
// did, not an answer made up on its behalf.
//
// It is a behavior in StageDefault at ExceptionHandlerOrder; opts may move it. Q may be an
// interface that request types implement, to cover many of them.
func HandleException[Q Request[R], R any, E error](m *Mediator, fn func(ctx context.Context, req Q, err E) (resp R, handled bool), opts ...Option) {
	b := BehaviorFunc(func(ctx context.Context, req any, next Next) (any, error) {
		resp, err := next(ctx, req)
		if err == nil || ctx.Err() != nil || MarksOf(ctx, req).Has(Unattended) {
			return resp, err
		}
		var target E
		if !errors.As(err, &target) {
			return resp, err
		}
		if r, ok := fn(ctx, req.(Q), target); ok {
			return r, nil
		}
		return resp, err
	})
	name := fmt.Sprintf("exception-handler[%s]", reflect.TypeFor[E]())
	m.Use(b, append([]Option{WithName(name), WithOrder(ExceptionHandlerOrder), forRequestOrInterface[Q]()}, opts...)...)
}

// OnException registers an exception action for request type Q: when the pipeline inside it
// fails with an error that errors.As matches to E, fn runs (for logging, alerting, cleanup) and
// the error passes on unchanged. No error is offered once ctx is done: clients report a
// cancelled call in their own ways (a gRPC Canceled status does not wrap context.Canceled), and
// an alert about the caller giving up would be noise.
//
// It is a behavior in StageDefault at ExceptionActionOrder; opts may move it. Q may be an
// interface that request types implement, to cover many of them.
func OnException[Q any, E error](m *Mediator, fn func(ctx context.Context, req Q, err E), opts ...Option) {
	b := BehaviorFunc(func(ctx context.Context, req any, next Next) (any, error) {
		resp, err := next(ctx, req)
		if err == nil || ctx.Err() != nil {
			return resp, err
		}
		var target E
		if q, ok := req.(Q); ok && errors.As(err, &target) {
			fn(ctx, q, target)
		}
		return resp, err
	})
	name := fmt.Sprintf("exception-action[%s]", reflect.TypeFor[E]())
	m.Use(b, append([]Option{WithName(name), WithOrder(ExceptionActionOrder), forRequestOrInterface[Q]()}, opts...)...)
}

// callerCancelled reports whether err is the caller's own cancellation: ctx is done and err is
// its cause.
func callerCancelled(ctx context.Context, err error) bool {
	if ctx.Err() == nil || err == nil {
		return false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	cause := context.Cause(ctx)
	return cause != nil && errors.Is(err, cause)
}

// IsCallerCancellation reports whether err is the cancellation of ctx itself (context.Canceled
// or context.DeadlineExceeded while ctx is done, or the cause given to context.WithCancelCause
// and its kin, which is what context.Cause(ctx) returns), which behaviors must pass on
// unchanged: never retry it, never count it as a dependency failure, never replace it with a
// fallback.
func IsCallerCancellation(ctx context.Context, err error) bool { return callerCancelled(ctx, err) }
