package durable

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/mediator"
)

// BreakerView tells whether the circuit breaker for a key is open and how long until it lets
// a probe through. *behaviors.BreakerRegistry implements it.
type BreakerView interface {
	OpenFor(key string) (remaining time.Duration, open bool)
}

var _ BreakerView = (*behaviors.BreakerRegistry)(nil)

// SchedulerConfig configures a Scheduler. The zero value of each field means its default.
type SchedulerConfig struct {
	// InstanceID names this scheduler in leases and attempt rows; unique per running instance.
	// Default: host name, process id and a random suffix.
	InstanceID string
	// Workers is the number of items dispatched concurrently. Default 4.
	Workers int
	// BatchSize is the most items claimed, and completions written, per database round trip.
	// Default 100.
	BatchSize int
	// MaxClaimed caps the items this instance holds at once: being dispatched, waiting for a
	// worker, or waiting for their completion to be written. Claimed items waiting for a
	// worker are leased to this instance, so with slow handlers a lower cap spreads the work
	// across instances better; with fast handlers a higher one keeps the workers busy.
	// Default Workers + BatchSize.
	MaxClaimed int
	// PollInterval is how long the scheduler waits before claiming again when no item was due.
	// Default 1 s.
	PollInterval time.Duration
	// Lease is how long a claim holds an item. Heartbeats extend the leases of items still in
	// flight; an item whose lease runs out (its holder died) is swept back to pending and its
	// holder's late completion is rejected. Default 30 s.
	Lease time.Duration
	// HeartbeatInterval is how often the leases of in-flight items are extended; it must be
	// shorter than Lease (NewScheduler refuses it otherwise), and well under it. Default
	// Lease/3.
	HeartbeatInterval time.Duration
	// SweepInterval is how often expired leases are swept back to pending. Default Lease/2.
	SweepInterval time.Duration
	// ShutdownGrace is how long, once Shutdown's context has ended, the scheduler still waits
	// for the database to take the outcomes of the items it held (the interrupted attempts,
	// the released claims). After it, pending store calls are cancelled so that Shutdown
	// returns even when the database does not answer; the items whose outcome was not
	// written keep their leases until they run out and are swept. Default 5 s.
	ShutdownGrace time.Duration
	// Breakers, when set, is consulted before each dispatch: while the breaker for the item's
	// key is open, the item is not attempted (no attempt row, attempt count unchanged) and is
	// due again when the breaker may let a probe through. Default: none.
	Breakers BreakerView
	// BreakerKey maps a decoded request to its breaker key; use the same function as the
	// circuit breaker behavior. Default: behaviors.TypeKey of the request's type, the circuit
	// breaker behavior's own default.
	BreakerKey func(req any) string
	// Retryable decides whether a failed attempt is retried (until the policy's MaxAttempts)
	// or dead-lettered at once. Default behaviors.Retryable.
	Retryable func(error) bool
	// Logger receives operational errors (database failures, rejected completions). Default
	// slog.Default().
	Logger *slog.Logger
}

func (c SchedulerConfig) withDefaults() SchedulerConfig {
	if c.InstanceID == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		c.InstanceID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 100
	}
	if c.MaxClaimed <= 0 {
		c.MaxClaimed = c.Workers + c.BatchSize
	}
	if c.PollInterval <= 0 {
		c.PollInterval = time.Second
	}
	if c.Lease <= 0 {
		c.Lease = 30 * time.Second
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = c.Lease / 3
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = c.Lease / 2
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = 5 * time.Second
	}
	if c.BreakerKey == nil {
		c.BreakerKey = func(req any) string { return behaviors.TypeKey(reflect.TypeOf(req)) }
	}
	if c.Retryable == nil {
		c.Retryable = behaviors.Retryable
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Scheduler claims due items, dispatches each through the mediator as exactly one attempt, and
// records the outcome. Run one in every instance: instances sharing a PostgreSQL store divide
// the work between them, each item going to one instance at a time.
type Scheduler struct {
	q      *Queue
	sender mediator.Sender
	cfg    SchedulerConfig

	mu      sync.Mutex
	started bool
	stopped bool
	// inflight holds the leases of the items this scheduler has claimed and not yet completed or
	// released. It is keyed by fence, not item id: after a stalled worker lost its lease, the
	// same scheduler may claim the item again while the stale dispatch still runs, and ending
	// the stale one must not forget the new one.
	inflight map[Fence]struct{}

	// dbCtx is used for store calls; it outlives Shutdown's deadline so in-flight items can
	// still be completed or released, and ends when the scheduler has stopped.
	dbCtx    context.Context
	dbCancel context.CancelFunc
	// life is the parent of every dispatch context; Shutdown cancels it at its deadline.
	life    context.Context
	endLife context.CancelFunc

	stop     chan struct{} // closed by Shutdown: claim no more
	wake     chan struct{} // claim now
	work     chan Claimed
	done     chan Completion
	workers  sync.WaitGroup
	loops    sync.WaitGroup // claim loop, completer
	maintEnd chan struct{}
	maint    sync.WaitGroup
	finished chan struct{}
}

// NewScheduler returns a scheduler that dispatches q's items through sender (usually the
// *mediator.Mediator). Start it with Start and stop it with Shutdown.
func NewScheduler(q *Queue, sender mediator.Sender, cfg SchedulerConfig) (*Scheduler, error) {
	if q == nil || sender == nil {
		return nil, errors.New("durable: NewScheduler: queue and sender are required")
	}
	cfg = cfg.withDefaults()
	if cfg.HeartbeatInterval >= cfg.Lease {
		return nil, fmt.Errorf("durable: NewScheduler: HeartbeatInterval (%v) must be shorter than Lease (%v), or leases run out while items run",
			cfg.HeartbeatInterval, cfg.Lease)
	}
	return &Scheduler{q: q, sender: sender, cfg: cfg, inflight: map[Fence]struct{}{}}, nil
}

// InstanceID returns the id this scheduler writes into leases and attempt rows.
func (s *Scheduler) InstanceID() string { return s.cfg.InstanceID }

// Start starts the claim loop, the workers, the completer and the lease keeper. It returns
// ErrStopped if the scheduler was already started.
func (s *Scheduler) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return ErrStopped
	}
	s.started = true
	s.dbCtx, s.dbCancel = context.WithCancel(context.Background())
	s.life, s.endLife = context.WithCancel(context.Background())
	s.stop = make(chan struct{})
	s.wake = make(chan struct{}, 1)
	capacity := s.cfg.MaxClaimed
	s.work = make(chan Claimed, capacity)
	s.done = make(chan Completion, capacity)
	s.maintEnd = make(chan struct{})
	s.finished = make(chan struct{})

	s.loops.Add(2)
	go s.claimLoop(capacity)
	go s.completer()
	s.workers.Add(s.cfg.Workers)
	for range s.cfg.Workers {
		go s.worker()
	}
	s.maint.Add(1)
	go s.keeper()
	go func() {
		s.workers.Wait()
		close(s.done)
		s.loops.Wait()
		close(s.finished)
	}()
	return nil
}

// Wake makes the scheduler claim now instead of at the end of its poll interval.
func (s *Scheduler) Wake() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started && !s.stopped {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// Shutdown stops claiming, releases claimed items that have not started, and waits for the
// items being dispatched to finish. If ctx ends first, it cancels their contexts, waits for
// the handlers to return (handlers must honour cancellation), records those attempts as
// interrupted and returns ctx's error; store calls still pending ShutdownGrace after that are
// cancelled, and the items they were writing are swept once their leases run out. Otherwise
// every item the scheduler held is completed or released; either way no goroutine of the
// scheduler is left running when it returns.
func (s *Scheduler) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.started || s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	close(s.stop)
	s.mu.Unlock()

	var err error
	select {
	case <-s.finished:
	case <-ctx.Done():
		err = ctx.Err()
		s.endLife()
		grace := time.NewTimer(s.cfg.ShutdownGrace)
		select {
		case <-s.finished:
		case <-grace.C:
			// The database has not taken the outcomes in time: stop waiting for it. The items
			// not written keep their leases until they run out and are swept.
			s.cfg.Logger.Warn("durable: shutdown gave up waiting for the database", "instance", s.cfg.InstanceID,
				"grace", s.cfg.ShutdownGrace)
			s.dbCancel()
			<-s.finished
		}
		grace.Stop()
	}
	close(s.maintEnd)
	s.maint.Wait()
	s.endLife()
	s.dbCancel()
	return err
}

func (s *Scheduler) stopping() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

func (s *Scheduler) inflightCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.inflight)
}

func (s *Scheduler) claimLoop(capacity int) {
	defer s.loops.Done()
	defer close(s.work)
	timer := time.NewTimer(s.cfg.PollInterval)
	defer timer.Stop()
	wait := func() bool {
		timer.Reset(s.cfg.PollInterval)
		select {
		case <-s.stop:
			return false
		case <-s.wake:
		case <-timer.C:
		}
		return true
	}
	for !s.stopping() {
		free := capacity - s.inflightCount()
		if free <= 0 {
			if !wait() {
				return
			}
			continue
		}
		n := min(free, s.cfg.BatchSize)
		items, err := s.q.store.Claim(s.dbCtx, s.cfg.InstanceID, s.q.clock.Now(), s.cfg.Lease, n)
		if err != nil {
			s.cfg.Logger.Error("durable: claim failed", "instance", s.cfg.InstanceID, "error", err)
		}
		if len(items) > 0 {
			s.mu.Lock()
			for _, it := range items {
				s.inflight[it.Fence()] = struct{}{}
			}
			s.mu.Unlock()
			for _, it := range items {
				s.work <- it // never blocks: at most capacity items are in flight
			}
		}
		if len(items) < n || err != nil {
			if !wait() {
				return
			}
		}
	}
}

func (s *Scheduler) worker() {
	defer s.workers.Done()
	for c := range s.work {
		if s.stopping() {
			s.done <- s.release(c)
			continue
		}
		s.done <- s.process(c)
	}
}

// release undoes a claim that was not attempted.
func (s *Scheduler) release(c Claimed) Completion {
	return Completion{Fence: c.Fence(), State: StatePending, NextAt: c.NextAt, EndedAt: s.q.clock.Now()}
}

func (s *Scheduler) process(c Claimed) Completion {
	pol := s.q.PolicyFor(c.Name)
	now := s.q.clock.Now()
	comp := Completion{Fence: c.Fence(), EndedAt: now}
	// Attempts interrupted by a shutdown do not count against the policy.
	counted := c.Attempts - c.Interruptions
	if counted > pol.MaxAttempts {
		// Its last allowed attempt was abandoned (the holder died) and used up the attempts.
		comp.State, comp.Error = StateDead, fmt.Sprintf("attempts exhausted (%d); last error: %s", pol.MaxAttempts, c.LastError)
		return comp
	}
	req, err := s.q.reg.Decode(c.Name, c.Payload)
	if err != nil {
		comp.State, comp.Error = StateDead, err.Error()
		return comp
	}
	if s.cfg.Breakers != nil {
		if remaining, open := s.breakerOpen(c, req); open {
			comp.State, comp.NextAt = StatePending, now.Add(s.breakerWait(remaining))
			return comp
		}
	}
	ctx := dispatchKey.With(s.life, Dispatch{ItemID: c.ID, Name: c.Name, Attempt: c.Attempts, Instance: s.cfg.InstanceID})
	ctx = behaviors.WithRetryOverride(ctx, behaviors.RetryPolicy{MaxAttempts: 1})
	comp.StartedAt = s.q.clock.Now()
	err = s.dispatch(ctx, req)
	comp.EndedAt = s.q.clock.Now()
	switch {
	case err == nil:
		comp.State, comp.Outcome = StateSucceeded, OutcomeSucceeded
	case s.life.Err() != nil:
		// Shutdown cancelled the dispatch. Whatever error the handler made of that (its own,
		// not always wrapping the context's), the attempt was interrupted, not failed: no
		// backoff, no dead letter, and it does not count against MaxAttempts.
		comp.State, comp.Outcome, comp.NextAt, comp.Error = StatePending, OutcomeInterrupted, comp.EndedAt, err.Error()
	case errors.Is(err, behaviors.ErrCircuitOpen):
		// The breaker opened between the check and the call: not an attempt.
		var remaining time.Duration
		if open, ok := errors.AsType[*behaviors.CircuitOpenError](err); ok {
			remaining = open.Remaining
		}
		comp.State, comp.NextAt, comp.StartedAt = StatePending, comp.EndedAt.Add(s.breakerWait(remaining)), time.Time{}
	case s.cfg.Retryable(err) && counted < pol.MaxAttempts:
		comp.State, comp.Outcome, comp.Error = StatePending, OutcomeFailed, err.Error()
		comp.NextAt = comp.EndedAt.Add(pol.Delay(counted, s.q.rand()))
	default:
		comp.State, comp.Outcome, comp.Error = StateDead, OutcomeFailed, err.Error()
	}
	return comp
}

// breakerOpen asks the breaker view about req's key. A BreakerKey or BreakerView that panics
// (a key function written for another request type) is logged and the item is dispatched as if
// the breaker were closed, rather than crashing the worker.
func (s *Scheduler) breakerOpen(c Claimed, req any) (remaining time.Duration, open bool) {
	defer func() {
		if p := recover(); p != nil {
			s.cfg.Logger.Error("durable: breaker check panicked; dispatching without it", "instance", s.cfg.InstanceID,
				"item", int64(c.ID), "name", c.Name, "panic", fmt.Sprint(p))
			remaining, open = 0, false
		}
	}()
	return s.cfg.Breakers.OpenFor(s.cfg.BreakerKey(req))
}

// breakerWait is how long an item put off by a breaker waits: until the breaker may let a
// probe through. When it may already (every probe slot is taken), the item waits about one
// poll interval, spread so that the items put off together do not all return together, and
// never spins on claim and release.
func (s *Scheduler) breakerWait(remaining time.Duration) time.Duration {
	if remaining > 0 {
		return remaining
	}
	return time.Duration(float64(s.cfg.PollInterval) * (0.5 + s.q.rand()))
}

func (s *Scheduler) dispatch(ctx context.Context, req any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = mediator.NewPanicError(p)
		}
	}()
	_, err = s.sender.SendAny(ctx, req)
	return err
}

func (s *Scheduler) completer() {
	defer s.loops.Done()
	batch := make([]Completion, 0, s.cfg.BatchSize)
	for c := range s.done {
		batch = append(batch[:0], c)
	drain:
		for len(batch) < s.cfg.BatchSize {
			select {
			case c, ok := <-s.done:
				if !ok {
					break drain
				}
				batch = append(batch, c)
			default:
				break drain
			}
		}
		s.flush(batch)
	}
}

// flush writes completions, retrying while the database fails, until Shutdown's deadline. If
// it keeps failing until then, the items' leases run out and another instance sweeps them:
// they are tried again, never lost.
func (s *Scheduler) flush(batch []Completion) {
	delay := 10 * time.Millisecond
	for {
		results, err := s.q.store.Complete(s.dbCtx, batch)
		if err == nil {
			for i, r := range results {
				if r != nil {
					s.cfg.Logger.Warn("durable: completion rejected", "instance", s.cfg.InstanceID, "item", int64(batch[i].Fence.ItemID), "error", r)
				}
			}
			break
		}
		s.cfg.Logger.Error("durable: completing items failed", "instance", s.cfg.InstanceID, "items", len(batch), "error", err)
		if s.life.Err() != nil {
			// Shutdown's deadline has passed: give up rather than hang. The leases of these
			// items run out and another instance (or the next start) sweeps and retries them.
			break
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-s.life.Done():
			t.Stop()
		}
		delay = min(2*delay, 5*time.Second)
	}
	s.mu.Lock()
	for _, c := range batch {
		delete(s.inflight, c.Fence)
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// keeper extends the leases of in-flight items and sweeps expired leases.
func (s *Scheduler) keeper() {
	defer s.maint.Done()
	hb := time.NewTicker(s.cfg.HeartbeatInterval)
	defer hb.Stop()
	sweep := time.NewTicker(s.cfg.SweepInterval)
	defer sweep.Stop()
	s.sweepOnce()
	for {
		select {
		case <-s.maintEnd:
			return
		case <-hb.C:
			s.mu.Lock()
			ids := make([]ItemID, 0, len(s.inflight))
			for f := range s.inflight {
				ids = append(ids, f.ItemID)
			}
			s.mu.Unlock()
			slices.Sort(ids)
			ids = slices.Compact(ids)
			if err := s.q.store.Extend(s.dbCtx, s.cfg.InstanceID, ids, s.q.clock.Now().Add(s.cfg.Lease)); err != nil {
				s.cfg.Logger.Error("durable: extending leases failed", "instance", s.cfg.InstanceID, "error", err)
			}
		case <-sweep.C:
			s.sweepOnce()
		}
	}
}

func (s *Scheduler) sweepOnce() {
	n, err := s.q.store.Sweep(s.dbCtx, s.q.clock.Now())
	if err != nil {
		s.cfg.Logger.Error("durable: sweeping expired leases failed", "instance", s.cfg.InstanceID, "error", err)
		return
	}
	if n > 0 {
		s.cfg.Logger.Info("durable: swept expired leases", "instance", s.cfg.InstanceID, "items", n)
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// Sweep sweeps expired leases now, as the scheduler does every SweepInterval.
func (s *Scheduler) Sweep(ctx context.Context) (int, error) {
	return s.q.store.Sweep(ctx, s.q.clock.Now())
}
