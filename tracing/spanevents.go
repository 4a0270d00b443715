package tracing

import (
	"context"

	"github.com/switchboard-go/switchboard/behaviors/fallback"
	"github.com/switchboard-go/switchboard/behaviors/hedge"
	"github.com/switchboard-go/switchboard/behaviors/ratelimit"
	"github.com/switchboard-go/switchboard/behaviors/retry"
)

// SpanEvents records the events of every behavior as span events (see OnRetry, OnFallback,
// OnHedge and OnRateLimitPermit). Attach it once to the mediator, beside the tracing
// behavior that makes the spans:
//
//	m.Use(tracing.New(cfg))
//	m.Observe(tracing.SpanEvents{})
//
// It holds no state: the span is the one in each event's context.
type SpanEvents struct{}

// OnRetry implements retry.Observer (see the function OnRetry).
func (SpanEvents) OnRetry(ctx context.Context, e retry.Event) { OnRetry(ctx, e) }

// OnFallback implements fallback.Observer (see the function OnFallback).
func (SpanEvents) OnFallback(ctx context.Context, f fallback.Fallback) { OnFallback(ctx, f) }

// OnHedge implements hedge.Observer (see the function OnHedge).
func (SpanEvents) OnHedge(ctx context.Context, n hedge.Notice) { OnHedge(ctx, n) }

// OnRateLimitPermit implements ratelimit.PermitObserver (see the function OnRateLimitPermit).
func (SpanEvents) OnRateLimitPermit(ctx context.Context, e ratelimit.PermitEvent) {
	OnRateLimitPermit(ctx, e)
}
