package hedge

import "context"

// Observer is the observer of hedged calls attached to a whole mediator
// (mediator.Mediator.Observe): a hedge behavior bound into its pipelines calls OnHedge for
// each step of a hedged call, after the observers of Config.OnHedge. tracing.SpanEvents and
// logging.Behavior implement it.
type Observer interface {
	OnHedge(ctx context.Context, n Notice)
}
