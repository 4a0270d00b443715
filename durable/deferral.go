package durable

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable/internal/gate"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// Deferral is a behavior that stores failing requests in the queue instead of failing them: when
// the pipeline inside it ends in an error worth another try (the request's retry policy under
// Config.Policy's classification) or a circuit-open refusal, it stores the request, due after the
// policy's first delay or a Retry-After hint, and returns a *DeferredError. It defers only types
// registered before Build, and never a dispatch marked mediator.Stored, a request whose caller
// gave up (cancelled, or its deadline passed, before the in-process attempts ended: the error
// then says "not deferred" and why, and still matches the context's error), or one it fails to
// store (it returns the error joined with the store's, or with an *OutcomeUnknownError). A
// deferred request runs again through the whole pipeline: its handler must be idempotent.
type Deferral struct {
	q        *Queue
	err      error             // NewDeferral's arguments' problem, for Validate
	classify func(error) bool  // DeferralConfig.Classifier; nil: the request's retry policy with the queue's layer
	src      retryPolicySource // the retry behavior of the request type's pipeline, bound at Build
	persist  time.Duration     // DeferralConfig.PersistTimeout, or its default
}

// DeferralConfig configures a Deferral.
type DeferralConfig struct {
	// Classifier decides which errors are deferred (circuit-open refusals always are). Default
	// nil: the request's own retry policy with Config.Policy's classification over it, so what
	// is retried in process and what is deferred are configured once.
	Classifier behaviors.Classifier
	// PersistTimeout bounds the write of a deferred request, as does the caller's deadline.
	// Default 5 seconds (DefaultPersistTimeout): one insert takes milliseconds, and a database
	// silent for seconds is hung or gone, so a caller without a deadline learns it soon, while
	// a lock wait or a briefly exhausted pool still fits.
	PersistTimeout time.Duration
}

// Validate reports each problem of cfg, naming its field.
func (cfg DeferralConfig) Validate() error {
	if cfg.PersistTimeout < 0 {
		return fmt.Errorf("durable: NewDeferral: PersistTimeout %v is negative", cfg.PersistTimeout)
	}
	return nil
}

// NewDeferral returns q's deferral, to Use before Build, after Register. A nil q or an invalid
// cfg is reported by Validate, so the mediator's Build fails with it, as it does with the
// errors of q's failed registrations.
func NewDeferral(q *Queue, cfg DeferralConfig) *Deferral {
	if q == nil {
		return &Deferral{err: errors.New("durable: NewDeferral: nil queue")}
	}
	persist := cfg.PersistTimeout
	if persist == 0 {
		persist = DefaultPersistTimeout
	}
	return &Deferral{q: q, err: cfg.Validate(), classify: cfg.Classifier, persist: persist}
}

// Validate implements mediator.ValidatingBehavior: NewDeferral's arguments, and every
// registration and schedule that failed on the queue.
func (d *Deferral) Validate() error {
	if d.q == nil {
		return d.err
	}
	return errors.Join(d.err, d.q.reg.problems())
}

// Placement implements mediator.PlacedBehavior: behaviors.DeferralOrder, outside
// retry and the breaker, so it sees the final in-process result.
func (d *Deferral) Placement() mediator.Placement {
	return mediator.Placement{Name: "durable-deferral", Stage: mediator.StageDefault, Order: behaviors.DeferralOrder}
}

// AppliesTo implements mediator.SelectiveBehavior.
func (d *Deferral) AppliesTo(info mediator.RequestInfo) bool {
	return d.q != nil && !info.Stream && d.q.reg.has(info.Request)
}

// Built implements mediator.BuiltBehavior: Register then fails.
func (d *Deferral) Built() {
	if d.q != nil {
		d.q.reg.seal()
	}
}

// Bind implements mediator.BindingBehavior.
func (d *Deferral) Bind(info mediator.RequestInfo) (mediator.Behavior, error) {
	b := *d
	b.src = findPolicySource(info.Behaviors)
	return &b, nil
}

// Handle implements mediator.Behavior.
func (d *Deferral) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	resp, err := next(ctx, req)
	if err == nil || mediator.MarksOf(ctx, req).Has(mediator.Stored) {
		return resp, err
	}
	name, ok := d.q.reg.nameOf(req)
	if !ok {
		return resp, err
	}
	if ctx.Err() != nil {
		// The caller has gone (cancelled, or its deadline passed) before the in-process
		// attempts ended: a caller that abandoned a request does not get it run later in its
		// name, nor is it kept past its deadline by the write. Its cancellation, or any error
		// that came back after it gave up, is returned saying so, since the failure's log line
		// would otherwise not tell why this request was not deferred.
		return resp, &notDeferredError{err: err, ctx: ctx.Err()}
	}
	var delay time.Duration
	var parked string
	if open, ok := errors.AsType[*breaker.OpenError](err); ok {
		// Parked on the breaker: due when it may let a probe through (spread a little after it,
		// as the scheduler parks), and at once when it closes. A breaker whose probes are out
		// (no time left) has the item due now: the scheduler parks it for their verdict.
		delay, parked = open.Remaining+time.Duration(d.q.rand()*float64(open.Remaining)/10), open.Key
	} else if !errors.Is(err, breaker.ErrOpen) {
		pol := d.q.policyFor(name)
		retryable := gate.Retryable(err, func(err error) bool {
			if d.classify != nil {
				return d.classify(err)
			}
			return d.q.retries(ctx, req, d.src, pol, err)
		})
		if !retryable {
			return resp, err
		}
		delay = max(pol.Delay(1, d.q.rand()), behaviors.RetryAfter(err))
		if tripped, ok := errors.AsType[*breaker.TrippedError](err); ok {
			parked = tripped.Key // its failure opened the breaker: freed when it closes
		}
	}
	// The write is bounded by the caller's deadline: a caller is never kept past it. What it
	// could not finish is said: failed when nothing was sent, unknown (with the item's token)
	// when the insert was sent and its answer did not come.
	pctx, cancel := context.WithTimeout(ctx, d.persist)
	defer cancel()
	res, perr := d.q.Enqueue(pctx, req, WithDelay(delay), deferredFrom(err), parkedOn(parked), dueByDeadline)
	if perr != nil {
		if errors.Is(perr, ErrOutcomeUnknown) {
			return resp, fmt.Errorf("%w (deferral outcome unknown: %w)", err, perr)
		}
		return resp, fmt.Errorf("%w (deferral failed, nothing stored: %w)", err, perr)
	}
	return nil, &DeferredError{ItemID: res.ID, Duplicate: res.Duplicate, Token: res.Token, Cause: err}
}

// notDeferredError is the error of a failed request the deferral did not store because its
// caller's context ended first. It says so, and matches both the request's error and the
// context's (context.Canceled, context.DeadlineExceeded), so it stays the caller's
// cancellation for every behavior and observer outside the deferral.
type notDeferredError struct {
	err error // the pipeline's
	ctx error // the caller's context's
}

func (e *notDeferredError) Error() string {
	why := "the caller's context ended (" + e.ctx.Error() + ")"
	switch {
	case errors.Is(e.ctx, context.DeadlineExceeded):
		why = "the caller's deadline passed"
	case errors.Is(e.ctx, context.Canceled):
		why = "the caller cancelled it"
	}
	return e.err.Error() + " (not deferred: " + why + " before its in-process attempts ended)"
}

func (e *notDeferredError) Unwrap() []error { return []error{e.err, e.ctx} }

// deferredFrom marks the item the deferral stores: its last error is err, the in-process
// attempts' failure, and it is deferred, so that its first stored attempt is a retry (see
// redispatch).
func deferredFrom(err error) EnqueueOption {
	msg := err.Error()
	return func(c *enqueueConfig) { c.lastError, c.deferred = msg, true }
}

// dueByDeadline makes an item whose first try would come after its deadline (its policy's
// MaxAge) due at the deadline instead of failing the enqueue: a deferred request then ends as
// a dead letter saying its deadline passed, where an operator sees it.
func dueByDeadline(c *enqueueConfig) { c.dueByDeadline = true }

func parkedOn(key string) EnqueueOption {
	return func(c *enqueueConfig) { c.parkedKey = key }
}

// Dispatch is the scheduler's attempt of an item, or the replay of a dead letter, that a
// context belongs to.
type Dispatch struct {
	// ItemID is the item, or the dead item a replayed letter stands for: the same in every
	// attempt and replay, a key for idempotence. 0 for a RunBatch letter (use DeadLetter).
	ItemID     record.ItemID
	Name       string
	Attempt    int                 // the durable attempt number, from 1; 0 in a replay
	Instance   string              // the dispatching scheduler instance; empty in a replay
	DeadLetter record.DeadLetterID // the letter replayed; 0 in a scheduler's dispatch
	Replay     string              // this replay's own id; empty in a scheduler's dispatch
}

var dispatchKey = mediator.NewContextKey[Dispatch]("durable.dispatch")

// FromContext returns the dispatch of req, the handler's request (the requests
// it sends get false).
func FromContext(ctx context.Context, req any) (Dispatch, bool) { return dispatchKey.GetFor(ctx, req) }
