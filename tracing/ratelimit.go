package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-go/switchboard/behaviors/ratelimit"
)

const (
	eventRateLimitWait = "switchboard.rate_limit.wait"
	keyRateLimitKey    = attribute.Key("switchboard.rate_limit.key")
	keyRateLimitWait   = attribute.Key("switchboard.rate_limit.wait")
)

// OnRateLimitPermit is a ready observer for ratelimit.Config.OnPermit: when a call waited for
// its permit, it adds a switchboard.rate_limit.wait event (the limit's key, the wait in
// seconds) to the span in ctx, so that a slow dispatch shows the time it spent waiting for the
// limit rather than in the handler. A permit free at once adds nothing; nor does a span that
// is not recording. (A refusal needs no observer: the dispatch's end records it.)
func OnRateLimitPermit(ctx context.Context, e ratelimit.PermitEvent) {
	if e.Wait <= 0 {
		return
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.AddEvent(eventRateLimitWait, trace.WithAttributes(keyRateLimitKey.String(e.Key), keyRateLimitWait.Float64(e.Wait.Seconds())))
}
