package recovery

import (
	"context"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/mediator"
)

// Behavior is the recovery behavior: it turns a panic anywhere inside it (a behavior, a
// fallback function, a validator) into a *mediator.PanicError carrying the value and the
// stack. The mediator already does this for handlers; the recovery behavior extends it to the
// behaviors. It is in mediator.StagePre at behaviors.RecoverOrder: outermost but for
// the tracing behavior (which does not panic), so no panic of the pipeline escapes Send.
type Behavior struct{}

// New returns a recovery behavior.
func New() *Behavior { return &Behavior{} }

// Placement implements mediator.PlacedBehavior: Explain shows it as "recovery", in
// mediator.StagePre, at behaviors.RecoverOrder (see the table of orders in package behaviors).
func (*Behavior) Placement() mediator.Placement {
	return mediator.Placement{Name: "recovery", Stage: mediator.StagePre, Order: behaviors.RecoverOrder}
}

// Handle calls next and recovers its panic.
func (*Behavior) Handle(ctx context.Context, req any, next mediator.Next) (resp any, err error) {
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, mediator.NewPanicError(p)
		}
	}()
	return next(ctx, req)
}
