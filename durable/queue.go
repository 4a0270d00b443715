package durable

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/mediator"
)

// DefaultRetries is the classification layer of durable work: on top of what the request's
// retry policy retries, timeouts, transport errors and the circuit-open errors the handler met
// (a request it sent was refused) are tried again, later. Durable work exists for the
// dependency that is down or hung; in process they stay off because a caller is waiting.
var DefaultRetries = behaviors.RetryPolicy{RetryOnTimeout: behaviors.On, RetryOnTransport: behaviors.On, WaitForBreaker: behaviors.On}

// Queue keeps durable requests in a database: Enqueue stores them, a Deferral (NewDeferral)
// stores the requests whose in-process attempts failed, a Scheduler (NewScheduler) runs them.
// Request types are registered on it with Register. Open returns one; Close it when done.
type Queue struct {
	store   *store.Store
	reg     *registry
	policy  Policy
	clock   Clock
	rand    func() float64
	layer   behaviors.RetryPolicy // the classification layer of durable work
	recheck time.Duration
}

// Close closes the database pool the queue opened (Config.SQLitePath, Config.PostgresDSN); a
// pool given as Config.DB is left open. Shut the queue's schedulers down first.
func (q *Queue) Close() error { return q.store.Close() }

// policyFor returns the effective policy (defaults applied) of items named name.
func (q *Queue) policyFor(name string) Policy {
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

// EnqueueTx is Enqueue inside tx, a transaction on the queue's database: the item is
// dispatched only if tx commits, together with the application's own writes (a transactional
// outbox). On SQLite, whose pool has a single connection, do not use the queue outside tx
// until tx ends.
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
	name, payload, err := q.reg.encode(req)
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
	it := store.NewItem{Name: name, Payload: payload, NextAt: next, Now: now, LastError: c.lastError, ParkedKey: c.parkedKey}
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
		id      store.ItemID
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
	return Enqueued{ID: ItemID(id), Duplicate: existed}, nil
}

// Item returns one item; an error wrapping sql.ErrNoRows if there is none.
func (q *Queue) Item(ctx context.Context, id ItemID) (Item, error) {
	it, err := q.store.Item(ctx, store.ItemID(id))
	if err != nil {
		return Item{}, err
	}
	return itemOf(it), nil
}

// List returns the items f selects, in id order.
func (q *Queue) List(ctx context.Context, f Filter) ([]Item, error) {
	items, err := q.store.List(ctx, store.Filter{State: store.State(f.State), Name: f.Name, AfterID: store.ItemID(f.AfterID), Limit: f.Limit})
	if err != nil {
		return nil, err
	}
	out := make([]Item, len(items))
	for i, it := range items {
		out[i] = itemOf(it)
	}
	return out, nil
}

// Attempts lists the attempts of an item in order.
func (q *Queue) Attempts(ctx context.Context, id ItemID) ([]Attempt, error) {
	as, err := q.store.Attempts(ctx, store.ItemID(id))
	if err != nil {
		return nil, err
	}
	out := make([]Attempt, len(as))
	for i, a := range as {
		out[i] = attemptOf(a)
	}
	return out, nil
}

// Stats counts the queue's items by state and measures the oldest due item's wait.
func (q *Queue) Stats(ctx context.Context) (Stats, error) {
	st, err := q.store.Stats(ctx, q.clock.Now())
	out := Stats{Counts: make(map[ItemState]int64, len(st.Counts)), OldestDue: st.OldestDue}
	for k, v := range st.Counts {
		out.Counts[ItemState(k)] = v
	}
	return out, err
}

// retryPolicySource is implemented by the retry behavior (*behaviors.Retry): the merged policy
// a call of req runs under in process.
type retryPolicySource interface {
	Policy(ctx context.Context, req any) behaviors.RetryPolicy
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
	if errors.Is(err, ErrDeferred) || errors.Is(err, behaviors.ErrBulkheadFull) {
		return true
	}
	p := behaviors.DefaultRetryPolicy
	if src != nil {
		p = src.Policy(ctx, req)
	}
	return p.Merge(q.layer).Retries(err)
}

// nextDelay is the backoff after failed attempt n of an item named name.
func (q *Queue) nextDelay(name string, n int) time.Duration {
	return q.policyFor(name).Delay(n, q.rand())
}
