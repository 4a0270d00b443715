package durable

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/mediator"
)

// Deferral is a behavior that parks failing requests in the queue instead of failing them.
// When the pipeline inside it ends in an error worth another try, or in a circuit-open
// refusal, it persists the request and returns a *DeferredError carrying the item id. "Worth
// another try" is the request's own retry policy — the retry behavior of its pipeline, found
// at Build, so a policy that widens RetryableStatusCodes widens what is deferred too — with the
// classification of the queue's Config.Policy over it (timeouts, transport errors and open
// circuits included by default).
// The item is due after the policy's first delay, later when the error carries a Retry-After
// hint (a server's, or the open time of the breaker the failure tripped), or when an open
// breaker may let a probe through.
//
// It applies only to request types registered before Build, and never defers a dispatch
// marked mediator.Stored (a scheduler running the item: that would store it twice), a request
// whose caller's context is done by the time the pipeline returns (whatever the error: the
// caller gave up), or a request whose persistence fails (it then returns the original error
// joined with the store's, and nothing was stored).
//
// The write gives the item a token first (DeferredError.Token) and waits for the database at
// most DeferralConfig.PersistTimeout, and never past the caller's own deadline. When the
// write was sent but its answer did not come in time (or the connection broke), the item may
// or may not be stored: the deferral then returns the original error joined with an
// *OutcomeUnknownError (matching ErrOutcomeUnknown) that carries the token, never a failure,
// so the caller can find the item (Queue.ItemByToken) or enqueue the request again under the
// token (WithToken) without storing it twice.
//
// A deferred request runs again later through the whole pipeline, so handlers of deferrable
// requests must be idempotent.
type Deferral struct {
	q        *Queue
	classify func(error) bool  // DeferralConfig.Classifier; nil: the request's retry policy with the queue's layer
	src      retryPolicySource // the retry behavior of the request type's pipeline, bound at Build
	persist  time.Duration     // DeferralConfig.PersistTimeout, or its default
}

// DeferralConfig configures a Deferral.
type DeferralConfig struct {
	// Classifier decides which errors are deferred, in place of the request's retry policy.
	// Circuit-open refusals are deferred whatever it says. Default nil: the request's own retry
	// policy (the retry behavior of its pipeline) with the classification of the queue's
	// Config.Policy over it, so that what is retried in process and what is deferred are
	// configured once.
	Classifier behaviors.Classifier
	// PersistTimeout bounds the write of a deferred request; the caller's own deadline, when
	// sooner, bounds it too. A write that runs out of time before it was sent fails (nothing
	// is stored, and the caller gets the original error with the store's); one that was sent
	// ends with an outcome unknown (see Deferral). Default 5 seconds (DefaultPersistTimeout):
	// the insert of one row takes milliseconds, and a database still silent after seconds is
	// hung or gone, so a caller without a deadline of its own learns it soon rather than
	// waiting on it, while a lock wait or a pool's brief exhaustion under load still fits.
	PersistTimeout time.Duration
}

// DefaultPersistTimeout is the default of DeferralConfig.PersistTimeout.
const DefaultPersistTimeout = 5 * time.Second

// Validate reports every problem of cfg, joined, each naming its field: a negative
// PersistTimeout. NewDeferral calls it.
func (cfg DeferralConfig) Validate() error {
	if cfg.PersistTimeout < 0 {
		return fmt.Errorf("durable: NewDeferral: PersistTimeout %v is negative", cfg.PersistTimeout)
	}
	return nil
}

// NewDeferral returns the deferral behavior of q; register it with mediator.Use before Build,
// and register the request types it is to defer (Register) before that Build too. It panics,
// as Register does on a programmer's error, on a nil q and on a cfg that Validate refuses.
func NewDeferral(q *Queue, cfg DeferralConfig) *Deferral {
	if q == nil {
		panic("durable: NewDeferral: nil queue")
	}
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	persist := cfg.PersistTimeout
	if persist == 0 {
		persist = DefaultPersistTimeout
	}
	return &Deferral{q: q, classify: cfg.Classifier, persist: persist}
}

// Placement implements mediator.PlacedBehavior: Explain shows it as "durable-deferral", in
// mediator.StageDefault, at behaviors.DeferralOrder: inside a fallback, outside retry and the circuit breaker, so it
// sees the final result of the in-process attempts (see the table of orders in package behaviors).
func (d *Deferral) Placement() mediator.Placement {
	return mediator.Placement{Name: "durable-deferral", Stage: mediator.StageDefault, Order: behaviors.DeferralOrder}
}

// AppliesTo implements mediator.SelectiveBehavior: only registered request types are
// deferrable.
func (d *Deferral) AppliesTo(info mediator.RequestInfo) bool {
	return !info.Stream && d.q.reg.has(info.Request)
}

// Built implements mediator.BuiltBehavior: once a Build that includes the deferral succeeded,
// the queue refuses new registrations (Register panics), since that Build's pipelines would never
// defer them. A failed Build leaves it open.
func (d *Deferral) Built() { d.q.reg.seal() }

// Bind implements mediator.BindingBehavior: it finds the retry behavior of the request type's
// pipeline, whose policy decides what is deferred.
func (d *Deferral) Bind(info mediator.RequestInfo) (mediator.Behavior, error) {
	b := *d
	b.src = findPolicySource(info.Behaviors)
	return &b, nil
}

// Handle implements mediator.Behavior.
func (d *Deferral) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	resp, err := next(ctx, req)
	if err == nil || ctx.Err() != nil {
		// Success, or the caller has gone: its own cancellation, or any error that came back
		// after it gave up, is returned as is. A caller that abandoned a request does not get
		// it run later in its name.
		return resp, err
	}
	if mediator.MarksOf(ctx, req).Has(mediator.Stored) {
		return resp, err
	}
	name, ok := d.q.reg.nameOf(req)
	if !ok {
		return resp, err
	}
	var delay time.Duration
	var parked string
	if open, ok := errors.AsType[*breaker.OpenError](err); ok {
		// Parked on the breaker: due when it may let a probe through, at most Recheck from
		// now, and at once when it closes.
		delay, parked = min(open.Remaining, d.q.recheck), open.Key
	} else if !errors.Is(err, breaker.ErrOpen) {
		pol := d.q.policyFor(name)
		retryable := false
		if d.classify != nil {
			retryable = d.classify(err)
		} else {
			retryable = d.q.retries(ctx, req, d.src, pol, err)
		}
		if !retryable {
			return resp, err
		}
		delay = max(pol.Delay(1, d.q.rand()), behaviors.RetryAfter(err))
	}
	// The write is bounded by the caller's deadline: a caller is never kept past it. What it
	// could not finish is said: failed when nothing was sent, unknown (with the item's token)
	// when the insert was sent and its answer did not come.
	pctx, cancel := context.WithTimeout(ctx, d.persist)
	defer cancel()
	res, perr := d.q.Enqueue(pctx, req, WithDelay(delay), withLastError(err.Error()), parkedOn(parked))
	if perr != nil {
		if errors.Is(perr, ErrOutcomeUnknown) {
			return resp, fmt.Errorf("%w (deferral outcome unknown: %w)", err, perr)
		}
		return resp, fmt.Errorf("%w (deferral failed, nothing stored: %w)", err, perr)
	}
	return nil, &DeferredError{ItemID: res.ID, Duplicate: res.Duplicate, Token: res.Token, Cause: err}
}

func withLastError(msg string) EnqueueOption {
	return func(c *enqueueConfig) { c.lastError = msg }
}

func parkedOn(key string) EnqueueOption {
	return func(c *enqueueConfig) { c.parkedKey = key }
}

// Dispatch describes the dispatch a context belongs to: a scheduler's attempt of an item, or a
// replay of a dead letter (Queue.Replay).
type Dispatch struct {
	// ItemID is the item being dispatched, or the dead item a replayed letter stands for; use
	// it (or a key in the request) to make the handler idempotent: it is the same for every
	// attempt and every replay of the request. 0 in a replay of a letter RunBatch captured,
	// which has no item (DeadLetter is then the key to use).
	ItemID ItemID
	// Name is the item's registered request name.
	Name string
	// Attempt is the durable attempt number, from 1; 0 in a replay.
	Attempt int
	// Instance is the id of the dispatching scheduler instance; empty in a replay.
	Instance string
	// DeadLetter is the letter being replayed; 0 in a scheduler's dispatch.
	DeadLetter DeadLetterID
	// Replay identifies this replay of the letter, a new id for every replay; empty in a
	// scheduler's dispatch.
	Replay string
}

var dispatchKey = mediator.NewContextKey[Dispatch]("durable.dispatch")

// FromContext returns the dispatch when ctx belongs to a scheduler's dispatch of req, or to a
// replay of the dead letter whose request req is, req being the request the handler was given.
// The requests that handler sends are not that dispatch: for them it reports false.
func FromContext(ctx context.Context, req any) (Dispatch, bool) { return dispatchKey.GetFor(ctx, req) }
