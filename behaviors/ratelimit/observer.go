package ratelimit

import (
	"context"
	"slices"

	"github.com/switchboard-go/switchboard/mediator"
)

// Observer is the observer of refused calls attached to a whole mediator
// (mediator.Mediator.Observe): a rate limiter bound into its pipelines calls
// OnRateLimitRefused for each call it refuses, after the observers of Config.OnRefused.
// metrics.Recorder implements it.
type Observer interface {
	OnRateLimitRefused(ctx context.Context, e RefusedEvent)
}

// PermitObserver is the observer of permits attached to a whole mediator: a rate limiter
// bound into its pipelines calls OnRateLimitPermit for each permit it gives, after the
// observers of Config.OnPermit. metrics.Recorder and tracing.SpanEvents implement it.
type PermitObserver interface {
	OnRateLimitPermit(ctx context.Context, e PermitEvent)
}

// observed returns cfg with the mediator's observers (see Observer, PermitObserver) after its
// own hooks, sharing none of their backing arrays.
func observed(cfg Config, obs []any) Config {
	cfg.OnRefused, cfg.OnPermit = slices.Clip(cfg.OnRefused), slices.Clip(cfg.OnPermit)
	for _, o := range mediator.ObserversOf[Observer](obs) {
		cfg.OnRefused = append(cfg.OnRefused, o.OnRateLimitRefused)
	}
	for _, o := range mediator.ObserversOf[PermitObserver](obs) {
		cfg.OnPermit = append(cfg.OnPermit, o.OnRateLimitPermit)
	}
	return cfg
}
