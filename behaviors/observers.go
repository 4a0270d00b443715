package behaviors

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/switchboard-go/switchboard/mediator"
)

// ObserverSet holds the observers of a component that several pipelines share (a circuit
// breaker registry, a retry budget): the Build of each pipeline adds the observers attached
// to its mediator (mediator.Mediator.Observe) that implement T, and an observer added again,
// by another pipeline or a durable queue, is kept once, so that it hears each event once.
// It may grow while it is read. The zero value is empty and ready to use.
type ObserverSet[T any] struct {
	mu   sync.Mutex
	kept []any // the observers added, to know one added again (mediator.SameObserver)
	cur  atomic.Pointer[[]T]
}

// Add adds those of obs that implement T and are not in the set yet, in order.
func (s *ObserverSet[T]) Add(obs []any) {
	if len(mediator.ObserversOf[T](obs)) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := slices.Clone(s.Load())
	for _, o := range obs {
		t, ok := o.(T)
		if !ok || slices.ContainsFunc(s.kept, func(k any) bool { return mediator.SameObserver(k, o) }) {
			continue
		}
		s.kept = append(s.kept, o)
		next = append(next, t)
	}
	s.cur.Store(&next)
}

// Load returns the observers of the set, in the order added. The slice must not be changed.
func (s *ObserverSet[T]) Load() []T {
	if p := s.cur.Load(); p != nil {
		return *p
	}
	return nil
}
