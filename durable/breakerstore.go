package durable

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable/driver"
	"github.com/switchboard-go/switchboard/durable/internal/dbhealth"
	"github.com/switchboard-go/switchboard/durable/internal/store"
)

// BreakerStoreConfig configures NewBreakerStore. Its zero value takes the defaults.
type BreakerStoreConfig struct {
	// RefreshInterval is how often the store polls the database for the transitions other
	// instances made, when something subscribed: the bound on how soon an instance learns
	// of another's trip, reset or probe verdict. Default 1 s: a fleet agrees within a second,
	// for one indexed query per second per instance (with the pool's own check of an idle
	// connection, up to two statements), which returns nothing while no breaker changes. At
	// least 10 ms: a shorter interval would poll the database thousands of times a second for
	// nothing a registry could act on sooner. On PostgreSQL the store also listens for notifications, so that it learns
	// within milliseconds, and polls in case a notification is lost (its listening
	// connection drops).
	RefreshInterval time.Duration
	// Timeout bounds every database call of the store. Default 250 ms. The registry calls
	// the store when a breaker trips, at the half-open moment and on a probe's verdict: that
	// call waits at most this long, and a database that does not answer in time leaves the
	// registry on its local state (which it publishes once the database answers again),
	// rather than holding a request for as long as the database hangs. A healthy database
	// answers these one-row statements in a few milliseconds. The background poll, which
	// holds up no request, waits at least 5 s: under a burst it may wait for one of the
	// pool's busy connections, or dial one, for longer than a request should.
	Timeout time.Duration
	// Logger receives the store's database failures, rate-limited: the first at once, then
	// at most one line every 30 s while they go on, and one when the database answers again.
	// Default: the queue's Config.Logger, so a store made from a queue logs where it does.
	Logger *zap.Logger
}

// Validate reports every field with an invalid value.
func (c BreakerStoreConfig) Validate() error {
	_, err := c.withDefaults()
	return err
}

func (c BreakerStoreConfig) withDefaults() (BreakerStoreConfig, error) {
	var errs []error
	if c.RefreshInterval < 0 {
		errs = append(errs, fmt.Errorf("RefreshInterval %v is negative", c.RefreshInterval))
	}
	if c.RefreshInterval > 0 && c.RefreshInterval < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("RefreshInterval %v is under 10ms", c.RefreshInterval))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("Timeout %v is negative", c.Timeout))
	}
	if c.RefreshInterval == 0 {
		c.RefreshInterval = time.Second
	}
	if c.Timeout == 0 {
		c.Timeout = 250 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = zap.L()
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("durable: BreakerStoreConfig: %w", errors.Join(errs...))
	}
	return c, nil
}

// maxBreakerStoreName bounds a store's name: it is a namespace, and every PostgreSQL
// notification of a change carries it (a notification holds at most 8000 bytes).
const maxBreakerStoreName = 1024

// breakerSettle is how long after a transition the poll still reads it again. A PostgreSQL
// transition takes its seq from a sequence before it commits, so a poll may see a later seq
// committed before an earlier one: reading the changes of the last breakerSettle again (and
// passing on only the epochs not yet passed on) finds the earlier one once it commits. Each
// transition is one statement, bounded by its caller's timeout, so it commits well within.
const breakerSettle = 10 * time.Second

// breakerPage is how many changed rows one poll statement reads.
const breakerPage = 500

// BreakerStore keeps the state of breakers that a fleet's registries share in a queue's
// database (the table switchboard_breakers), on SQLite and on PostgreSQL: it is a
// breaker.Store, given to a breaker.Registry. NewBreakerStore makes one.
//
// What touches the database: Transition one statement (two when it loses to another
// instance's transition: it then reads the winner's row), Load one, and, once something
// subscribed, one poll every RefreshInterval (PostgreSQL: also one connection that listens for
// notifications). Every call is bounded by Timeout.
type BreakerStore struct {
	st     driver.FleetStores
	notify driver.Notifier // WatchBreakers
	name   string
	cfg    BreakerStoreConfig
	health dbhealth.Health // the polls
	listen dbhealth.Health // the listening connection

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	wake   chan struct{} // a notification: poll now
	// listened is closed when the listening connection first listens (for the tests).
	listened chan struct{}

	// own is held (read) by each Transition from before its statement until it recorded the
	// epoch it made in seen, and (write) by the poll while it compares what it read with seen:
	// so the poll cannot pass on a transition of this store that it read before Transition
	// recorded it.
	own sync.RWMutex

	mu      sync.Mutex
	closed  bool
	started bool
	subs    []*breakerSub
	// seen is, per key, the newest epoch the store knows of (from a poll or its own
	// transition): a poll passes on only newer ones.
	seen map[string]int64
	// cursor is the seq below which the poll has read every change (see breakerSettle).
	cursor int64
}

type breakerSub struct {
	fn      func(breaker.Shared)
	stopped bool // under BreakerStore.mu
}

var _ breaker.Store = (*BreakerStore)(nil)

// NewBreakerStore returns the store of the shared breakers named name in q's database: name is
// the registry's namespace, so that one queue holds the breakers of several registries (each
// registry of the fleet that shares a set of breakers uses the same name). It reads the
// database once, bounded by cfg.Timeout, to start the change sequence it polls from; when the
// database does not answer, the first poll that succeeds passes on every stored breaker of
// name instead. Give each registry a store of its own (with the same name across the fleet): a
// store tells its subscribers only the transitions other stores made, so two registries on one
// store would not hear each other. Close it, before q, when the registry is done with it.
func NewBreakerStore(q *Queue, name string, cfg BreakerStoreConfig) (*BreakerStore, error) {
	if q == nil {
		return nil, errors.New("durable: NewBreakerStore: the queue is nil")
	}
	if cfg.Logger == nil {
		cfg.Logger = q.log // the store is the queue's: its lines go where the queue's go
	}
	switch {
	case name == "":
		return nil, errors.New("durable: NewBreakerStore: the name is empty")
	case !utf8.ValidString(name):
		return nil, fmt.Errorf("durable: NewBreakerStore: the name %q is not valid UTF-8", name)
	case strings.IndexByte(name, 0) >= 0:
		return nil, fmt.Errorf("durable: NewBreakerStore: the name %q holds a NUL byte", name)
	case len(name) > maxBreakerStoreName:
		return nil, fmt.Errorf("durable: NewBreakerStore: the name is %d bytes long, longer than %d", len(name), maxBreakerStoreName)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	fs, err := fleetStoresOf(q.store, "NewBreakerStore")
	if err != nil {
		return nil, err
	}
	log := cfg.Logger.With(zap.String("breaker_store", name))
	s := &BreakerStore{st: fs, notify: notifierOf(q.store), name: name, cfg: cfg, health: dbhealth.Health{Log: log}, listen: dbhealth.Health{Log: log},
		wake: make(chan struct{}, 1), listened: make(chan struct{}), seen: map[string]int64{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	ctx, cancel := context.WithTimeout(s.ctx, cfg.Timeout)
	defer cancel()
	if seq, err := s.st.LastBreakerSeq(ctx, name); err == nil {
		s.cursor = seq
	} else {
		s.health.Failed("breaker store: start", err)
	}
	return s, nil
}

// ErrBreakerStoreClosed is the error of a BreakerStore's calls after its Close.
var ErrBreakerStoreClosed = errors.New("durable: the breaker store is closed")

// Transition implements breaker.Store: one conditional statement on the breaker's row, with
// the database's clock, bounded by Timeout (and ctx).
func (s *BreakerStore) Transition(ctx context.Context, t breaker.Transition) (breaker.Shared, bool, error) {
	if t.Key == "" {
		return breaker.Shared{}, false, fmt.Errorf("durable: breaker store %q: transition of a breaker with an empty key", s.name)
	}
	to, ok := storedBreakerState(t.To)
	if !ok {
		return breaker.Shared{}, false, fmt.Errorf("durable: breaker store %q: transition of %q to an unknown state %v", s.name, t.Key, t.To)
	}
	if err := s.usable(); err != nil {
		return breaker.Shared{}, false, err
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	s.own.RLock()
	defer s.own.RUnlock()
	row, applied, err := s.st.TransitionBreaker(cctx, store.BreakerTransition{Name: s.name, Key: t.Key, From: t.From, To: to,
		Failures: t.Failures, OpenFor: t.OpenFor, ProbeFor: t.ProbeFor, Owner: t.Owner, Claim: t.Claim})
	if err != nil {
		return breaker.Shared{}, false, s.callError(ctx, err)
	}
	sh, err := s.shared(row)
	if err != nil {
		return breaker.Shared{}, false, err
	}
	if applied {
		s.mu.Lock()
		s.seen[row.Key] = max(s.seen[row.Key], row.Epoch)
		s.mu.Unlock()
	}
	return sh, applied, nil
}

// Load implements breaker.Store: one statement, bounded by Timeout (and ctx).
func (s *BreakerStore) Load(ctx context.Context) ([]breaker.Shared, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	rows, err := s.st.LoadBreakers(cctx, s.name)
	if err != nil {
		return nil, s.callError(ctx, err)
	}
	out := make([]breaker.Shared, 0, len(rows))
	for _, r := range rows {
		sh, err := s.shared(r)
		if err != nil {
			return nil, err
		}
		out = append(out, sh)
	}
	return out, nil
}

// Subscribe implements breaker.Store. The first call starts the store's poll (and, on
// PostgreSQL, its listening connection), which run until Close; fn is called on the poll's
// goroutine, with each transition another instance made (never with one this store's
// Transition applied), one call at a time for all subscribers, in the order the store learned
// of them. fn should return soon: the next poll waits for it; it may call the store's other
// methods and stop, but not Close, which waits for it. After stop returns fn is not called
// again (but for a call under way at that moment).
func (s *BreakerStore) Subscribe(fn func(breaker.Shared)) (stop func()) {
	if fn == nil {
		return func() {}
	}
	sub := &breakerSub{fn: fn}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return func() {}
	}
	s.subs = append(s.subs, sub)
	if !s.started {
		s.started = true
		s.wg.Add(2)
		go s.poll()
		go s.listenLoop()
	}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		sub.stopped = true
		for i, x := range s.subs {
			if x == sub {
				s.subs = append(s.subs[:i:i], s.subs[i+1:]...)
				break
			}
		}
	}
}

// Close stops the store's poll and listening connection, waiting for them (and for a
// subscriber's call under way) to end. The store's calls fail afterwards. It does not close
// the queue.
func (s *BreakerStore) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

func (s *BreakerStore) usable() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("durable: breaker store %q: %w", s.name, ErrBreakerStoreClosed)
	}
	return nil
}

// callError says of an error whose cause is the store's Timeout (not ctx's end) that it is.
func (s *BreakerStore) callError(ctx context.Context, err error) error {
	if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("durable: breaker store %q: the database did not answer within the Timeout (%v): %w", s.name, s.cfg.Timeout, err)
	}
	return fmt.Errorf("durable: breaker store %q: %w", s.name, err)
}

// breakerPollPatience is the least a poll waits for the database: nothing waits on a poll, and
// a missed one only delays what the notifications did not already say.
const breakerPollPatience = 5 * time.Second

// poll runs the store's poll every RefreshInterval, and at once when woken.
func (s *BreakerStore) poll() {
	defer s.wg.Done()
	tick := time.NewTicker(s.cfg.RefreshInterval)
	defer tick.Stop()
	for {
		s.pollOnce()
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		case <-s.wake:
		}
	}
}

// pollOnce reads the changes since the cursor and passes on those of epochs newer than the
// store knew.
func (s *BreakerStore) pollOnce() {
	ctx, cancel := context.WithTimeout(s.ctx, max(s.cfg.Timeout, breakerPollPatience))
	defer cancel()
	s.mu.Lock()
	after := s.cursor
	s.mu.Unlock()
	for {
		rows, err := s.st.BreakerChanges(ctx, s.name, after, breakerPage)
		if err != nil {
			if s.ctx.Err() == nil {
				s.health.Failed("breaker store: poll", err)
			}
			return
		}
		s.health.OK()
		var news []breaker.Shared
		s.own.Lock()
		s.mu.Lock()
		for _, r := range rows {
			after = r.Seq
			if !r.UpdatedAt.After(r.Now.Add(-breakerSettle)) {
				s.cursor = max(s.cursor, r.Seq)
			}
			if r.Epoch <= s.seen[r.Key] {
				continue
			}
			sh, err := s.shared(r)
			if err != nil {
				s.health.Log.Error("durable: breaker store: a stored breaker is unreadable", zap.Error(err))
				continue
			}
			s.seen[r.Key] = r.Epoch
			news = append(news, sh)
		}
		s.mu.Unlock()
		s.own.Unlock()
		for _, sh := range news {
			s.deliver(sh)
		}
		if len(rows) < breakerPage {
			return
		}
	}
}

// deliver calls each subscriber with sh, in the order they subscribed.
func (s *BreakerStore) deliver(sh breaker.Shared) {
	s.mu.Lock()
	subs := slices.Clone(s.subs)
	s.mu.Unlock()
	for _, sub := range subs {
		s.mu.Lock()
		stopped := sub.stopped
		s.mu.Unlock()
		if !stopped {
			sub.fn(sh)
		}
	}
}

// listenLoop keeps a connection listening for the notifications of changes (PostgreSQL), each
// of which wakes the poll; after the connection fails it tries again, waiting longer each
// time up to 30 s, and the poll goes on meanwhile.
func (s *BreakerStore) listenLoop() {
	defer s.wg.Done()
	const first, most = 100 * time.Millisecond, 30 * time.Second
	wait, listened := first, false
	for {
		err := s.notify.WatchBreakers(s.ctx, s.name, func() {
			wait = first
			if !listened {
				listened = true
				close(s.listened)
			}
			s.listen.OK()
			s.poke() // what changed while it was not listening
		}, s.poke)
		if errors.Is(err, store.ErrNoNotifications) || s.ctx.Err() != nil {
			return
		}
		s.listen.Failed("breaker store: listen for changes", err)
		t := time.NewTimer(wait)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, most)
	}
}

// poke wakes the poll.
func (s *BreakerStore) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *BreakerStore) shared(r store.BreakerRow) (breaker.Shared, error) {
	st, ok := sharedBreakerState(r.State)
	if !ok {
		return breaker.Shared{}, fmt.Errorf("durable: breaker store %q: breaker %q has the unknown state %q", s.name, r.Key, r.State)
	}
	return breaker.Shared{Key: r.Key, State: st, Epoch: r.Epoch, Failures: r.Failures, OpenedAt: r.OpenedAt, OpenUntil: r.OpenUntil,
		ProbeOwner: r.ProbeOwner, ProbeClaim: r.ProbeClaim, ProbeUntil: r.ProbeUntil, LastProbeAt: r.LastProbeAt, By: r.By, Now: r.Now}, nil
}

func storedBreakerState(s breaker.State) (store.BreakerState, bool) {
	switch s {
	case breaker.StateClosed:
		return store.BreakerClosed, true
	case breaker.StateOpen:
		return store.BreakerOpen, true
	case breaker.StateHalfOpen:
		return store.BreakerHalfOpen, true
	}
	return "", false
}

func sharedBreakerState(s store.BreakerState) (breaker.State, bool) {
	switch s {
	case store.BreakerClosed:
		return breaker.StateClosed, true
	case store.BreakerOpen:
		return breaker.StateOpen, true
	case store.BreakerHalfOpen:
		return breaker.StateHalfOpen, true
	}
	return 0, false
}
