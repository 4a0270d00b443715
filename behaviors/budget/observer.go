package budget

import "context"

// Observer is the observer of a budget's spending attached to a whole mediator
// (mediator.Mediator.Observe): a behavior drawing on the budget (retry, hedge) adds the
// mediator's Observers to the budget when it is bound, and each hears every Spend after the
// observers of Config.OnSpend, once however many pipelines share the budget.
// metrics.Recorder and logging.Behavior implement it.
type Observer interface {
	OnBudgetSpend(ctx context.Context, s Spend)
}

// Observe adds those of obs that implement Observer to the budget's observers; one added
// already is kept once. The retry and hedge behaviors call it when they are bound into a
// mediator's pipelines, with the mediator's observers.
func (b *Budget) Observe(obs []any) { b.observers.Add(obs) }

// tell calls the observers of the budget with s.
func (b *Budget) tell(ctx context.Context, s Spend) {
	for _, on := range b.cfg.OnSpend {
		on(ctx, s)
	}
	for _, o := range b.observers.Load() {
		o.OnBudgetSpend(ctx, s)
	}
}
