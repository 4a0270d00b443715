package behaviors

import (
	"context"

	"github.com/switchboard-go/switchboard/mediator"
)

// RecoverOrder is the default order of Recover within mediator.StagePre: below every other
// behavior of this package, so Recover is the outermost behavior of a pipeline.
const RecoverOrder = -1000

// Recover is a behavior that turns a panic anywhere inside it (a behavior, a fallback
// function, a validator) into a *mediator.PanicError carrying the value and the stack. The
// mediator already does this for handlers; Recover extends it to the behaviors. It is in
// mediator.StagePre at RecoverOrder: outermost, so no panic of the pipeline escapes Send.
type Recover struct{}

// NewRecover returns a Recover behavior.
func NewRecover() *Recover { return &Recover{} }

// Name returns "recover".
func (*Recover) Name() string { return "recover" }

// Stage returns mediator.StagePre.
func (*Recover) Stage() mediator.Stage { return mediator.StagePre }

// Order returns RecoverOrder.
func (*Recover) Order() int { return RecoverOrder }

// Handle calls next and recovers its panic.
func (*Recover) Handle(ctx context.Context, req any, next mediator.Next) (resp any, err error) {
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, mediator.NewPanicError(p)
		}
	}()
	return next(ctx, req)
}
