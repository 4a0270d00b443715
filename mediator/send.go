package mediator

import (
	"context"
	"fmt"
	"reflect"
)

func keyOfType(t reflect.Type) uintptr {
	return typeKey(reflect.Zero(t).Interface())
}

// SendAny implements Sender.
func (m *Mediator) SendAny(ctx context.Context, req any) (any, error) {
	if t := m.table.Load(); t != nil {
		if r, ok := t.requests.get(typeKey(req)); ok {
			if nilData(req) {
				return nil, nilRequest(req)
			}
			if ctx == nil || ctx.Err() != nil {
				return nil, doneErr(ctx)
			}
			return r.call(ctx, req)
		}
	}
	return nil, m.miss(req, "request")
}

// miss explains a failed lookup.
func (m *Mediator) miss(req any, kind string) error {
	if m.table.Load() == nil {
		return ErrNotBuilt
	}
	return noHandler(req, kind)
}

// doneErr is the error of a dispatch whose caller's context was done before it began: ctx's
// error, joined with the cause given to context.WithCancelCause (and its kin) when there is one,
// so that errors.Is matches both; ErrNilContext for a nil ctx.
func doneErr(ctx context.Context) error {
	if ctx == nil {
		return ErrNilContext
	}
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}

// nilRequest reports a request that is a nil pointer of its type.
func nilRequest(req any) error {
	return fmt.Errorf("%w: %T", ErrNilRequest, req)
}

func noHandler(v any, kind string) error {
	if v == nil {
		return ErrNilRequest
	}
	return &NoHandlerError{Type: reflect.TypeOf(v), Kind: kind}
}

// Send dispatches req through its pipeline and returns the typed response. R is inferred from
// the request type:
//
//	user, err := mediator.Send(ctx, m, &GetUser{ID: 7})
//
// A caller whose ctx is already done gets ctx's error before any behavior or the handler runs,
// and a nil ctx ErrNilContext. A behavior that answers with a value of another type fails the call with a *BehaviorError
// rather than handing the caller a zero value and a nil error.
func Send[R any](ctx context.Context, s Sender, req Request[R]) (R, error) {
	var v any
	var err error
	if m, ok := s.(*Mediator); ok {
		// The lookup of SendAny, written out so no call frame sits between Send and the pipeline.
		var r *route
		if t := m.table.Load(); t != nil {
			// The first probe, written out: almost every entry sits in its home slot.
			k := typeKey(req)
			if home := t.requests.homeSlot(k); home.key == k && k != 0 {
				r = &home.val
			} else {
				r = t.requests.find(k)
			}
		}
		if r == nil {
			return *new(R), m.miss(req, "request")
		}
		if bare, ok := r.bare.(func(context.Context, any) (R, error)); ok {
			// See route: the entry of req's type was built for this R, so the assertion, a
			// comparison of type words, holds whenever the pipeline is the handler alone.
			return bare(ctx, req)
		}
		if nilData(req) {
			return *new(R), nilRequest(req)
		}
		if ctx == nil || ctx.Err() != nil {
			return *new(R), doneErr(ctx)
		}
		v, err = r.call(ctx, req)
	} else {
		v, err = s.SendAny(ctx, req)
	}
	r, ok := v.(R)
	if !ok && v != nil && err == nil {
		err = wrongResponse[R](req, v)
	}
	return r, err
}

// wrongResponse reports a pipeline that answered with a value that is not of the request's
// response type (a behavior's bug), which would otherwise reach the caller as a zero value
// with a nil error.
func wrongResponse[R any](req, v any) error {
	return &BehaviorError{Behavior: "pipeline", Request: reflect.TypeOf(req),
		Err: fmt.Errorf("response of type %T is not a %s", v, reflect.TypeFor[R]())}
}

// TypedSender sends one request type through its pre-resolved pipeline, skipping the
// request-type lookup and, when the type has no behaviors, the untyped pipeline altogether.
// Get one with SenderFor after Build, for hot paths.
type TypedSender[Q Request[R], R any] struct {
	call    Next
	handler Handler[Q, R] // set when the pipeline is the handler alone
}

// SenderFor returns the pre-resolved sender of request type Q. It fails with ErrNotBuilt before
// Build and with a NoHandlerError for a type without a handler.
func SenderFor[Q Request[R], R any](m *Mediator) (*TypedSender[Q, R], error) {
	t := m.table.Load()
	if t == nil {
		return nil, ErrNotBuilt
	}
	r, ok := t.requests.get(keyOfType(reflect.TypeFor[Q]()))
	if !ok {
		return nil, &NoHandlerError{Type: reflect.TypeFor[Q](), Kind: "request"}
	}
	h, _ := t.direct[reflect.TypeFor[Q]()].(Handler[Q, R])
	return &TypedSender[Q, R]{call: r.call, handler: h}, nil
}

// Send dispatches req through the pre-resolved pipeline. Like Send, it turns a handler panic
// into a *PanicError.
func (s *TypedSender[Q, R]) Send(ctx context.Context, req Q) (resp R, err error) {
	if nilData(req) {
		return resp, nilRequest(req)
	}
	if ctx == nil || ctx.Err() != nil {
		return resp, doneErr(ctx)
	}
	if s.handler == nil {
		v, err := s.call(ctx, req)
		r, ok := v.(R)
		if !ok && v != nil && err == nil {
			err = wrongResponse[R](req, v)
		}
		return r, err
	}
	returned := false
	defer func() {
		if !returned { // the guard of bareSend
			if p := recover(); p != nil {
				err = NewPanicError(p)
			}
		}
	}()
	resp, err = s.handler.Handle(ctx, req)
	returned = true
	return resp, err
}
