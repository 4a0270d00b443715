package mediator

import (
	"context"
	"fmt"
	"iter"
	"reflect"
)

// Stream dispatches a stream request through its stream pipeline and returns the typed items.
// T is inferred from the request type:
//
//	for user, err := range mediator.Stream(ctx, m, &ListUsers{}) { ... }
//
// Cancelling ctx ends the stream with ctx's error as its last element; breaking out of the loop
// stops the handler's producer.
func Stream[T any](ctx context.Context, s Streamer, req StreamRequest[T]) iter.Seq2[T, error] {
	seq := s.StreamAny(ctx, req)
	return func(yield func(T, error) bool) {
		for v, err := range seq {
			t, ok := v.(T)
			if !ok && v != nil && err == nil {
				err = &BehaviorError{Behavior: "stream pipeline", Request: reflect.TypeOf(req),
					Err: fmt.Errorf("item of type %T is not a %s", v, reflect.TypeFor[T]())}
			}
			if !yield(t, err) {
				return
			}
		}
	}
}

// StreamAny implements Streamer.
func (m *Mediator) StreamAny(ctx context.Context, req any) iter.Seq2[any, error] {
	t := m.table.Load()
	if t == nil {
		return errSeq(ErrNotBuilt)
	}
	call, ok := t.streams.get(typeKey(req))
	if !ok {
		return errSeq(noHandler(req, "stream request"))
	}
	if ctx.Err() != nil {
		return errSeq(doneErr(ctx))
	}
	return call(ctx, req)
}

func errSeq(err error) iter.Seq2[any, error] {
	return func(yield func(any, error) bool) { yield(nil, err) }
}

// streamTerminal adapts a typed stream handler: it ends the stream when ctx is done, with ctx's
// error as the last element (also when the handler itself stopped because ctx was done), and
// turns a panic of the handler (not of the consumer's loop body) into a *PanicError element.
func streamTerminal[Q StreamRequest[T], T any](h StreamHandler[Q, T]) StreamNext {
	return func(ctx context.Context, req any) iter.Seq2[any, error] {
		return func(yield func(any, error) bool) {
			inBody := false
			stopped := false
			defer func() {
				if inBody || stopped {
					return
				}
				if p := recover(); p != nil {
					yield(nil, NewPanicError(p))
				}
			}()
			if err := ctx.Err(); err != nil {
				yield(nil, err)
				return
			}
			for v, err := range h.Handle(ctx, req.(Q)) {
				if cerr := ctx.Err(); cerr != nil {
					inBody = true
					yield(nil, cerr)
					inBody = false
					stopped = true
					return
				}
				inBody = true
				more := yield(v, err)
				inBody = false
				if !more {
					stopped = true
					return
				}
			}
			// A handler that watches ctx may end its sequence quietly when ctx is done; the
			// consumer must still learn that the stream was cut short, not completed.
			if cerr := ctx.Err(); cerr != nil {
				inBody = true
				yield(nil, cerr)
			}
		}
	}
}
