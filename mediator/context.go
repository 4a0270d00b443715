package mediator

import (
	"context"
	"fmt"
	"strings"
)

// ContextKey is a typed key for values carried through one dispatch: set by a behavior, read by inner
// behaviors and the handler (the retry attempt number, a breaker key, a trace id). Values ride
// on the context.Context, so setting one costs a context allocation and reading one costs a
// context lookup; a dispatch that sets nothing pays nothing. A value set with With is visible to
// every request sent with the context, the ones a handler sends included; WithFor binds a value
// to one request instead.
//
// Create keys once, at package level:
//
//	var TenantKey = mediator.NewContextKey[string]("tenant")
type ContextKey[T any] struct {
	name string
}

// NewContextKey returns a new key; name is for diagnostics only and need not be unique.
func NewContextKey[T any](name string) *ContextKey[T] { return &ContextKey[T]{name: name} }

// With returns a copy of ctx carrying v under k.
func (k *ContextKey[T]) With(ctx context.Context, v T) context.Context {
	return context.WithValue(ctx, k, v)
}

// Get returns the value under k and whether one was set.
func (k *ContextKey[T]) Get(ctx context.Context) (T, bool) {
	v, ok := ctx.Value(k).(T)
	return v, ok
}

// GetOr returns the value under k, or def when none was set.
func (k *ContextKey[T]) GetOr(ctx context.Context, def T) T {
	if v, ok := k.Get(ctx); ok {
		return v
	}
	return def
}

// String returns the key's name.
func (k *ContextKey[T]) String() string { return k.name }

// bound is a value that belongs to one request: the dispatch of that request sees it, requests
// its handler sends with the same context do not.
type bound[T any] struct {
	req any
	v   T
}

// WithFor returns a copy of ctx carrying v under k for the dispatch of req alone: GetFor with
// the same request pointer finds it, while the requests req's handler sends (other pointers)
// do not, although they share the context. This is how a caller says something about one
// dispatch ("one attempt only", "nobody waits for the answer") without it leaking into the
// nested dispatches the handler makes.
//
// Requests are identified by pointer (by interface identity, so a request sent by value is the
// value the dispatch was given, and comparing never panics). A request type without fields has no identity of its
// own (Go may give every such value one address), so a handler that sends another value of
// the same empty type would see it too; give such types a field if that matters.
func (k *ContextKey[T]) WithFor(ctx context.Context, req any, v T) context.Context {
	return context.WithValue(ctx, k, bound[T]{req: req, v: v})
}

// GetFor returns the value set under k by WithFor for the dispatch of req, and whether one was.
// A value set for another request, or with With, is not returned.
func (k *ContextKey[T]) GetFor(ctx context.Context, req any) (T, bool) {
	b, ok := ctx.Value(k).(bound[T])
	if !ok || !sameRequest(b.req, req) {
		var zero T
		return zero, false
	}
	return b.v, true
}

// Mark is something a caller says about one dispatch. Marks bind to the request they are set
// for (see WithMarks): the requests its handler sends do not inherit them.
type Mark uint8

const (
	// Unattended says nobody waits for the answer: a scheduler runs stored work, an operator
	// replays a dead letter. Behaviors that answer on the handler's behalf (a fallback, an
	// exception handler) step aside, so the caller records what the handler itself did.
	Unattended Mark = 1 << iota
	// SingleAttempt says the dispatch is exactly one attempt: in-process retry makes no
	// second one, because the caller does its own retrying.
	SingleAttempt
	// Stored says the request is already stored work being run by its scheduler: a behavior
	// that would store it for later (a durable deferral) must not store it twice.
	Stored
	// Urgent says the work goes before routine work of its kind: a durable queue marks the
	// dispatch of an item of a priority above the default. A behavior that queues stored work
	// for later (a rate limit's promised permits) puts it first.
	Urgent
)

// Has reports whether every mark of x is set in m.
func (m Mark) Has(x Mark) bool { return m&x == x }

// String lists the marks, such as "unattended|single-attempt".
func (m Mark) String() string {
	if m == 0 {
		return "none"
	}
	var parts []string
	for _, n := range []struct {
		m    Mark
		name string
	}{{Unattended, "unattended"}, {SingleAttempt, "single-attempt"}, {Stored, "stored"}, {Urgent, "urgent"}} {
		if m&n.m != 0 {
			parts = append(parts, n.name)
			m &^= n.m
		}
	}
	if m != 0 {
		parts = append(parts, fmt.Sprintf("Mark(%#x)", uint8(m)))
	}
	return strings.Join(parts, "|")
}

var marksKey = NewContextKey[Mark]("mediator.marks")

// WithMarks returns a copy of ctx on which the dispatch of req carries marks, in addition to
// any set for req before. Send req with the returned context:
//
//	ctx = mediator.WithMarks(ctx, req, mediator.Unattended|mediator.SingleAttempt)
//	_, err := m.SendAny(ctx, req)
//
// The marks bind to req (the pointer): requests its handler sends with the same context carry
// none of them.
func WithMarks(ctx context.Context, req any, marks Mark) context.Context {
	if prev, ok := marksKey.GetFor(ctx, req); ok {
		marks |= prev
	}
	return marksKey.WithFor(ctx, req, marks)
}

// MarksOf returns the marks set on ctx for the dispatch of req.
func MarksOf(ctx context.Context, req any) Mark {
	m, _ := marksKey.GetFor(ctx, req)
	return m
}
