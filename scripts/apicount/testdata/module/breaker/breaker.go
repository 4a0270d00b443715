package breaker

import "example.com/mediator"

// Config has a Key that is a context key.
type Config struct {
	Key *mediator.ContextKey[string]
}

// Registry has a Key method whose result is a string.
type Registry struct{}

// Key returns a key.
func (*Registry) Key() string { return "" }

// Outcome returns a bare string.
func (*Registry) Outcome() string { return "" }

// Attempt is declared again.
type Attempt struct{}
