package durable

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/bulkhead"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/mediator"
)

// Config configures a Queue.
type Config struct {
	// Store keeps the items. Required.
	Store *Store
	// Registry maps request types to names and codecs. Required.
	Registry *Registry
	// Policy is the retry policy of items whose registration has none. Zero fields take the
	// DefaultPolicy values. NewQueue refuses a policy that Policy.Validate rejects.
	Policy Policy
	// Clock tells the time. Default SystemClock.
	Clock Clock
	// Rand returns uniform random numbers in [0, 1) for backoff jitter; it is called from
	// several goroutines at once. Default math/rand/v2.
	Rand func() float64
	// Recheck is the longest an item the scheduler could not start waits before it is looked
	// at again: one refused by an open circuit breaker (however long the breaker says it stays
	// open: a breaker tripped by hand for a day, then reset in another instance, must not hold
	// it for a day), or one whose request name this instance does not know (during a rolling
	// deploy an instance on the newer version does). Items put off by a breaker are also freed
	// at once when it closes. Default 1 minute.
	Recheck time.Duration
	// Retries is the layer merged over each request's own in-process retry policy (the Retry
	// behavior of its pipeline, else retry.DefaultPolicy) to decide which failures of
	// durable work are worth another try: the deferral defers them, the scheduler tries them
	// again. Only its classification fields count (RetryOnTimeout, RetryOnTransport,
	// WaitForBreaker, RetryableStatusCodes, Classifier). Zero fields keep DefaultRetries' values,
	// which turn on timeouts, transport errors and circuit-open errors: durable work exists for
	// the dependency that is down or hung, while in process those stay off because a caller
	// is waiting.
	Retries retry.Policy
}

// DefaultRetries is the classification layer of durable work: on top of what the request's
// retry policy retries, timeouts, transport errors and the circuit-open errors the handler met
// (a request it sent was refused) are tried again, later. Durable work exists for the
// dependency that is down or hung; in process they stay off because a caller is waiting.
var DefaultRetries = retry.Policy{RetryOnTimeout: behaviors.On, RetryOnTransport: behaviors.On, WaitForBreaker: behaviors.On}

// Queue enqueues requests durably and is shared by the Deferral behavior and the Scheduler.
type Queue struct {
	store   *Store
	reg     *Registry
	policy  Policy
	clock   Clock
	rand    func() float64
	layer   retry.Policy // the classification layer of durable work
	recheck time.Duration
}

// NewQueue returns a Queue over cfg.Store and cfg.Registry.
func NewQueue(cfg Config) (*Queue, error) {
	if cfg.Store == nil {
		return nil, errors.New("durable: NewQueue: Store is required")
	}
	if cfg.Registry == nil {
		return nil, errors.New("durable: NewQueue: Registry is required")
	}
	if err := cfg.Policy.Validate(); err != nil {
		return nil, fmt.Errorf("durable: NewQueue: Policy: %w", err)
	}
	if err := cfg.Retries.Validate(); err != nil {
		return nil, fmt.Errorf("durable: NewQueue: Retries: %w", err)
	}
	if cfg.Recheck < 0 {
		return nil, fmt.Errorf("durable: NewQueue: Recheck %v is negative", cfg.Recheck)
	}
	if cfg.Recheck == 0 {
		cfg.Recheck = time.Minute
	}
	q := &Queue{store: cfg.Store, reg: cfg.Registry, policy: cfg.Policy, clock: cfg.Clock, rand: cfg.Rand,
		layer: DefaultRetries.Merge(cfg.Retries), recheck: cfg.Recheck}
	if q.clock == nil {
		q.clock = SystemClock
	}
	if q.rand == nil {
		q.rand = rand.Float64
	}
	return q, nil
}

// Store returns the queue's store.
func (q *Queue) Store() *Store { return q.store }

// Registry returns the queue's registry.
func (q *Queue) Registry() *Registry { return q.reg }

// Clock returns the queue's clock.
func (q *Queue) Clock() Clock { return q.clock }

// PolicyFor returns the effective policy (defaults applied) of items named name.
func (q *Queue) PolicyFor(name string) Policy {
	return q.reg.policyFor(name, q.policy).withDefaults()
}

// Deduplicated is implemented by request types that carry their own dedupe key. The
// DedupeKey option wins over it.
type Deduplicated interface{ DedupeKey() string }

// Ordered is implemented by request types that carry their own ordering key. The OrderingKey
// option wins over it.
type Ordered interface{ OrderingKey() string }

// EnqueueOption configures one Enqueue.
type EnqueueOption func(*enqueueConfig)

type enqueueConfig struct {
	at        time.Time
	after     time.Duration
	dedupe    *string
	ordering  *string
	lastError string
	parkedKey string
}

// RunAt makes the item due at t. Default: now.
func RunAt(t time.Time) EnqueueOption { return func(c *enqueueConfig) { c.at = t } }

// RunAfter makes the item due d from now.
func RunAfter(d time.Duration) EnqueueOption { return func(c *enqueueConfig) { c.after = d } }

// DedupeKey sets the item's dedupe key: while an item with the same key is pending or running,
// Enqueue inserts nothing and reports that item. An empty key disables deduplication.
func DedupeKey(key string) EnqueueOption { return func(c *enqueueConfig) { c.dedupe = &key } }

// OrderingKey sets the item's ordering key: items with the same key are dispatched one at a
// time, in the order they were enqueued; an item waits while an earlier one is pending
// (including backing off) or running.
func OrderingKey(key string) EnqueueOption { return func(c *enqueueConfig) { c.ordering = &key } }

// Enqueued reports the result of Enqueue.
type Enqueued struct {
	// ID is the new item, or the item already pending under the dedupe key.
	ID ItemID
	// Duplicate is true when nothing was inserted because of the dedupe key.
	Duplicate bool
}

// Enqueue persists req (a registered request pointer) to be dispatched by a Scheduler.
func (q *Queue) Enqueue(ctx context.Context, req any, opts ...EnqueueOption) (Enqueued, error) {
	return q.enqueue(ctx, nil, req, opts)
}

// EnqueueTx is Enqueue inside tx, a transaction on the store's database: the item is
// dispatched only if tx commits, together with the application's own writes. See
// Store.EnqueueTx.
func (q *Queue) EnqueueTx(ctx context.Context, tx *sql.Tx, req any, opts ...EnqueueOption) (Enqueued, error) {
	if tx == nil {
		return Enqueued{}, errors.New("durable: EnqueueTx: nil transaction")
	}
	return q.enqueue(ctx, tx, req, opts)
}

func (q *Queue) enqueue(ctx context.Context, tx *sql.Tx, req any, opts []EnqueueOption) (Enqueued, error) {
	var c enqueueConfig
	for _, o := range opts {
		o(&c)
	}
	name, payload, err := q.reg.Encode(req)
	if err != nil {
		return Enqueued{}, err
	}
	now := q.clock.Now()
	next := now
	switch {
	case !c.at.IsZero():
		next = c.at
	case c.after > 0:
		next = now.Add(c.after)
	}
	it := NewItem{Name: name, Payload: payload, NextAt: next, Now: now, LastError: c.lastError, ParkedKey: c.parkedKey}
	if c.dedupe != nil {
		it.DedupeKey = *c.dedupe
	} else if d, ok := req.(Deduplicated); ok {
		it.DedupeKey = d.DedupeKey()
	}
	if c.ordering != nil {
		it.OrderingKey = *c.ordering
	} else if o, ok := req.(Ordered); ok {
		it.OrderingKey = o.OrderingKey()
	}
	var (
		id      ItemID
		existed bool
	)
	if tx != nil {
		id, existed, err = q.store.EnqueueTx(ctx, tx, it)
	} else {
		id, existed, err = q.store.Enqueue(ctx, it)
	}
	if err != nil {
		return Enqueued{}, err
	}
	return Enqueued{ID: id, Duplicate: existed}, nil
}

// Stats counts the store's items by state and measures the oldest due item's wait.
func (q *Queue) Stats(ctx context.Context) (Stats, error) {
	return q.store.Stats(ctx, q.clock.Now())
}

// retryPolicySource is implemented by the retry behavior (*retry.Behavior): the merged policy
// a call of req runs under in process.
type retryPolicySource interface {
	Policy(ctx context.Context, req any) retry.Policy
}

// findPolicySource returns the first behavior of a pipeline that knows the request's retry
// policy, or nil.
func findPolicySource(bs []mediator.Behavior) retryPolicySource {
	for _, b := range bs {
		if src, ok := b.(retryPolicySource); ok {
			return src
		}
	}
	return nil
}

// retries classifies a failure of durable work: the request's own retry policy (from src, the
// retry behavior of its pipeline; the default policy without one) with the queue's Retries
// layer over it.
func (q *Queue) retries(ctx context.Context, req any, src retryPolicySource, err error) bool {
	// The handler met back-pressure (a request it sent was refused by its bulkhead), or its own
	// inner work was deferred: the item's work can succeed later. (A breaker's refusal met by
	// the handler is the Retries layer's WaitForBreaker.)
	if errors.Is(err, ErrDeferred) || errors.Is(err, bulkhead.ErrFull) {
		return true
	}
	p := retry.DefaultPolicy
	if src != nil {
		p = src.Policy(ctx, req)
	}
	return p.Merge(q.layer).Retries(err)
}

// nextDelay is the backoff after failed attempt n of an item named name.
func (q *Queue) nextDelay(name string, n int) time.Duration {
	return q.PolicyFor(name).Delay(n, q.rand())
}
