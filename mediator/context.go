package mediator

import "context"

// Key is a typed key for values carried through one dispatch: set by a behavior, read by inner
// behaviors and the handler (the retry attempt number, a breaker key, a trace id). Values ride
// on the context.Context, so setting one costs a context allocation and reading one costs a
// context lookup; a dispatch that sets nothing pays nothing. Like every context value, a value
// set for one dispatch is also visible to requests the handler sends with the same context.
//
// Create keys once, at package level:
//
//	var TenantKey = mediator.NewKey[string]("tenant")
type Key[T any] struct {
	name string
}

// NewKey returns a new key; name is for diagnostics only and need not be unique.
func NewKey[T any](name string) *Key[T] { return &Key[T]{name: name} }

// With returns a copy of ctx carrying v under k.
func (k *Key[T]) With(ctx context.Context, v T) context.Context {
	return context.WithValue(ctx, k, v)
}

// Get returns the value under k and whether one was set.
func (k *Key[T]) Get(ctx context.Context) (T, bool) {
	v, ok := ctx.Value(k).(T)
	return v, ok
}

// GetOr returns the value under k, or def when none was set.
func (k *Key[T]) GetOr(ctx context.Context, def T) T {
	if v, ok := k.Get(ctx); ok {
		return v
	}
	return def
}

// String returns the key's name.
func (k *Key[T]) String() string { return k.name }
