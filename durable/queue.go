package durable

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/bulkhead"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/mediator"
)

// Queue keeps durable requests in a database: Enqueue stores them, a Deferral (NewDeferral)
// stores the requests whose in-process attempts failed, and the scheduler Start runs in each
// instance dispatches them. Request types are registered on it with Register. Open returns
// one; Shutdown and Close it when done.
type Queue struct {
	mu      sync.Mutex
	sched   *scheduler // started by Start
	stopped bool       // Shutdown was called

	store   *store.Store
	reg     *registry
	clock   behaviors.Clock
	rand    func() float64
	recheck time.Duration

	deadLetters // Config.OnDead, Logger and ReplayLease (deadletters.go)
	// propagators carry context values with each item (Config.Propagators).
	propagators []Propagator
	schedules   timetable // registered by Schedule
	// maxPayload is Config.MaxPayloadBytes, or its default.
	maxPayload int
}

// Close closes the database pool the driver opened (sqlite.Open, postgres.Open); a pool the
// caller passed (sqlite.New, postgres.New) is left open. Call Shutdown first.
func (q *Queue) Close() error { return q.store.Close() }

// Start runs this instance's scheduler for q: it claims due items for its free workers (FOR
// UPDATE SKIP LOCKED on PostgreSQL, so instances sharing a database divide the work, each
// item going to one instance at a time), holds a lease on each with heartbeats, dispatches
// each through sender (the *mediator.Mediator, built) as exactly one attempt, and records the
// outcome under a fence, so a late completion from a worker whose lease ran out is rejected.
// Call it in every instance, once the mediator is built.
//
// It refuses wiring mistakes, each of which would otherwise fail or crash on the first item: a
// nil sender (a nil *mediator.Mediator included), a mediator that was not built (matching
// mediator.ErrNotBuilt), and one without a handler for some of the request types registered
// on q or scheduled on it (one error naming every such type, each matching
// mediator.ErrNoHandler). A sender that is not a *mediator.Mediator and does not list its
// pipelines cannot be asked and is taken as it is; an item it turns away with
// mediator.ErrNoHandler for the item's type waits, not attempted, as an item of a name this
// instance does not know does (Config.Recheck), for an instance that can run it.
//
// It refuses a cfg with negative values or durations that would derive to zero, and fails
// with ErrStarted while the scheduler runs and with ErrStopped once Shutdown was called: a
// queue schedules once.
func (q *Queue) Start(sender mediator.Sender, cfg SchedulerConfig) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.stopped:
		return ErrStopped
	case q.sched != nil:
		return ErrStarted
	}
	s, err := newScheduler(q, sender, cfg)
	if err != nil {
		return err
	}
	if err := q.checkHandlers(sender); err != nil {
		return err
	}
	if err := s.Start(); err != nil {
		return err
	}
	q.sched = s
	return nil
}

// Shutdown stops the scheduler Start started and waits for it to stop: it claims nothing
// more, releases claimed items that have not started, waits for the items being dispatched
// and writes their outcomes. If ctx ends first, it cancels the dispatches' contexts; the
// handlers then have SchedulerConfig.ShutdownGrace to return (they must honour cancellation),
// and their attempts are recorded as interrupted. Outcomes are written as each handler
// returns; once every handler has returned (or ShutdownGrace after ctx ended has passed), the
// database has what is left of the grace to take the rest, and the store call still in flight
// when the grace ends is cancelled. So Shutdown returns within ctx's deadline plus
// ShutdownGrace, even when a handler ignores cancellation or the database is gone; what it
// could not finish keeps its lease until the lease runs out and is then swept and run again,
// never lost.
//
// Every call, concurrent ones included, waits for the same stop and returns its outcome: nil
// when every item was completed or released, otherwise an error saying what was left (items
// interrupted, handlers that had not returned, outcomes the database did not take) and why.
// Shutdown before Start returns nil, and Start then fails with ErrStopped. A handler that
// ignores cancellation is the only goroutine that may outlive Shutdown.
func (q *Queue) Shutdown(ctx context.Context) error {
	q.mu.Lock()
	q.stopped = true
	s := q.sched
	q.mu.Unlock()
	if s == nil {
		return nil
	}
	return s.Shutdown(ctx)
}

// policyFor returns the policy of items named name: the registration's WithPolicy over the
// queue's policy over the durable defaults.
func (q *Queue) policyFor(name string) retry.Policy {
	return q.reg.policyFor(name)
}

// deduplicated is a request type that carries its own dedupe key (see WithDedupeKey).
type deduplicated interface{ DedupeKey() string }

// ordered is a request type that carries its own ordering key (see WithOrderingKey).
type ordered interface{ OrderingKey() string }

// EnqueueOption configures one Enqueue.
type EnqueueOption func(*enqueueConfig)

type enqueueConfig struct {
	at        time.Time
	after     time.Duration
	dedupe    *string
	ordering  *string
	lastError string
	parkedKey string
	token     *string
}

// WithRunAt makes the item due at t. Default: now.
func WithRunAt(t time.Time) EnqueueOption { return func(c *enqueueConfig) { c.at = t } }

// WithDelay makes the item due d from now (by the queue's clock).
func WithDelay(d time.Duration) EnqueueOption { return func(c *enqueueConfig) { c.after = d } }

// WithDedupeKey sets the item's dedupe key: while an item with the same key is pending or running,
// Enqueue inserts nothing and reports that item. An empty key disables deduplication. Without
// the option, a request with a method DedupeKey() string gives the key.
func WithDedupeKey(key string) EnqueueOption { return func(c *enqueueConfig) { c.dedupe = &key } }

// WithOrderingKey sets the item's ordering key: items with the same key are dispatched one at a
// time, in the order they were enqueued; an item waits while an earlier one is pending
// (including backing off) or running. Without the option, a request with a method
// OrderingKey() string gives the key.
func WithOrderingKey(key string) EnqueueOption { return func(c *enqueueConfig) { c.ordering = &key } }

// Enqueued reports the result of Enqueue.
type Enqueued struct {
	// ID is the new item, or the item already holding the token or pending under the dedupe
	// key.
	ID ItemID
	// Duplicate is true when nothing was inserted: an item holds the token, or is pending or
	// running under the dedupe key.
	Duplicate bool
	// Token is the token of the enqueue: the one WithToken gave, or the random one made for
	// the item. It is the token of ID unless the dedupe key made it a Duplicate.
	Token string
}

// Enqueue persists req (a registered request pointer) to be dispatched by a scheduler (Start).
//
// The item gets its token (WithToken, or a random one) before it is inserted. When the
// outcome of the insert cannot be known — ctx ended, or the connection was lost, after the
// statement was sent — the error matches ErrOutcomeUnknown and is an *OutcomeUnknownError
// carrying the token: look the item up with ItemByToken, or enqueue the request again with
// WithToken(token), which stores it if the first insert did not land and reports the item
// (Duplicate) if it did. Any other error means nothing was stored. A payload longer than
// Config.MaxPayloadBytes is refused, before any database call, with an error matching
// ErrPayloadTooLarge.
func (q *Queue) Enqueue(ctx context.Context, req any, opts ...EnqueueOption) (Enqueued, error) {
	return q.enqueue(ctx, nil, req, opts)
}

// EnqueueTx is Enqueue inside tx, a transaction on the queue's database: the item is
// dispatched only if tx commits, together with the application's own writes (a transactional
// outbox). On SQLite, whose pool has a single connection, do not use the queue outside tx
// until tx ends. An error matching ErrOutcomeUnknown says the insert may have taken effect in
// tx: roll tx back (then nothing is stored), or, if the application commits it, find the item
// by the error's token once the commit's outcome is known.
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
	token, err := c.itemToken()
	if err != nil {
		return Enqueued{}, err
	}
	name, payload, err := q.reg.encode(req)
	if err != nil {
		return Enqueued{}, err
	}
	if len(payload) > q.maxPayload {
		return Enqueued{}, &PayloadTooLargeError{Name: name, Size: len(payload), Limit: q.maxPayload}
	}
	now := q.clock.Now()
	next := now
	switch {
	case !c.at.IsZero():
		next = c.at
	case c.after > 0:
		next = now.Add(c.after)
	}
	md, err := q.metadata(ctx, name)
	if err != nil {
		return Enqueued{}, err
	}
	it := store.NewItem{Name: name, Payload: payload, NextAt: next, Now: now, LastError: c.lastError, ParkedKey: c.parkedKey,
		Metadata: md, Token: token}
	if c.dedupe != nil {
		it.DedupeKey = *c.dedupe
	} else if d, ok := req.(deduplicated); ok {
		it.DedupeKey = d.DedupeKey()
	}
	if c.ordering != nil {
		it.OrderingKey = *c.ordering
	} else if o, ok := req.(ordered); ok {
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
		if u, ok := errors.AsType[*store.UnknownOutcomeError](err); ok {
			return Enqueued{}, &OutcomeUnknownError{Token: token, Name: name, Cause: u.Err}
		}
		return Enqueued{}, err
	}
	return Enqueued{ID: ItemID(id), Duplicate: existed, Token: token}, nil
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

// Stats counts the queue's items by state and its dead letters by status, and measures the
// oldest due item's wait.
func (q *Queue) Stats(ctx context.Context) (Stats, error) {
	st, err := q.store.Stats(ctx, q.clock.Now())
	out := Stats{Counts: make(map[ItemState]int64, len(st.Counts)), OldestDue: st.OldestDue}
	for k, v := range st.Counts {
		out.Counts[ItemState(k)] = v
	}
	if err != nil {
		return out, err
	}
	out.DeadLetters, err = q.deadLetterCounts(ctx)
	return out, err
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
// retry behavior of its pipeline; the default policy without one) with the classification of
// pol, its durable policy (policyFor), over it.
func (q *Queue) retries(ctx context.Context, req any, src retryPolicySource, pol retry.Policy, err error) bool {
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
	return p.Merge(classification(pol)).Retries(err)
}
