package mediator

import (
	"context"
	"fmt"
	"iter"
	"reflect"
	"sync"
	"sync/atomic"
)

// Stream dispatches a stream request through its stream pipeline and returns the typed items.
// T is inferred from the request type:
//
//	for user, err := range mediator.Stream(ctx, m, &ListUsers{}) { ... }
//
// Nothing is dispatched until the sequence is ranged, and each range dispatches anew, as with
// any iterator: the pipeline is found, the stream behaviors are called and an unbuilt
// mediator, a request type without handler or a done ctx is reported (as the only element)
// when the loop starts, and a sequence made ahead and ranged later sees the mediator and the
// context as they are then.
//
// Cancelling ctx ends the stream with ctx's error as its last element; breaking out of the loop
// stops the handler's producer. A handler's sequence must not call its yield function after it
// has returned, nor after yield returned false: as with Go's range-over-func loops, such a
// call panics and delivers nothing, whatever stream is running by then.
//
// A stream request without stream behaviors, sent to a *Mediator, goes straight to its handler
// with one allocation per stream, none per item: the yield function its sequence is given,
// which is that stream's alone.
func Stream[T any](ctx context.Context, s Streamer, req StreamRequest[T]) iter.Seq2[T, error] {
	// Small enough to be inlined, so that a loop ranging the result keeps this closure on its
	// stack.
	return func(yield func(T, error) bool) { stream(ctx, s, req, yield) }
}

// stream runs one range of a sequence of Stream: typed and direct when the request type has no
// stream behaviors and s is a *Mediator, through the untyped pipeline otherwise.
func stream[T any](ctx context.Context, s Streamer, req any, yield func(T, error) bool) {
	if m, ok := s.(*Mediator); ok {
		if t := m.table.Load(); t != nil {
			if e, ok := t.streams.get(typeKey(req)); ok {
				if d, ok := e.direct.(*directStream[T]); ok {
					if ctx == nil || ctx.Err() != nil {
						var zero T
						yield(zero, doneErr(ctx))
						return
					}
					d.run(ctx, req, yield)
					return
				}
			}
		}
	}
	for v, err := range s.StreamAny(ctx, req) {
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

// StreamAny implements Streamer.
func (m *Mediator) StreamAny(ctx context.Context, req any) iter.Seq2[any, error] {
	t := m.table.Load()
	if t == nil {
		return errSeq(ErrNotBuilt)
	}
	e, ok := t.streams.get(typeKey(req))
	if !ok {
		return errSeq(noHandler(req, "stream request"))
	}
	if ctx == nil || ctx.Err() != nil {
		return errSeq(doneErr(ctx))
	}
	return e.call(ctx, req)
}

func errSeq(err error) iter.Seq2[any, error] {
	return func(yield func(any, error) bool) { yield(nil, err) }
}

// streamEntry is a stream request type's pipeline in the built table.
type streamEntry struct {
	call StreamNext
	// direct is the *directStream[T] of a request type no stream behavior applies to, which
	// Stream runs typed, without the pipeline's boxing and closures.
	direct any
}

// streamHandler adapts a typed stream handler. Both of its paths end the stream when ctx is
// done, with ctx's error as the last element (also when the handler itself stopped because ctx
// was done), and turn a panic of the handler (not of the consumer's loop body) into a
// *PanicError element.
type streamHandler[Q StreamRequest[T], T any] struct {
	h      StreamHandler[Q, T]
	direct directStream[T]
}

func streamTerminal[Q StreamRequest[T], T any](h StreamHandler[Q, T]) *streamHandler[Q, T] {
	s := &streamHandler[Q, T]{h: h}
	s.direct.open = func(ctx context.Context, req any) iter.Seq2[T, error] { return h.Handle(ctx, req.(Q)) }
	return s
}

// typed implements streamPipe.
func (s *streamHandler[Q, T]) typed() any { return &s.direct }

// directStream is the typed path of one stream handler. Its type names the item type alone,
// so Stream[T] finds it with a comparison of type words.
type directStream[T any] struct {
	open func(ctx context.Context, req any) iter.Seq2[T, error]
	// idle holds one idle run and runs more of them, so that a stream of the typed path
	// allocates only its yield function. The slot is the cheaper of the two to take from and
	// give back to, and serves streams of the handler one after another; the pool serves
	// streams at once.
	idle atomic.Pointer[streamRun]
	runs sync.Pool
}

// streamRun is the state of one typed stream, reused by later streams of the same handler.
// Each stream's sequence is given a yield function of its own, which holds the run's
// generation at that stream and the consumer's yield function: a call of it once its stream
// has ended finds the run at a later generation and panics, so it can neither deliver an item
// to a later stream nor change that stream's state.
type streamRun struct {
	// gen counts the streams the run has served; it grows when one ends, before the run is
	// reused. It is atomic because a late yield may come from a goroutine the handler left
	// running, at any time.
	gen atomic.Uint64
	// inBody is set while the consumer's loop body runs, so a panic there passes on untouched;
	// stopped once the consumer has been told the stream is over.
	inBody, stopped bool
}

// errLateYield is the panic of a yield function called after its stream ended. Its words are
// those of Go's own range-over-func check.
const errLateYield = "mediator: a stream handler's sequence called yield after its stream ended (range function continued iteration after whole loop exit)"

// errYieldAfterStop is the panic of a yield function called again after it returned false.
const errYieldAfterStop = "mediator: a stream handler's sequence called yield after yield returned false (range function continued iteration after function for loop body returned false)"

// run streams req to yield. Its caller has checked that ctx is not done yet.
func (d *directStream[T]) run(ctx context.Context, req any, yield func(T, error) bool) {
	r := d.idle.Swap(nil)
	if r == nil {
		r, _ = d.runs.Get().(*streamRun)
	}
	if r == nil {
		r = &streamRun{}
	}
	gen := r.gen.Load()
	defer d.finish(r, yield)
	d.open(ctx, req)(func(v T, err error) bool {
		if r.gen.Load() != gen {
			panic(errLateYield)
		}
		if r.stopped {
			panic(errYieldAfterStop)
		}
		if cerr := ctx.Err(); cerr != nil {
			var zero T
			r.inBody = true
			yield(zero, cerr)
			r.inBody = false
			r.stopped = true
			return false
		}
		r.inBody = true
		more := yield(v, err)
		r.inBody = false
		r.stopped = !more
		return more
	})
	// A handler that watches ctx may end its sequence quietly when ctx is done; the consumer
	// must still learn that the stream was cut short, not completed.
	if cerr := ctx.Err(); cerr != nil && !r.stopped {
		var zero T
		r.inBody = true
		yield(zero, cerr)
	}
}

// finish ends run: it turns a panic of the handler into the stream's last element, lets one of
// the consumer's loop body pass on, and puts the run back for the next stream at its next
// generation.
func (d *directStream[T]) finish(r *streamRun, yield func(T, error) bool) {
	passOn := r.inBody || r.stopped
	r.gen.Add(1)
	r.inBody, r.stopped = false, false
	if !d.idle.CompareAndSwap(nil, r) {
		d.runs.Put(r)
	}
	if passOn {
		return
	}
	if p := recover(); p != nil {
		var zero T
		yield(zero, NewPanicError(p))
	}
}

// stream is the handler's step of the untyped pipeline, which stream behaviors wrap.
func (s *streamHandler[Q, T]) stream(ctx context.Context, req any) iter.Seq2[any, error] {
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
			inBody = true
			yield(nil, err)
			return
		}
		for v, err := range s.h.Handle(ctx, req.(Q)) {
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
		// As in run.
		if cerr := ctx.Err(); cerr != nil {
			inBody = true
			yield(nil, cerr)
		}
	}
}

// streamPipe is implemented by every *streamHandler: its step of the untyped pipeline.
type streamPipe interface {
	stream(ctx context.Context, req any) iter.Seq2[any, error]
	typed() any // its *directStream[T]
}
