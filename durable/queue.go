package durable

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable/driver"
	"github.com/switchboard-go/switchboard/durable/internal/dbhealth"
	"github.com/switchboard-go/switchboard/durable/internal/gate"
	"github.com/switchboard-go/switchboard/durable/internal/notify"
	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// Queue keeps durable requests in a database; Open returns one.
type Queue struct {
	mu      sync.Mutex
	sched   *scheduler // started by Start
	stopped bool       // Shutdown was called
	// running is the scheduler started last on the queue, read without the lock by Enqueue
	// to wake it.
	running atomic.Pointer[scheduler]
	// schedCfg is the scheduler's part of Open's Config, for Start.
	schedCfg schedulerConfig

	store   driver.Executor
	reg     *registry
	clock   behaviors.Clock
	rand    func() float64
	recheck time.Duration
	// priorityAging is Config.PriorityAging, or its default.
	priorityAging time.Duration
	// successRows is Config.SuccessAttemptRows.
	successRows bool

	deadLetters // Config.OnDead, Logger and ReplayLease (deadletters.go)
	// propagators carry context values with each item (Config.Propagators).
	propagators []Propagator
	// dispatchers are the propagators that have the Dispatching method, found once at Open.
	dispatchers []dispatcher
	schedules   timetable // registered by Schedule
	// maxPayload is Config.MaxPayloadBytes, or its default.
	maxPayload int

	// notifier tells other instances of the items due (PostgreSQL; nil on a database without
	// notifications), under the name sender, which this queue's schedulers ignore.
	notifier     *notify.Notifier
	notifyHealth dbhealth.Health
	sender       string

	// shares counts the claims of the queue's schedulers by fairness key (BusiestKeys).
	shares claimShares
	// itemCounts and letterCounts keep the full counts of the states and letter statuses
	// Stats finds over countLimit, which is ExactCountLimit (a test sets a smaller one);
	// countLimit bounds DeadLetters' total too.
	itemCounts   fullCounts[record.ItemState]
	letterCounts fullCounts[record.DeadLetterStatus]
	countLimit   int
}

// Close closes a pool the driver opened (sqlite.Open, postgres.Open), never one the caller
// passed (sqlite.New, postgres.New). It refuses, closing nothing, while the scheduler Start
// started runs: call Shutdown first, or the outcomes of the items running would not be written
// and they would run again.
func (q *Queue) Close() error {
	q.mu.Lock()
	s := q.sched
	q.mu.Unlock()
	if s != nil {
		select {
		case <-s.finished:
		default:
			return errors.New("durable: Close: the queue's scheduler is running; call Shutdown first")
		}
	}
	if q.notifier != nil {
		q.notifier.Close()
	}
	return q.store.Close()
}

// Start runs this instance's scheduler, configured by the scheduler's fields of Open's Config:
// call it in every instance that works on items, once sender, the *mediator.Mediator, is
// built; instances sharing a database divide the work. It refuses a queue a Register or
// Schedule call failed on (with their errors), a nil sender, a mediator not built
// (mediator.ErrNotBuilt), or one lacking a handler for request types registered or scheduled
// on q (naming each, mediator.ErrNoHandler); an item another Sender turns away with
// mediator.ErrNoHandler waits, unattempted (Config.Recheck). It fails with ErrStarted while the
// scheduler runs and ErrStopped after Shutdown.
//
// The observers attached to the mediator (mediator.Mediator.Observe) hear the queue too: its
// ClaimObservers, SettledObservers and DeadObservers after Config.OnClaim, OnSettled and
// OnDead, and its breaker observers the state changes of the registries guarding the items
// (Config.Breakers, WithBreaker), so metrics, tracing and logging attach to the pipelines and
// the queue with one line each.
func (q *Queue) Start(sender mediator.Sender) error { return q.start(sender, q.schedCfg) }

// start runs a scheduler configured by cfg (Start's, or a test's).
func (q *Queue) start(sender mediator.Sender, cfg schedulerConfig) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.stopped:
		return ErrStopped
	case q.sched != nil:
		return ErrStarted
	}
	if err := q.reg.problems(); err != nil {
		return fmt.Errorf("durable: Start: the queue's setup failed: %w", err)
	}
	q.observe(sender, &cfg)
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

// Shutdown stops the scheduler: it claims nothing more, releases unstarted items, and waits for
// running ones and their outcomes. If ctx ends first it cancels them (recorded as interrupted)
// and waits Config.ShutdownGrace more, so it returns even if a handler ignores
// cancellation (its goroutine alone outlives Shutdown) or the database is gone; an unwritten
// outcome keeps its lease, and the item runs again. Every call returns the same result: nil, or
// an error saying what was left. Before Start it returns nil.
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

// deadlined is a request type that carries its own deadline (see WithDeadline).
type deadlined interface{ Deadline() time.Time }

// EnqueueOption configures one Enqueue.
type EnqueueOption func(*enqueueConfig)

type enqueueConfig struct {
	at        time.Time
	after     time.Duration
	dedupe    *string
	ordering  *string
	lastError string
	deferred  bool // stored by the deferral: its first attempt is a retry
	parkedKey string
	token     *string
	guardKey  *string
	reference *string         // WithReference's
	uniqueFor *time.Duration  // WithUniqueFor's
	priority  *int            // WithPriority's
	fairKey   *string         // WithFairnessKey's
	debounce  *debounceConfig // WithDebounce's
	deadline  time.Time
	// dueByDeadline: a first try after the deadline is moved to it (the deferral's), not an
	// error.
	dueByDeadline bool
}

// WithRunAt makes the item due at t. Default: now. A t in the past is due now. It does not go
// with WithDelay: an enqueue with both is refused.
func WithRunAt(t time.Time) EnqueueOption { return func(c *enqueueConfig) { c.at = t } }

// WithDelay makes the item due d from now (by the queue's clock); a d of zero or less is due
// now, as a delay computed to a moment that has passed means.
func WithDelay(d time.Duration) EnqueueOption { return func(c *enqueueConfig) { c.after = d } }

// WithDedupeKey sets the item's dedupe key: while an item with the key is pending or running
// (and, with a uniqueness window, for the window after it succeeded: WithUniqueFor), Enqueue
// inserts nothing and reports it. Without it, a request's method DedupeKey() string gives the
// key; empty disables.
func WithDedupeKey(key string) EnqueueOption { return func(c *enqueueConfig) { c.dedupe = &key } }

// WithOrderingKey sets the item's ordering key: items with one key run one at a time, in enqueue
// order. Without it, a request's method OrderingKey() string gives the key.
func WithOrderingKey(key string) EnqueueOption { return func(c *enqueueConfig) { c.ordering = &key } }

// WithBreakerKey names the key of the circuit breaker that guards the item, in the registry of
// its registration's WithBreaker (or Config.Breakers): the scheduler asks that breaker
// before each attempt instead of the one the registration's key function names. Use it when
// the endpoint an item calls is not in its request. Empty: the key function decides.
func WithBreakerKey(key string) EnqueueOption { return func(c *enqueueConfig) { c.guardKey = &key } }

// WithDeadline bounds the item's life: once t has passed, the item is dead (a dead letter
// whose error says its deadline passed), not attempted again, parked or not. The registration's
// retry policy's MaxAge, when set, bounds it too, from the enqueue: the earlier of the two
// holds. A deadline already past, or before the time the item is due (WithRunAt, WithDelay),
// is an error and nothing is stored. Without it, a request's method Deadline() time.Time gives
// the deadline (zero: none), so a request deferred by the deferral keeps its own. Default: only
// MaxAge bounds the item.
func WithDeadline(t time.Time) EnqueueOption { return func(c *enqueueConfig) { c.deadline = t } }

// Enqueued reports the result of Enqueue.
type Enqueued struct {
	ID        record.ItemID // the new item, the one holding the token or dedupe key, or the one debounced into
	Duplicate bool          // nothing was inserted because of such an item
	// Debounced: nothing was inserted; the pending item of the enqueue's debounce key
	// (WithDebounce), which ID names, took its payload and its new due time.
	Debounced bool
	Token     string // the enqueue's token; ID's unless the dedupe key made it a Duplicate
}

// Enqueue stores req, a registered request pointer, for a scheduler. An insert
// sent whose outcome is unknown (ctx ended, the connection broke) gets an
// *OutcomeUnknownError; any other error means nothing was stored.
func (q *Queue) Enqueue(ctx context.Context, req any, opts ...EnqueueOption) (Enqueued, error) {
	return q.enqueue(ctx, nil, req, opts)
}

// EnqueueTx is Enqueue in tx, on the queue's database: the item exists only if
// tx commits (an outbox). On SQLite (one connection) use the queue only through
// tx until it ends. After ErrOutcomeUnknown, roll back or look up the token.
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
	if d, ok := req.(deadlined); ok && c.deadline.IsZero() {
		c.deadline = d.Deadline()
	}
	token, err := c.itemToken()
	if err != nil {
		return Enqueued{}, refused(err)
	}
	name, payload, err := q.reg.encode(req)
	if err != nil {
		return Enqueued{}, err
	}
	if len(payload) > q.maxPayload {
		return Enqueued{}, &PayloadTooLargeError{Name: name, Size: len(payload), Limit: q.maxPayload}
	}
	dedupe := ""
	if c.dedupe != nil {
		dedupe = *c.dedupe
	} else if d, ok := req.(deduplicated); ok {
		dedupe = d.DedupeKey()
	}
	if err := c.checkDebounce(name, dedupe); err != nil {
		return Enqueued{}, refused(err)
	}
	if !c.at.IsZero() && c.after != 0 {
		return Enqueued{}, refused(fmt.Errorf("durable: Enqueue %s: WithRunAt(%s) and WithDelay(%v) both say when the item is due: give one",
			name, c.at.Format(time.RFC3339Nano), c.after))
	}
	now := q.clock.Now()
	next := now
	switch {
	case c.debounce != nil:
		next = now.Add(c.debounce.window)
	case !c.at.IsZero():
		next = c.at
	case c.after > 0:
		next = now.Add(c.after)
	}
	if c.dueByDeadline {
		next = gate.CapAt(next, q.lifeEnd(name, c.deadline, now))
	}
	deadline, err := q.deadline(name, c, now, next)
	if err != nil {
		return Enqueued{}, refused(err)
	}
	md, err := q.metadata(ctx, name)
	if err != nil {
		return Enqueued{}, err
	}
	it := store.NewItem{Name: name, Payload: payload, NextAt: next, Now: now, LastError: c.lastError, Deferred: c.deferred, ParkedKey: c.parkedKey,
		Metadata: md, Token: token, Deadline: deadline, DedupeKey: dedupe}
	if c.guardKey != nil {
		it.GuardKey = *c.guardKey
	}
	if c.debounce != nil {
		it.DebounceKey, it.DebounceUntil = c.debounce.key, now.Add(c.debounce.maxDelay)
	}
	if c.ordering != nil {
		it.OrderingKey = *c.ordering
	} else if o, ok := req.(ordered); ok {
		it.OrderingKey = o.OrderingKey()
	}
	if err := checkKey(name, "dedupe key", it.DedupeKey); err != nil {
		return Enqueued{}, refused(err)
	}
	if it.UniqueFor, err = q.uniqueFor(name, c, it.DedupeKey); err != nil {
		return Enqueued{}, refused(err)
	}
	if err := checkKey(name, "ordering key", it.OrderingKey); err != nil {
		return Enqueued{}, refused(err)
	}
	if err := checkKey(name, "breaker key", it.GuardKey); err != nil {
		return Enqueued{}, refused(err)
	}
	if it.Reference, err = c.itemReference(name, req); err != nil {
		return Enqueued{}, refused(err)
	}
	if err := q.fairnessOf(&it, req, c); err != nil {
		return Enqueued{}, refused(err)
	}
	var (
		id      store.ItemID
		existed bool
	)
	if tx != nil {
		id, existed, err = q.store.EnqueueTx(ctx, tx, it)
	} else {
		id, existed, err = q.store.Enqueue(ctx, it)
		if err == nil && !existed && !next.After(now) {
			// Due now: this instance's scheduler claims it at once instead of at its next poll,
			// and on PostgreSQL a notification wakes the other instances' (wake.go).
			if s := q.running.Load(); s != nil {
				s.Wake()
			}
			q.notifyDue()
		}
	}
	if err != nil {
		if u, ok := errors.AsType[*store.UnknownOutcomeError](err); ok {
			return Enqueued{}, &OutcomeUnknownError{Token: token, Name: name, Cause: u.Err}
		}
		return Enqueued{}, err
	}
	if it.DebounceKey != "" {
		return Enqueued{ID: record.ItemID(id), Debounced: existed, Token: token}, nil
	}
	return Enqueued{ID: record.ItemID(id), Duplicate: existed, Token: token}, nil
}

// deadline returns the deadline of an item of name enqueued at now, due at next: the earlier of
// WithDeadline's and now plus its policy's MaxAge; zero when neither is set.
func (q *Queue) deadline(name string, c enqueueConfig, now, next time.Time) (time.Time, error) {
	d := q.lifeEnd(name, c.deadline, now)
	switch {
	case d.IsZero():
		return d, nil
	case !c.deadline.IsZero() && !c.deadline.After(now):
		return time.Time{}, fmt.Errorf("durable: Enqueue %s: the deadline %v is not after now (%v)", name, c.deadline.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano))
	case next.After(d):
		from := "its deadline"
		if !d.Equal(c.deadline) {
			from = "the deadline its policy's MaxAge sets"
		}
		return time.Time{}, fmt.Errorf("durable: Enqueue %s: the item would be due at %v, after %s, %v", name, next.Format(time.RFC3339Nano), from, d.Format(time.RFC3339Nano))
	}
	return d, nil
}

// lifeEnd returns the earlier of deadline and now plus the MaxAge of name's policy; zero when
// neither is set.
func (q *Queue) lifeEnd(name string, deadline, now time.Time) time.Time {
	if age := q.policyFor(name).MaxAge; age > 0 {
		if byAge := now.Add(age); deadline.IsZero() || byAge.Before(deadline) {
			return byAge
		}
	}
	return deadline
}

// Item returns one item; a *NotFoundError (ErrNotFound) if there is none.
func (q *Queue) Item(ctx context.Context, id record.ItemID) (record.Item, error) {
	it, err := q.store.Item(ctx, store.ItemID(id))
	if err != nil {
		return record.Item{}, notFoundOf(err, "item", strconv.FormatInt(int64(id), 10))
	}
	return itemOf(it), nil
}

// Attempts lists the attempts of an item in order.
func (q *Queue) Attempts(ctx context.Context, id record.ItemID) ([]record.Attempt, error) {
	as, err := q.store.Attempts(ctx, store.ItemID(id))
	if err != nil {
		return nil, err
	}
	out := make([]record.Attempt, len(as))
	for i, a := range as {
		out[i] = attemptOf(a)
	}
	return out, nil
}

// Stats counts items by state and letters by status, and the oldest due item's wait. A state
// with at most ExactCountLimit items is counted by every call. One with more is counted in full
// at most every ten seconds, or every hundred times as long as a full count takes, and at least
// every five minutes (the queue keeps the count between): CountAge says how old each such count is, so that a
// dashboard can show when it was made and a rate is taken between two counts, not two calls.
// Letters are counted by status the same way (LetterCountAge).
func (q *Queue) Stats(ctx context.Context) (Stats, error) {
	now := q.clock.Now()
	st, err := q.store.Stats(ctx, now, q.countLimit)
	out := Stats{Counts: make(map[record.ItemState]int64, len(st.Counts)), OldestDue: st.OldestDue}
	for k, v := range st.Counts {
		out.Counts[record.ItemState(k)] = v
	}
	if err != nil {
		return out, err
	}
	if over := overKeys(st.Over); len(over) > 0 {
		full, age, err := q.itemCounts.get(ctx, q.store.CountStates, over, now)
		if err != nil {
			return out, err
		}
		out.CountAge = make(map[record.ItemState]time.Duration, len(over))
		for _, s := range over {
			out.Counts[s], out.CountAge[s] = full[s], age
		}
	}
	out.DeadLetters, out.LetterCountAge, err = q.deadLetterCounts(ctx, now)
	return out, err
}

// Counts is Stats' counts keyed by name ("pending", "failed"), for observers that do not
// import durable (metrics.CollectQueue); nil maps on an error.
func (q *Queue) Counts(ctx context.Context) (items, deadLetters map[string]int64, err error) {
	st, err := q.Stats(ctx)
	if err != nil {
		return nil, nil, err
	}
	items = make(map[string]int64, len(st.Counts))
	for state, n := range st.Counts {
		items[string(state)] = n
	}
	deadLetters = make(map[string]int64, len(st.DeadLetters))
	for status, n := range st.DeadLetters {
		deadLetters[string(status)] = int64(n)
	}
	return items, deadLetters, nil
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

// retries is the policy's classification of a failure of durable work: the request's own retry
// policy (from src, the retry behavior of its pipeline; the default policy without one) with
// the classification of pol, its durable policy (policyFor), over it. The deferral and the
// executor ask it through gate.Retryable, which retries every refusal first.
func (q *Queue) retries(ctx context.Context, req any, src retryPolicySource, pol retry.Policy, err error) bool {
	// Its own inner work was deferred: the item's work can succeed later. (A refusal it met is
	// gate.Retryable's rule, which asks this classification only of other errors.)
	if errors.Is(err, ErrDeferred) {
		return true
	}
	p := retry.DefaultPolicy
	if src != nil {
		p = src.Policy(ctx, req)
	}
	return p.Merge(classification(pol)).Retries(err)
}

// checkKey refuses a dedupe or ordering key that the database cannot store as it is (invalid
// UTF-8, a NUL byte): a key that matched a different stored text would not do its job.
func checkKey(name, kind, key string) error {
	if err := keyProblem(kind, key); err != nil {
		return fmt.Errorf("durable: Enqueue %s: %w", name, err)
	}
	return nil
}

// maxKey is the longest key an item may have, in bytes. Each key is an index entry of its
// own, and PostgreSQL refuses an index entry past about 2.7 kB after compression (a raw
// "index row size … exceeds" error, for a key that does not compress); a concurrency limit's
// key is bounded the same. Keys name endpoints, tenants and records, not payloads.
const maxKey = 1024

// keyProblem says what makes key, a text that kind names ("dedupe key", "reference"), one no
// item can have and no database stores as text: invalid UTF-8, a NUL byte, more than maxKey
// bytes.
func keyProblem(kind, key string) error {
	switch {
	case len(key) > maxKey:
		return fmt.Errorf("the %s of %d bytes is more than %d (it begins %q)", kind, len(key), maxKey, strings.ToValidUTF8(key[:32], ""))
	case !utf8.ValidString(key):
		return fmt.Errorf("the %s %q is not valid UTF-8", kind, key)
	case strings.IndexByte(key, 0) >= 0:
		return fmt.Errorf("the %s %q holds a NUL byte", kind, key)
	}
	return nil
}
