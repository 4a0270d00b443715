package durable

import (
	"context"
	"slices"
	"time"

	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// ClaimObserver is the observer of claiming round trips attached to a whole mediator
// (mediator.Mediator.Observe): a queue started with the mediator (Start) calls OnClaim after
// each round trip, after Config.OnClaim. metrics.Recorder implements it.
type ClaimObserver interface {
	OnClaim(took time.Duration, claimed int, err error)
}

// SettledObserver is the observer of settled claims attached to a whole mediator: a queue
// started with the mediator calls OnSettled once the outcome of a claim of an item is
// written, after Config.OnSettled. metrics.Recorder implements it (record.Settled is a
// string, so an observer needs no import of this package).
type SettledObserver interface {
	OnSettled(name string, outcome record.Settled)
}

// DeadObserver is the observer of new dead letters attached to a whole mediator: a queue
// started with the mediator calls OnDead once for each new dead letter, after Config.OnDead.
type DeadObserver interface {
	OnDead(ctx context.Context, d record.DeadLetter)
}

// observed is what Start takes from a mediator with observers (see observe).
type observed interface{ Observers() []any }

// observe attaches the observers of the mediator Start was given, when it has any: its
// ClaimObservers and SettledObservers to cfg, its DeadObservers to the queue, and its
// breaker observers (breaker.Observer, breaker.RefusalObserver) to the registries that
// guard the queue's items (Config.Breakers and those of WithBreaker), which call each
// observer once however many pipelines share them.
func (q *Queue) observe(sender mediator.Sender, cfg *schedulerConfig) {
	m, ok := sender.(observed)
	if !ok {
		return
	}
	obs := m.Observers()
	if len(obs) == 0 {
		return
	}
	cfg.OnClaim, cfg.OnSettled = slices.Clip(cfg.OnClaim), slices.Clip(cfg.OnSettled)
	for _, o := range mediator.ObserversOf[ClaimObserver](obs) {
		cfg.OnClaim = append(cfg.OnClaim, o.OnClaim)
	}
	for _, o := range mediator.ObserversOf[SettledObserver](obs) {
		cfg.OnSettled = append(cfg.OnSettled, o.OnSettled)
	}
	if dead := mediator.ObserversOf[DeadObserver](obs); len(dead) > 0 {
		q.deadObservers.Store(&dead)
	}
	for _, r := range q.breakers(cfg.Breakers) {
		r.Observe(obs)
	}
}
