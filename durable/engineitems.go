package durable

import (
	"context"
	"errors"
	"reflect"
	"sync"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/budget"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// engineItems is the queue's registrations as an instance's engine sees them (executor.Items,
// and the gate's budget choice): with the sender, whose pipelines say each request type's
// in-process retry policy and budget, cached per type and per name.
type engineItems struct {
	q      *Queue
	sender mediator.Sender
	log    *zap.Logger

	sources sync.Map // reflect.Type → retryPolicySource (nil interface when none)
	budgets sync.Map // request name → budgetChoice
}

func newEngineItems(q *Queue, sender mediator.Sender, log *zap.Logger) *engineItems {
	return &engineItems{q: q, sender: sender, log: log}
}

// Policy implements executor.Items.
func (e *engineItems) Policy(name string) retry.Policy { return e.q.policyFor(name) }

// Decode implements executor.Items.
func (e *engineItems) Decode(name string, payload []byte) (any, bool, error) {
	req, err := e.q.reg.decode(name, payload)
	if errors.Is(err, ErrUnknownRequest) {
		return nil, false, err
	}
	return req, true, err
}

// Context implements executor.Items: the item's metadata (Config.Propagators), the marks of a
// stored dispatch (no fallback answers for the handler, one attempt, never deferred again;
// urgent for a priority above the default) and its Dispatch.
func (e *engineItems) Context(parent context.Context, c *store.Claimed, req any, instance string) context.Context {
	ctx := e.q.withMetadata(parent, c.Metadata, e.log, record.ItemID(c.ID), c.Name)
	marks := mediator.Unattended | mediator.SingleAttempt | mediator.Stored
	if c.Priority > 0 {
		marks |= mediator.Urgent
	}
	ctx = mediator.WithMarks(ctx, req, marks)
	return e.q.withDispatch(ctx, req, Dispatch{ItemID: record.ItemID(c.ID), Name: c.Name, Attempt: c.Attempts, Instance: instance}, e.log)
}

// Retries implements executor.Items: the request's own retry policy with the classification of
// its durable policy over it (Queue.retries).
func (e *engineItems) Retries(ctx context.Context, name string, req any, err error) bool {
	return e.q.retries(ctx, req, e.policySource(req), e.q.policyFor(name), err)
}

// policySource finds the retry behavior of req's pipeline, when the sender can list it.
func (e *engineItems) policySource(req any) retryPolicySource {
	t := reflect.TypeOf(req)
	if v, ok := e.sources.Load(t); ok {
		src, _ := v.(retryPolicySource)
		return src
	}
	src := findPolicySource(e.pipelineOf(req))
	e.sources.Store(t, src)
	return src
}

// pipelineOf returns the behaviors of req's pipeline, when the sender can list them.
func (e *engineItems) pipelineOf(req any) []mediator.Behavior {
	if p, ok := e.sender.(pipelineLister); ok {
		bs, _ := p.Pipeline(reflect.TypeOf(req))
		return bs
	}
	return nil
}

// pipelineLister is implemented by *mediator.Mediator.
type pipelineLister interface {
	Pipeline(requestType reflect.Type) ([]mediator.Behavior, error)
}

// budgetChoice is what budgetFor decided for a request name.
type budgetChoice struct {
	b                    *budget.Budget
	failOver, countCalls bool
}

// budgetFor returns the budget the re-dispatches of req (registered as name) are charged to,
// whether one it refuses ends the item (FailOverBudget), and whether the gate counts the first
// attempts of req's items as calls itself: when the budget is the registration's own
// (WithRetryBudget) and no behavior of req's pipeline holds it (budget.SharedBy), nothing else
// counts them, and the budget would allow its floor alone. It is decided once per request name:
// the registration and the pipeline do not change once the scheduler runs, and the pipeline's
// behaviors need not be looked through for every item.
func (e *engineItems) budgetFor(name string, req any) (b *budget.Budget, failOver, countCalls bool) {
	if v, ok := e.budgets.Load(name); ok {
		c := v.(budgetChoice)
		return c.b, c.failOver, c.countCalls
	}
	c := e.chooseBudget(name, req)
	e.budgets.Store(name, c)
	return c.b, c.failOver, c.countCalls
}

func (e *engineItems) chooseBudget(name string, req any) budgetChoice {
	var c budgetChoice
	if reg := e.q.reg.lookupName(name); reg != nil {
		c.failOver = reg.over == FailOverBudget
		if reg.budget != nil {
			c.b, c.countCalls = reg.budget, !budget.SharedBy(reg.budget, nil, e.pipelineOf(req))
			return c
		}
	}
	if h, ok := e.policySource(req).(budget.Holder); ok {
		c.b = h.RetryBudget()
	}
	return c
}

// guardOf returns the breaker registry and key function a registration's WithBreaker names for
// the items of name; a nil registry when it names none (Config.Default's then guards them).
func (r *registry) guardOf(name string) (*breaker.Registry, func(req any) string) {
	reg := r.lookupName(name)
	if reg == nil || reg.guard == nil {
		return nil, nil
	}
	return reg.guard.reg, reg.guard.key
}
