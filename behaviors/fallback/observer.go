package fallback

import "context"

// Observer is the observer of fallbacks attached to a whole mediator
// (mediator.Mediator.Observe): a fallback bound into its pipelines calls OnFallback for each
// failure it handled, after the observers of Config.OnFallback. metrics.Recorder,
// tracing.SpanEvents and logging.Behavior implement it.
type Observer interface {
	OnFallback(ctx context.Context, f Fallback)
}
