package behaviors

import "reflect"

// KeyFunc maps a request (the pointer that was sent) to a key such as the remote endpoint it
// calls: the key of its breaker, its bulkhead or its per-key retry policy. It runs on every
// dispatch: keep it cheap and allocation-free.
type KeyFunc func(req any) string

// TypeKey is the key of a request type when no key function is given: reflect's Type.String,
// such as "*app.GetUser".
func TypeKey(t reflect.Type) string { return t.String() }
