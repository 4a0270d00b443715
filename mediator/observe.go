package mediator

import "reflect"

// Observe attaches observers to the whole mediator: every behavior bound into its pipelines
// (at Build) hands its events to the observers that implement its observer interface
// (retry.Observer, fallback.Observer, breaker.Observer, ...), in addition to the hooks of its
// own Config, and a durable queue started with the mediator does the same for its claims,
// settled items and dead letters. An observer is any value: metrics, tracing and logging
// each provide one that implements every interface they care about, so each attaches with
// one call, and an application's own observer implements only the interfaces it needs. An
// observer implementing none is kept and ignored. An observer attached twice (the same
// pointer, or an equal comparable value) is called once.
//
// Observers are called in the order attached, after the hooks of the behavior's Config, on
// the goroutine the hook names. A nil observer is ignored; Observe after Build panics.
func (m *Mediator) Observe(obs ...any) {
	m.register("Observe", func() {
		for _, o := range obs {
			if !isNil(o) && !containsObserver(m.observers, o) {
				m.observers = append(m.observers, o)
			}
		}
	})
}

// Observers returns the observers attached with Observe, in the order attached. A component
// started with the mediator (a durable queue) reads them to attach them to its own events.
// A nil *Mediator has none.
func (m *Mediator) Observers() []any {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]any(nil), m.observers...)
}

// ObserversOf returns those of obs that implement T (an observer interface), in order. A
// behavior's Bind calls it with RequestInfo.Observers.
func ObserversOf[T any](obs []any) []T {
	var out []T
	for _, o := range obs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// SameObserver reports whether a and b are the same observer: the same pointer, or equal
// values of one comparable type. Values that cannot be compared are never the same. A
// registry shared by several pipelines uses it so as to call each observer once.
func SameObserver(a, b any) (same bool) {
	ta := reflect.TypeOf(a)
	if ta == nil || ta != reflect.TypeOf(b) || !ta.Comparable() {
		return false
	}
	defer func() {
		if recover() != nil { // an interface field holding an uncomparable value
			same = false
		}
	}()
	return a == b
}

// containsObserver reports whether list holds o (see SameObserver).
func containsObserver(list []any, o any) bool {
	for _, x := range list {
		if SameObserver(x, o) {
			return true
		}
	}
	return false
}
