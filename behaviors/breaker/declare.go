package breaker

// Declare creates the breakers of keys the application knows up front (the endpoints it
// calls), closed, so that Snapshot and Get list them and Trip and Reset act on them before
// any traffic: an operator can open the breaker of an endpoint known to be down before the
// first call reaches it. Declaring a key the registry already holds keeps that breaker and
// its state.
//
// Declared breakers are never evicted (by Sweep, IdleTTL or MaxBreakers) for the registry's
// lifetime, as breakers bound to a request type are not: a key the application named is part
// of its configuration, and a listing that lost it after ten idle minutes would hide it from
// the operator, who could then no longer trip it. They count towards Len and MaxBreakers, so
// declare a bounded set (keys from configuration, never from request data).
// Declaring an empty key panics, as a registration mistake does.
func (r *Registry) Declare(keys ...string) {
	for _, k := range keys {
		if k == "" {
			panic("breaker: Declare with an empty key")
		}
		r.create(k, true)
	}
}
