package retry

import "context"

// Observer is the observer of retries attached to a whole mediator
// (mediator.Mediator.Observe): a retry behavior bound into its pipelines calls OnRetry for
// each retry, after the observers of Config.OnRetry. metrics.Recorder, tracing.SpanEvents and
// logging.Behavior implement it.
type Observer interface {
	OnRetry(ctx context.Context, e Event)
}
