package mediatortest

import (
	"context"
	"iter"
	"reflect"
	"slices"
	"sync"

	"github.com/switchboard-go/switchboard/mediator"
)

// Spy implements mediator.Sender, mediator.Publisher and mediator.Streamer. It records what
// passes through it and answers from its stubs; what has no stub goes to the wrapped mediator
// (see Wrap) or fails with a *mediator.NoHandlerError. A Spy is safe for concurrent use.
type Spy struct {
	mu        sync.Mutex
	sent      []any
	published []any
	streamed  []any
	sends     map[reflect.Type]func(context.Context, any) (any, error)
	streams   map[reflect.Type]func(context.Context, any) iter.Seq2[any, error]
	pubs      map[reflect.Type]func(context.Context, any) error
	sender    mediator.Sender
	publisher mediator.Publisher
	streamer  mediator.Streamer
}

// NewSpy returns a Spy with no stubs, wrapping nothing.
func NewSpy() *Spy {
	return &Spy{
		sends:   map[reflect.Type]func(context.Context, any) (any, error){},
		streams: map[reflect.Type]func(context.Context, any) iter.Seq2[any, error]{},
		pubs:    map[reflect.Type]func(context.Context, any) error{},
	}
}

// Wrap returns a Spy that records and then passes on whatever has no stub: requests to next,
// and notifications and stream requests too when next is also a mediator.Publisher or a
// mediator.Streamer (a *mediator.Mediator, or another Spy, is all three). What next cannot
// take is answered as by a Spy that wraps nothing.
func Wrap(next mediator.Sender) *Spy {
	s := NewSpy()
	s.sender = next
	s.publisher, _ = next.(mediator.Publisher)
	s.streamer, _ = next.(mediator.Streamer)
	return s
}

// StubSend makes the spy answer requests of type Q with fn.
func StubSend[Q mediator.Request[R], R any](s *Spy, fn func(ctx context.Context, req Q) (R, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sends[reflect.TypeFor[Q]()] = func(ctx context.Context, req any) (any, error) { return fn(ctx, req.(Q)) }
}

// StubResponse makes the spy answer every request of type Q with resp and err.
func StubResponse[Q mediator.Request[R], R any](s *Spy, resp R, err error) {
	StubSend(s, func(context.Context, Q) (R, error) { return resp, err })
}

// StubStream makes the spy answer stream requests of type Q with the given items.
func StubStream[Q mediator.StreamRequest[T], T any](s *Spy, items ...T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.streams[reflect.TypeFor[Q]()] = func(context.Context, any) iter.Seq2[any, error] {
		return func(yield func(any, error) bool) {
			for _, it := range items {
				if !yield(it, nil) {
					return
				}
			}
		}
	}
}

// StubPublish makes the spy deliver notifications of type N to fn (otherwise they are only
// recorded, or passed to the wrapped mediator).
func StubPublish[N any](s *Spy, fn func(ctx context.Context, n N) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pubs[reflect.TypeFor[N]()] = func(ctx context.Context, n any) error { return fn(ctx, n.(N)) }
}

// SendAny implements mediator.Sender.
func (s *Spy) SendAny(ctx context.Context, req any) (any, error) {
	s.mu.Lock()
	s.sent = append(s.sent, req)
	stub := s.sends[reflect.TypeOf(req)]
	s.mu.Unlock()
	switch {
	case stub != nil:
		return stub(ctx, req)
	case s.sender != nil:
		return s.sender.SendAny(ctx, req)
	}
	return nil, noHandler(req, "request")
}

// PublishAny implements mediator.Publisher.
func (s *Spy) PublishAny(ctx context.Context, n any, strategy mediator.PublishStrategy) error {
	s.mu.Lock()
	s.published = append(s.published, n)
	stub := s.pubs[reflect.TypeOf(n)]
	s.mu.Unlock()
	switch {
	case stub != nil:
		return stub(ctx, n)
	case s.publisher != nil:
		return s.publisher.PublishAny(ctx, n, strategy)
	}
	return nil
}

// StreamAny implements mediator.Streamer.
func (s *Spy) StreamAny(ctx context.Context, req any) iter.Seq2[any, error] {
	s.mu.Lock()
	s.streamed = append(s.streamed, req)
	stub := s.streams[reflect.TypeOf(req)]
	s.mu.Unlock()
	switch {
	case stub != nil:
		return stub(ctx, req)
	case s.streamer != nil:
		return s.streamer.StreamAny(ctx, req)
	}
	return func(yield func(any, error) bool) { yield(nil, noHandler(req, "stream request")) }
}

func noHandler(v any, kind string) error {
	if v == nil {
		return mediator.ErrNilRequest
	}
	return &mediator.NoHandlerError{Type: reflect.TypeOf(v), Kind: kind}
}

// Requests returns every request sent, in order.
func (s *Spy) Requests() []any { return s.snapshot(&s.sent) }

// Notifications returns every notification published, in order.
func (s *Spy) Notifications() []any { return s.snapshot(&s.published) }

// StreamRequests returns every stream request opened, in order. mediator.Stream opens its
// request when its sequence is ranged, once for each range.
func (s *Spy) StreamRequests() []any { return s.snapshot(&s.streamed) }

// Reset forgets what was recorded; stubs stay.
func (s *Spy) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent, s.published, s.streamed = nil, nil, nil
}

func (s *Spy) snapshot(list *[]any) []any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(*list)
}

// Sent returns the recorded requests of type Q, in order.
func Sent[Q any](s *Spy) []Q { return ofType[Q](s.Requests()) }

// Published returns the recorded notifications of type N, in order.
func Published[N any](s *Spy) []N { return ofType[N](s.Notifications()) }

func ofType[T any](all []any) []T {
	var out []T
	for _, v := range all {
		if t, ok := v.(T); ok {
			out = append(out, t)
		}
	}
	return out
}
