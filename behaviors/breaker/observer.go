package breaker

// Observer is the observer of state changes attached to a whole mediator
// (mediator.Mediator.Observe): a breaker behavior bound into its pipelines adds the
// mediator's Observers to its registry, and each hears every state change of the registry's
// breakers after Config.OnStateChange and the listeners of AddListener, once however many
// pipelines (and durable queues) share the registry. logging.Behavior implements it.
type Observer interface {
	OnStateChange(c StateChange)
}

// RefusalObserver is the observer of refused calls attached to a whole mediator: it hears
// the key of a breaker each time it refuses a call, after Config.OnRefusal, once however
// many pipelines share the registry. metrics.Recorder implements it.
type RefusalObserver interface {
	OnRefusal(key string)
}

// Observe adds those of obs that implement Observer or RefusalObserver to the registry's
// observers; one added already is kept once. The breaker behavior calls it when it is bound
// into a mediator's pipelines, and a durable queue when it starts, with the mediator's
// observers.
func (r *Registry) Observe(obs []any) {
	r.observers.Add(obs)
	r.refusals.Add(obs)
}
