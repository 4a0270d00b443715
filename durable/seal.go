package durable

// seal closes the registry to new registrations: a built mediator's deferral decided which
// request types it applies to.
func (r *Registry) seal() { r.sealed.Store(true) }
