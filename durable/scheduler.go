package durable

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// SchedulerConfig configures Queue.Start: zero fields mean defaults; a negative
// value is an error, except for Retention.
type SchedulerConfig struct {
	InstanceID string // unique per instance; default host name, process id and a random suffix
	// Workers is the number of items run at once; items are claimed only for free workers,
	// so a crash charges only the items that ran. Default 4.
	Workers      int
	BatchSize    int           // items claimed, and outcomes written, per round trip; default 100
	PollInterval time.Duration // the wait when no item was due; default 1 s
	// Lease is how long a claim holds an item, extended by heartbeats; when a dead holder's
	// lease runs out the item is swept back and a late completion rejected. Default 30 s.
	Lease             time.Duration
	ScheduleLease     time.Duration // a schedule run's lease on its schedule; default Lease
	HeartbeatInterval time.Duration // how often leases are extended; under both leases; default Lease/3
	SweepInterval     time.Duration // how often expired leases are swept; default Lease/2
	// StoreTimeout bounds each database call, so a hung database is retried, not waited on;
	// under both leases. Default Lease/3: a heartbeat that timed out has time for another.
	StoreTimeout  time.Duration
	ShutdownGrace time.Duration // see Queue.Shutdown; default 5 s
	// Breakers, when set, guards the items of registrations without WithBreaker, under its own
	// key function (Registry.KeyOf, the request type's key unless it has one): before each
	// attempt the scheduler asks the item's breaker, and an item whose breaker is open is not
	// attempted; it is parked on the key until the breaker may let a probe through, only as many
	// parked items as there are probe slots run while it is half-open, and its closing frees
	// them (see WithBreaker). The scheduler listens to it and to every registry a WithBreaker
	// names. Queue.Pause with a KeyTarget holds back the items of a key whatever its breaker
	// says. Default none: a breaker in the pipeline still refuses at dispatch, and the item is
	// parked on the refusal's key, not charged an attempt.
	Breakers *breaker.Registry
	Logger   *zap.Logger // operational errors, a failing database at most every 30 s; default zap.L()
	// Retention is how long succeeded items are kept; one instance deletes older ones every
	// minute. Other states are never deleted (pending and running are work, dead ones the
	// letters' history). Default 24 h: yesterday's work stays visible, the table small.
	// Negative: forever.
	Retention time.Duration
	// OnClaim are called, in order, after each claiming round trip (which also writes the
	// outcomes of the items just finished) with its time, items claimed and error: a slow
	// claim is the first sign of a database in trouble (metrics.Recorder.OnClaim). The claim
	// loop waits for them: keep them cheap. A panic in one is logged and the next still runs.
	OnClaim []func(took time.Duration, claimed int, err error)
	// OnSettled are called, in order, once the outcome of a claim of an item is written, with
	// the item's request name and how the claim ended: "succeeded"; "retried" or "dead" (an
	// attempt failed, and the item is tried again or not; "dead" also for an item that cannot
	// be decoded or ran out of attempts); "refused" (a breaker or another refusing behavior held
	// it back: no attempt); "paused" (its breaker key is paused, Queue.Pause: no attempt);
	// "concurrency_limited" (its breaker key's concurrency limit had no free slot,
	// SetConcurrencyLimit: no attempt; not a rate limiter's refusal, which is "refused");
	// "expired" (its deadline ended it); "interrupted" (a shutdown cancelled it); "released"
	// (not attempted: a shutdown before it started, a name or a handler this instance lacks).
	// metrics.Recorder.OnSettled counts them. Called by the claim loop after the write, so a
	// reader of the queue may see an outcome before its observers hear it; every call for the
	// claims written is made before Shutdown returns.
	// Keep them cheap. A panic in one is logged and the next still runs.
	OnSettled []func(name, outcome string)
}

// logRepeat is how often a database failure that persists is logged again.
const logRepeat = 30 * time.Second

// isolationCheck is the shortest interval between two looks for a due item to run alone: with
// a short PollInterval, looking on every poll would double the statements of an idle scheduler
// (and the load on a database that is recovering), while an item waiting a second longer to run
// alone costs nothing.
const isolationCheck = time.Second

// Validate reports each problem of c, naming its field. Start calls it.
func (c SchedulerConfig) Validate() error {
	_, err := c.withDefaults()
	return err
}

func (c SchedulerConfig) withDefaults() (SchedulerConfig, error) {
	c.OnClaim, c.OnSettled = slices.Clone(c.OnClaim), slices.Clone(c.OnSettled)
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"PollInterval", c.PollInterval}, {"Lease", c.Lease}, {"ScheduleLease", c.ScheduleLease}, {"HeartbeatInterval", c.HeartbeatInterval},
		{"SweepInterval", c.SweepInterval}, {"StoreTimeout", c.StoreTimeout}, {"ShutdownGrace", c.ShutdownGrace}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s %v is negative", d.name, d.v))
		}
	}
	if c.Workers < 0 {
		errs = append(errs, fmt.Errorf("Workers %d is negative", c.Workers))
	}
	if c.BatchSize < 0 {
		errs = append(errs, fmt.Errorf("BatchSize %d is negative", c.BatchSize))
	}
	if c.InstanceID == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		c.InstanceID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if c.Workers == 0 {
		c.Workers = 4
	}
	if c.BatchSize == 0 {
		c.BatchSize = 100
	}
	if c.PollInterval == 0 {
		c.PollInterval = time.Second
	}
	if c.Lease == 0 {
		c.Lease = 30 * time.Second
	}
	if c.ScheduleLease == 0 {
		c.ScheduleLease = c.Lease
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = c.Lease / 3
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = c.Lease / 2
	}
	if c.StoreTimeout == 0 {
		c.StoreTimeout = c.Lease / 3
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = zap.L()
	}
	if c.Retention == 0 {
		c.Retention = defaultRetention
	}
	if len(errs) == 0 {
		for _, d := range []struct {
			name string
			v    time.Duration
		}{{"HeartbeatInterval", c.HeartbeatInterval}, {"SweepInterval", c.SweepInterval}, {"StoreTimeout", c.StoreTimeout}} {
			if d.v <= 0 {
				errs = append(errs, fmt.Errorf("Lease %v is too short: %s would be %v", c.Lease, d.name, d.v))
			}
		}
		if c.HeartbeatInterval >= c.Lease {
			errs = append(errs, fmt.Errorf("HeartbeatInterval (%v) must be shorter than Lease (%v), or leases run out while items run",
				c.HeartbeatInterval, c.Lease))
		}
		if c.StoreTimeout >= c.Lease {
			errs = append(errs, fmt.Errorf("StoreTimeout (%v) must be shorter than Lease (%v), or a slow heartbeat outlives the lease it extends",
				c.StoreTimeout, c.Lease))
		}
		if c.HeartbeatInterval >= c.ScheduleLease {
			errs = append(errs, fmt.Errorf("HeartbeatInterval (%v) must be shorter than ScheduleLease (%v), or leases run out while schedule runs run",
				c.HeartbeatInterval, c.ScheduleLease))
		}
		if c.StoreTimeout >= c.ScheduleLease {
			errs = append(errs, fmt.Errorf("StoreTimeout (%v) must be shorter than ScheduleLease (%v), or a slow heartbeat outlives the lease it extends",
				c.StoreTimeout, c.ScheduleLease))
		}
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("durable: invalid SchedulerConfig: %w", errors.Join(errs...))
	}
	return c, nil
}

// scheduler claims due items, dispatches each through the mediator as exactly one attempt, and
// records the outcome (Queue.Start runs one). Run one in every instance: instances sharing a PostgreSQL store divide
// the work between them, each item going to one instance at a time.
//
// A scheduler claims items only for free workers, so every item it holds is running. An item
// whose lease ran out while it ran (its process died) runs alone next time, so an item that
// crashes its process again is the only one charged for it: a poison item ends as a dead
// letter, its neighbours do not.
type scheduler struct {
	q      *Queue
	sender mediator.Sender
	cfg    SchedulerConfig
	health dbHealth

	mu    sync.Mutex
	state schedState
	// inflight holds the leases of the items this scheduler has claimed and not yet completed or
	// released. It is keyed by fence, not item id: after a stalled worker lost its lease, the
	// same scheduler may claim the item again while the stale dispatch still runs, and ending
	// the stale one must not forget the new one.
	inflight map[store.Fence]struct{}
	// moved holds the breaker keys whose state changed, with the registry to ask (nil: none
	// knows the key, and an item got through it): the items
	// parked on a closed one are freed, those on one that opened again wait for its next probe.
	moved map[string]*breaker.Registry
	// probing counts, per breaker key, the items dispatched while its breaker was half-open
	// and still running: no more run than it has probe slots.
	probing     map[string]int
	breakers    []*breaker.Registry // SchedulerConfig.Breakers and the registries WithBreaker names
	unknown     map[string]bool     // request names found and not registered, already warned about
	unhandled   map[string]bool     // request names the sender has no handler for, already warned about
	result      error               // Shutdown's outcome, set before finished is closed
	cause       error               // why the dispatches were cancelled, once they were
	interrupted int                 // attempts recorded as interrupted

	// base is the parent of store calls; it ends when the scheduler has stopped.
	base    context.Context
	endBase context.CancelFunc
	// life is the parent of every dispatch context; Shutdown cancels it at its deadline.
	life    context.Context
	endLife context.CancelFunc

	stop      chan struct{} // closed by Shutdown: claim no more
	wake      chan struct{} // claim now
	unpark    chan struct{} // a breaker changed state: see moved
	work      chan job
	done      chan finished
	keeperEnd chan struct{}
	finished  chan struct{}

	removeListeners []func() // remove breakerChanged from the registries

	graceOnce  sync.Once
	graceTimer *time.Timer
	graceEnd   chan struct{} // closed when ShutdownGrace has passed

	sources sync.Map // reflect.Type → retryPolicySource (nil interface when none)
	budgets sync.Map // request name → budgetChoice (budget.go)

	cron *cronLoop // runs the queue's schedules (schedule.go)
	// cronWake makes the schedule loop read the schedules now: a change made on this instance
	// (schedulecontrol.go) applies here at once, not at the next poll.
	cronWake chan struct{}

	pauses keyPauses // the paused breaker keys (pause.go)
	limits keyLimits // the limited breaker keys (limit.go)
	// pausesRead is closed once the paused keys were first read (or the read failed): the
	// bulk loop holds its first replay back until then, as the claim loop its first claim.
	pausesRead chan struct{}
	bulk       *bulkLoop // takes up the queue's bulk actions (bulkrun.go)

	// listenCtx ends the listening connection (listenLoop) once the claim loop has returned.
	listenCtx context.Context
	endListen context.CancelFunc
	hooks     listenHooks // tests
}

type schedState uint8

const (
	stateNew schedState = iota
	stateRunning
	stateStopping
)

// newScheduler returns a scheduler that dispatches q's items through sender (usually the
// *mediator.Mediator). Start it with Start and stop it with Shutdown. It refuses a
// configuration with negative values or durations that would derive to zero.
func newScheduler(q *Queue, sender mediator.Sender, cfg SchedulerConfig) (*scheduler, error) {
	if q == nil {
		return nil, errors.New("durable: Start: nil queue")
	}
	if err := checkSender("Start", sender); err != nil {
		return nil, err
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &scheduler{
		q: q, sender: sender, cfg: cfg,
		inflight:  map[store.Fence]struct{}{},
		moved:     map[string]*breaker.Registry{},
		probing:   map[string]int{},
		breakers:  q.breakers(cfg.Breakers),
		unknown:   map[string]bool{},
		unhandled: map[string]bool{},
		stop:      make(chan struct{}),
		wake:      make(chan struct{}, 1),
		cronWake:  make(chan struct{}, 1),
		unpark:    make(chan struct{}, 1),
		work:      make(chan job, cfg.Workers), // never full: items go only to free workers
		done:      make(chan finished, cfg.Workers),
		keeperEnd: make(chan struct{}),
		finished:  make(chan struct{}),
		graceEnd:  make(chan struct{}),

		pausesRead: make(chan struct{}),
	}
	s.health = dbHealth{log: cfg.Logger, instance: cfg.InstanceID}
	s.bulk = newBulkLoop(s)
	s.base, s.endBase = context.WithCancel(context.Background())
	s.life, s.endLife = context.WithCancel(context.Background())
	s.listenCtx, s.endListen = context.WithCancel(context.Background())
	return s, nil
}

// InstanceID returns the id this scheduler writes into leases and attempt rows.
func (s *scheduler) InstanceID() string { return s.cfg.InstanceID }

// Start starts the claim loop, the workers and the lease keeper. It fails with ErrStarted if
// the scheduler is running and with ErrStopped once Shutdown was called (a scheduler runs
// once; make a new one to run again).
func (s *scheduler) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case stateRunning:
		return ErrStarted
	case stateStopping:
		return ErrStopped
	}
	s.state = stateRunning
	s.q.running.Store(s)
	for _, reg := range s.breakers {
		s.removeListeners = append(s.removeListeners, reg.AddListener(func(c breaker.StateChange) { s.breakerChanged(reg, c) }))
	}
	var workers sync.WaitGroup
	for range s.cfg.Workers {
		workers.Go(s.worker)
	}
	s.startCron()
	s.startBulk()
	keeper := make(chan struct{})
	go func() {
		defer close(keeper)
		s.keeper()
	}()
	pruner := make(chan struct{})
	go func() {
		defer close(pruner)
		s.pruner()
	}()
	listener := make(chan struct{})
	go func() {
		defer close(listener)
		s.listenLoop()
	}()
	watcher := make(chan struct{})
	go func() {
		defer close(watcher)
		s.watchPauses()
	}()
	go func() {
		// The paused keys are read before the first claim, so that a restart holds them back
		// as the instance did before; then by watchPauses.
		s.lookAtPauses()
		s.lookAtLimits()
		close(s.pausesRead)
		idle := s.run()
		s.endListen()
		<-listener
		close(s.work) // workers exit once their current item is done
		close(s.keeperEnd)
		<-keeper
		<-pruner
		<-watcher
		if idle {
			workers.Wait()
		}
		s.waitCron()
		s.waitBulk()
		s.mu.Lock()
		if s.graceTimer != nil {
			s.graceTimer.Stop()
		}
		s.mu.Unlock()
		for _, remove := range s.removeListeners {
			remove()
		}
		s.q.running.CompareAndSwap(s, nil)
		s.endLife()
		s.endBase()
		close(s.finished)
	}()
	return nil
}

// Wake makes the scheduler claim now instead of at the end of its poll interval.
func (s *scheduler) Wake() { signal(s.wake) }

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Shutdown stops the scheduler and waits for it to stop: it claims nothing more, releases
// claimed items that have not started, waits for the items being dispatched and writes their
// outcomes. If ctx ends first, it cancels the dispatches' contexts; the handlers then have
// ShutdownGrace to return (they must honour cancellation), and their attempts are recorded as
// interrupted. Outcomes are written as each handler returns; once every handler has returned
// (or ShutdownGrace after ctx ended has passed), the database has what is left of the grace to
// take the rest, and the store call still in flight when the grace ends is cancelled. So
// Shutdown returns within ctx's deadline plus ShutdownGrace, even when a handler ignores
// cancellation or the database is gone; what it could not finish keeps its lease until the
// lease runs out and is then swept and run again, never lost. The replays of a bulk action in
// flight are waited for, and given up on, in the same way; the action is handed to the next
// instance, or keeps its lease when the grace is over, and goes on from its cursor.
//
// Every call, concurrent ones included, waits for the same stop and returns its outcome: nil
// when every item was completed or released, otherwise an error saying what was left (items
// interrupted, handlers that had not returned, outcomes the database did not take) and why.
// Shutdown before Start stops the scheduler without running it. A handler that ignores
// cancellation is the only goroutine that may outlive Shutdown.
func (s *scheduler) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	switch s.state {
	case stateNew:
		s.state = stateStopping
		close(s.stop)
		s.endListen()
		s.endLife()
		s.endBase()
		close(s.finished)
	case stateRunning:
		s.state = stateStopping
		close(s.stop)
	}
	s.mu.Unlock()
	select {
	case <-s.finished:
	case <-ctx.Done():
		s.mu.Lock()
		if s.cause == nil {
			s.cause = ctx.Err()
			s.endLife()
		}
		s.mu.Unlock()
		s.startGrace()
		<-s.finished
	}
	return s.result
}

func (s *scheduler) stopping() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

// storeCtx bounds one store call.
func (s *scheduler) storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.base, s.cfg.StoreTimeout)
}

// run is the claim loop. It claims items only for free workers, after writing the outcomes of
// the items that finished, so an item never starts before the outcome of one that finished
// earlier is stored (an item that then crashes the process is not charged to them). Before
// such a round trip it gathers the outcomes of the items it claimed last (see gatherWait). It
// returns when the scheduler has stopped, reporting whether every worker is idle.
func (s *scheduler) run() (idle bool) {
	var (
		running   int                // items handed to workers whose completion has not come back
		pending   []store.Completion // completions not yet written
		isolating bool               // an item claimed alone is running
		drain     bool               // an item to run alone is due: claim nothing until idle
		lastCheck time.Time          // last look for a due item to run alone
		writeWait = 10 * time.Millisecond
		lastErr   error
		trip      time.Duration // a recent round trip's time, smoothed: how long gathering may take
		claims    uint64        // claims so far, the tag of the items each hands out
		fresh     uint64        // the first claim since outcomes were last written
		young     int           // items of those claims still running: the ones gathering waits for
	)
	timer := time.NewTimer(0)
	defer timer.Stop()
	retry := time.NewTimer(writeWait)
	retry.Stop() // armed only when a write fails
	gathering := time.NewTimer(0)
	gathering.Stop() // armed only while gathering
	stopC := s.stop  // nil once seen closed, so the select does not spin on it
	collect := func(f finished) {
		running--
		if f.claim >= fresh {
			young--
		}
		pending = append(pending, f.Completion)
	}
	hand := func(items []store.Claimed) int {
		claims++
		young += len(items)
		return s.handOut(items, claims)
	}
	written := func() { fresh, young = claims+1, 0 }
	for {
		// Take every completion that has arrived.
	drain:
		for {
			select {
			case c := <-s.done:
				collect(c)
			default:
				break drain
			}
		}
		if isolating && running == 0 {
			// The item run alone has ended: look for the next one now, not an isolation check
			// later, so the items a crash left to run alone run one after another.
			isolating, lastCheck = false, time.Time{}
		}
		stopping := s.stopping()
		if stopping {
			stopC = nil
		}
		now := s.q.clock.Now()
		// Look for a due item to run alone at most once per isolation check: a cheap indexed
		// lookup, where claiming one on every idle turn would cost a statement per item.
		if !stopping && !drain && !isolating && time.Since(lastCheck) >= max(s.cfg.PollInterval, isolationCheck) {
			lastCheck = time.Now()
			ctx, cancel := s.storeCtx()
			due, err := s.q.store.IsolatedDue(ctx, now)
			cancel()
			s.noteStore("look for items to run alone", err)
			drain = due
		}
		writeFailed, claimed, short := false, false, false
		if !stopping && len(pending) > 0 && len(pending) <= s.cfg.BatchSize && !isolating && !drain && s.cfg.Workers > running {
			// The usual turn: the outcomes of the items that finished and the claim of as many
			// items as there are free workers, in one round trip.
			if young > 0 && lastErr == nil {
				// Wait a little for the items claimed since the last write that still run, so
				// this round trip also carries their outcomes and claims for their workers (see
				// gatherWait). Items that were already running then are not waited for: they
				// have shown they are slow.
				gathering.Reset(gatherWait(trip))
			gather:
				for young > 0 && len(pending) < s.cfg.BatchSize {
					select {
					case c := <-s.done:
						collect(c)
					case <-gathering.C:
						break gather
					case <-stopC:
						break gather
					}
				}
				gathering.Stop()
				now = s.q.clock.Now()
			}
			n := min(s.cfg.Workers-running, s.cfg.BatchSize)
			items, took, err := s.writeAndClaim(pending, n, now, lastErr != nil)
			trip = (3*trip + took) / 4
			if err != nil {
				writeFailed, lastErr = true, err
			} else {
				pending, claimed, short = pending[:0], true, len(items) < n
				writeWait, lastErr = 10*time.Millisecond, nil
				written()
				running += hand(items)
			}
		}
		for !writeFailed && len(pending) > 0 {
			n := min(len(pending), s.cfg.BatchSize)
			if err := s.write(pending[:n], lastErr != nil); err != nil {
				writeFailed, lastErr = true, err
				break
			}
			pending = slices.Delete(pending, 0, n)
			writeWait, lastErr = 10*time.Millisecond, nil
			written()
		}
		if stopping {
			if running == 0 {
				if len(pending) == 0 {
					s.finish(0, 0, nil)
					return true
				}
				s.startGrace() // every handler has returned: the database gets the grace
			}
		} else if !writeFailed {
			s.unparkClosed()
			s.wakeLimited()
			free := s.cfg.Workers - running
			switch {
			case claimed || isolating || free == 0:
			case running == 0 && drain:
				if n := hand(s.claim(true, 1, now)); n > 0 {
					isolating, drain, running = true, false, running+n
					break
				}
				drain = false
				fallthrough
			case !drain:
				n := min(free, s.cfg.BatchSize)
				got := hand(s.claim(false, n, now))
				running += got
				short = got < n
			}
			if !short && !isolating && !drain && s.cfg.Workers-running > 0 {
				continue // a full batch, capped by BatchSize, and workers still free: claim again
			}
		}
		// Wait for something to do.
		if writeFailed {
			retry.Reset(writeWait)
			writeWait = min(2*writeWait, time.Second)
		} else if !stopping {
			timer.Reset(s.cfg.PollInterval)
		}
		select {
		case c := <-s.done:
			collect(c)
		case <-s.wake:
		case <-s.unpark:
		case <-timer.C:
		case <-retry.C:
		case <-stopC:
		case <-s.graceEnd:
			// Give up: the items left keep their leases until they run out and are swept.
			s.finish(running, len(pending), lastErr)
			return running == 0
		}
	}
}

// startGrace starts ShutdownGrace once: when Shutdown's context ends, or when every handler
// has returned after Shutdown began. At its end the store call in flight (a database that does
// not answer) is cancelled and the loop gives up.
func (s *scheduler) startGrace() {
	s.graceOnce.Do(func() {
		t := time.AfterFunc(s.cfg.ShutdownGrace, func() {
			s.endBase()
			close(s.graceEnd)
		})
		s.mu.Lock()
		s.graceTimer = t
		s.mu.Unlock()
	})
}

// finish records Shutdown's outcome.
func (s *scheduler) finish(running, unwritten int, dbErr error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	if s.cause != nil && (running > 0 || s.interrupted > 0 || unwritten > 0) {
		if s.interrupted > 0 {
			errs = append(errs, fmt.Errorf("durable: shutdown's context ended before a clean stop (%w); %d running items were interrupted",
				s.cause, s.interrupted))
		} else {
			errs = append(errs, fmt.Errorf("durable: shutdown's context ended before a clean stop (%w)", s.cause))
		}
	}
	if running > 0 {
		errs = append(errs, fmt.Errorf("durable: shutdown gave up on %d handlers that did not return within ShutdownGrace (%v) of their cancellation; their items run again once their leases run out",
			running, s.cfg.ShutdownGrace))
		s.cfg.Logger.Warn("durable: shutdown gave up on handlers that ignore cancellation", zap.String("instance", s.cfg.InstanceID),
			zap.Int("handlers", running), zap.Duration("grace", s.cfg.ShutdownGrace))
	}
	if unwritten > 0 {
		errs = append(errs, fmt.Errorf("durable: shutdown could not record the outcomes of %d items within ShutdownGrace (%v): %w; those items run again once their leases run out",
			unwritten, s.cfg.ShutdownGrace, dbErr))
		s.cfg.Logger.Warn("durable: shutdown gave up waiting for the database", zap.String("instance", s.cfg.InstanceID),
			zap.Int("outcomes", unwritten), zap.Duration("grace", s.cfg.ShutdownGrace), zap.Error(dbErr))
	}
	s.result = errors.Join(errs...)
}

func (s *scheduler) claim(alone bool, n int, now time.Time) []store.Claimed {
	ctx, cancel := s.storeCtx()
	defer cancel()
	var (
		items []store.Claimed
		err   error
	)
	start := time.Now()
	if alone {
		items, err = s.q.store.ClaimIsolated(ctx, s.cfg.InstanceID, now, s.cfg.Lease)
	} else if s.cfg.Workers == 1 {
		// With one worker every claim runs alone: a crash while it runs is its own.
		items, err = s.q.store.ClaimAlone(ctx, s.cfg.InstanceID, now, s.cfg.Lease, n)
	} else {
		items, err = s.q.store.Claim(ctx, s.cfg.InstanceID, now, s.cfg.Lease, n)
	}
	s.noteClaim(start, len(items), err)
	s.noteStore("claim", err)
	s.hold(items)
	return items
}

// job is a claimed item handed to a worker, tagged with the claim that claimed it.
type job struct {
	store.Claimed
	claim uint64
}

// finished is the outcome of a job, with the job's tag.
type finished struct {
	store.Completion
	claim uint64
}

// handOut gives claimed items, tagged with claim, to free workers, each of which starts at once,
// and returns how many.
func (s *scheduler) handOut(items []store.Claimed, claim uint64) int {
	for i := range items {
		s.work <- job{items[i], claim}
		items[i] = store.Claimed{} // the worker holds the only copy of the payload now
	}
	return len(items)
}

// hold records the leases of claimed items, for the heartbeats.
func (s *scheduler) hold(items []store.Claimed) {
	if len(items) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, it := range items {
		s.inflight[it.Fence()] = struct{}{}
	}
}

// write stores completions in one round trip. retried says an earlier write of the batch
// failed: the database may have applied it all the same (its answer was lost), and a
// rejection then only says so.
func (s *scheduler) write(batch []store.Completion, retried bool) error {
	ctx, cancel := s.storeCtx()
	results, err := s.q.store.Complete(ctx, batch)
	cancel()
	s.noteStore("record outcomes", err)
	if err != nil {
		return err
	}
	s.settle(batch, results, retried)
	return nil
}

// settle logs the rejected completions of a written batch, announces its new dead letters and
// forgets its leases.
func (s *scheduler) settle(batch []store.Completion, results []error, retried bool) {
	for i, r := range results {
		if r == nil {
			continue
		}
		if retried && s.alreadyRecorded(batch[i]) {
			continue
		}
		s.cfg.Logger.Warn("durable: completion rejected", zap.String("instance", s.cfg.InstanceID),
			zap.Int64("item", int64(batch[i].Fence.ItemID)), zap.Error(r))
	}
	s.notifyDead(batch, results)
	s.notifySettled(batch, results)
	s.recheckVerdicts(batch, results)
	s.freeAfterSuccess(batch, results)
	s.slotsFreed(batch, results)
	s.mu.Lock()
	for _, c := range batch {
		delete(s.inflight, c.Fence)
		if c.Outcome == store.OutcomeInterrupted {
			s.interrupted++
		}
	}
	s.mu.Unlock()
}

// alreadyRecorded reports whether c's attempt row exists, written by this instance: an earlier
// write of c that timed out was applied after all.
func (s *scheduler) alreadyRecorded(c store.Completion) bool {
	if c.Outcome == "" {
		return false
	}
	ctx, cancel := s.storeCtx()
	defer cancel()
	as, err := s.q.store.Attempts(ctx, c.Fence.ItemID)
	if err != nil {
		return false
	}
	for _, a := range as {
		if a.Number == c.Fence.Attempt && a.Instance == c.Fence.Owner && a.Outcome == c.Outcome {
			return true
		}
	}
	return false
}

// writeAndClaim stores completions and claims up to n items in one round trip (see write and
// claim).
// and how long the round trip took.
func (s *scheduler) writeAndClaim(batch []store.Completion, n int, now time.Time, retried bool) ([]store.Claimed, time.Duration, error) {
	ctx, cancel := s.storeCtx()
	start := time.Now()
	results, items, err := s.q.store.CompleteAndClaim(ctx, batch, s.cfg.InstanceID, now, s.cfg.Lease, n, s.cfg.Workers == 1)
	took := time.Since(start)
	cancel()
	s.noteClaim(start, len(items), err)
	s.noteStore("record outcomes and claim", err)
	if err != nil {
		return nil, took, err
	}
	s.settle(batch, results, retried)
	s.hold(items)
	return items, took, nil
}

// minGather and maxGather bound gatherWait. Below a millisecond the bound hardly matters: an
// idle process wakes from a shorter timer about a millisecond late anyway. Above maxGather a
// round trip is slow enough to be the drain's limit, and outcomes are not held back longer for
// the sake of a fuller batch.
const (
	minGather = 100 * time.Microsecond
	maxGather = 5 * time.Millisecond
)

// gatherWait is how long the claim loop waits for the items claimed since the last write before
// it writes the outcomes of those that finished and claims for their workers: half a recent
// round trip. With fast handlers they finish well within it, so each round trip carries a whole
// batch instead of the workers splitting into groups that take turns at the database (each
// paying a round trip for part of the batch). When one of them is slow, the loop goes ahead
// after at most half a round trip, the most a fuller batch could have saved, and does not wait
// for that item again.
func gatherWait(trip time.Duration) time.Duration {
	return min(max(trip/2, minGather), maxGather)
}

// noteClaim tells SchedulerConfig.OnClaim about a claim that started at start.
func (s *scheduler) noteClaim(start time.Time, claimed int, err error) {
	if len(s.cfg.OnClaim) == 0 {
		return
	}
	took := time.Since(start)
	for _, on := range s.cfg.OnClaim {
		func() {
			defer func() {
				if p := recover(); p != nil {
					s.cfg.Logger.Error("durable: OnClaim panicked", zap.String("panic", fmt.Sprint(p)))
				}
			}()
			on(took, claimed, err)
		}()
	}
}

// recheckVerdicts makes sure that the items of batch parked to wait for a breaker's verdict
// are not left waiting out Recheck when the breaker decided before their park was written (its
// state change freed or moved the items parked on it then, not these): it notes the keys of
// those whose breakers have decided by now, as a state change does.
func (s *scheduler) recheckVerdicts(batch []store.Completion, results []error) {
	for i, c := range batch {
		if results[i] != nil || !c.Verdict {
			continue
		}
		reg, a := s.strictest(c.ParkedKey)
		if reg == nil || a.State == breaker.StateHalfOpen && a.FreeProbes == 0 {
			continue // still deciding: its state change will free or move them
		}
		s.mu.Lock()
		if s.state == stateRunning {
			s.moved[c.ParkedKey] = reg
		}
		s.mu.Unlock()
		signal(s.unpark)
	}
}

// freeAfterSuccess notes the keys that items parked on them got through (an item's success
// after it was parked on the key): the items still parked there are freed unless a breaker
// holds the key back. That is how the items parked to wait for a verdict that no longer comes
// (the instance whose probe it was died, and this one's breaker never opened) go as soon as one
// of them has shown the endpoint is back, not a Recheck later.
func (s *scheduler) freeAfterSuccess(batch []store.Completion, results []error) {
	for i, c := range batch {
		if results[i] != nil || c.Freed == "" {
			continue
		}
		reg, a := s.strictest(c.Freed)
		if reg != nil && a.Refuses() {
			continue
		}
		s.mu.Lock()
		if s.state == stateRunning {
			s.moved[c.Freed] = reg
		}
		s.mu.Unlock()
		signal(s.unpark)
	}
}

// strictest asks every registry the scheduler knows about key and returns the one that holds
// it back most (an open breaker before a half-open one without free probe slots, before one
// with some, before a closed one) with its answer; a registry that does not know key says
// closed. nil without registries.
func (s *scheduler) strictest(key string) (*breaker.Registry, breaker.Admission) {
	rank := func(a breaker.Admission) int {
		switch {
		case a.State == breaker.StateOpen:
			return 3
		case a.State == breaker.StateHalfOpen && a.FreeProbes == 0:
			return 2
		case a.State == breaker.StateHalfOpen:
			return 1
		}
		return 0
	}
	var (
		best *breaker.Registry
		ba   breaker.Admission
	)
	for _, reg := range s.breakers {
		if a := s.admission(reg, key); best == nil || rank(a) > rank(ba) {
			best, ba = reg, a
		}
	}
	return best, ba
}

// notifySettled tells SchedulerConfig.OnSettled about the completions of batch the store took.
func (s *scheduler) notifySettled(batch []store.Completion, results []error) {
	if len(s.cfg.OnSettled) == 0 {
		return
	}
	for i, c := range batch {
		if results[i] != nil {
			continue
		}
		outcome := settledOutcome(c)
		for _, on := range s.cfg.OnSettled {
			func() {
				defer func() {
					if p := recover(); p != nil {
						s.cfg.Logger.Error("durable: OnSettled panicked", zap.String("panic", fmt.Sprint(p)))
					}
				}()
				on(c.Name, outcome)
			}()
		}
	}
}

// settledOutcome names how c ended, for SchedulerConfig.OnSettled.
func settledOutcome(c store.Completion) string {
	switch {
	case c.Expired:
		return string(record.OutcomeExpired)
	case c.Paused:
		return outcomePaused
	case c.Limited:
		return outcomeLimited
	case c.Refused:
		return string(record.OutcomeRefused)
	case c.State == store.StateSucceeded:
		return string(record.OutcomeSucceeded)
	case c.State == store.StateDead:
		return "dead"
	case c.Outcome == store.OutcomeInterrupted:
		return string(record.OutcomeInterrupted)
	case c.Outcome == store.OutcomeFailed:
		return "retried"
	}
	return "released"
}

// noteStore logs a failed store call (rate-limited) or a recovery.
func (s *scheduler) noteStore(op string, err error) {
	if err != nil {
		s.health.failed(op, err)
	} else {
		s.health.ok()
	}
}

func (s *scheduler) worker() {
	for j := range s.work {
		if s.stopping() {
			s.done <- finished{s.release(j.Claimed), j.claim}
			continue
		}
		s.done <- finished{s.process(&j.Claimed), j.claim}
	}
}

// release undoes a claim that was not attempted.
func (s *scheduler) release(c store.Claimed) store.Completion {
	return store.Completion{Fence: c.Fence(), State: store.StatePending, NextAt: c.NextAt, EndedAt: s.q.clock.Now(), ParkedKey: c.ParkedKey, Name: c.Name}
}

// process dispatches c as one attempt and returns its outcome. It drops c's payload once it is
// decoded, so a large payload is not held twice while the handler runs.
func (s *scheduler) process(c *store.Claimed) store.Completion {
	pol := s.q.policyFor(c.Name)
	now := s.q.clock.Now()
	comp := store.Completion{Fence: c.Fence(), EndedAt: now, Name: c.Name, ParkedKey: c.ParkedKey}
	counted := c.Counted()
	if counted > pol.MaxAttempts {
		// Its last allowed attempt was abandoned (its process died running it, alone) and used
		// up the attempts.
		comp.State, comp.Error, comp.ParkedKey = store.StateDead, fmt.Sprintf("attempts exhausted (%d); last error: %s", pol.MaxAttempts, c.LastError), ""
		return comp
	}
	if expired(c.Deadline, now) {
		comp.State, comp.Error, comp.ParkedKey, comp.Expired = store.StateDead, deadlineError(c.Deadline, c.LastError), "", true
		return comp
	}
	req, err := s.q.reg.decode(c.Name, c.Payload)
	c.Payload = nil // the decoded request is all that is needed from here on
	if errors.Is(err, ErrUnknownRequest) {
		// An instance on another version (a rolling deploy) may know the name: not attempted,
		// looked at again later, by whichever instance claims it.
		s.warnOnce(s.unknown, c.Name, "durable: request name not registered in this instance; its items wait for an instance that knows it")
		comp.State, comp.NextAt, comp.Error = store.StatePending, capAt(now.Add(s.q.recheck), c.Deadline), err.Error()
		return comp
	}
	if err != nil {
		comp.State, comp.Error, comp.ParkedKey = store.StateDead, err.Error(), ""
		return comp
	}
	if key, until, paused := s.pausedKeyOf(c, req, now); paused {
		return s.parkPaused(comp, c, key, until)
	}
	held, refusal, refused := s.admit(c, req)
	defer s.unhold(held)
	if refused {
		return s.park(comp, c, refusal.key, refusal.remaining)
	}
	ctx := s.q.withMetadata(s.life, c.Metadata, s.cfg.Logger, record.ItemID(c.ID), c.Name)
	c.Metadata = nil
	ctx = mediator.WithMarks(ctx, req, mediator.Unattended|mediator.SingleAttempt|mediator.Stored)
	ctx = s.q.withDispatch(ctx, req, Dispatch{ItemID: record.ItemID(c.ID), Name: c.Name, Attempt: c.Attempts, Instance: s.cfg.InstanceID}, s.cfg.Logger)
	// The budget before the slot: an item over budget takes no slot of its key, which it would
	// free at once (waking an item parked on it for nothing). A retry charged for an item the
	// limit then holds back is given back.
	ctx, ch, spent, over := s.chargeRetry(ctx, c, req) // a re-dispatch is a retry of its budget
	if spent != nil {
		return s.overBudget(comp, c, spent, over)
	}
	if p, ok := s.limit(&comp, c, req); !ok {
		ch.refund(ctx)
		return p
	}
	if s.life.Err() != nil {
		ch.refund(ctx)
		r := s.release(*c) // shutting down: not started
		r.Held = comp.Held // the slot it took is freed with the release: wake the items parked on it
		return r
	}
	ch.started(ctx)
	comp.StartedAt = s.q.clock.Now()
	err = s.dispatch(ctx, req)
	comp.EndedAt = s.q.clock.Now()
	comp.ParkedKey = ""
	switch {
	case err == nil:
		comp.State, comp.Outcome, comp.Freed = store.StateSucceeded, store.OutcomeSucceeded, c.ParkedKey
	case noHandler(err, req):
		// The sender has no handler for it (one Start could not ask): not attempted, looked at
		// again later, by whichever instance claims it, as an unknown name is.
		s.warnOnce(s.unhandled, c.Name, "durable: no handler for the request in this instance; its items wait for an instance that has one")
		ch.refund(ctx)
		comp.StartedAt = time.Time{}
		comp.State, comp.NextAt, comp.Error = store.StatePending, capAt(comp.EndedAt.Add(s.q.recheck), c.Deadline), err.Error()
	case behaviors.IsRefusal(err) && s.life.Err() == nil:
		// A behavior turned the call away before it reached its endpoint: an open breaker (of
		// the item's own pipeline, one that opened since the check, or the breaker of a call its
		// handler made, such as an HTTP call's per-host breaker), a full bulkhead. No attempt:
		// the item waits on the refusal's key (park undoes the start).
		// A retry its budget was charged for did not reach the dependency: given back.
		comp.Error = err.Error()
		ch.refund(ctx)
		key, remaining := refusalOf(err)
		return s.park(comp, c, key, remaining)
	case s.life.Err() != nil:
		// Shutdown cancelled the dispatch. Whatever error the handler made of that (its own,
		// not always wrapping the context's), the attempt was interrupted, not failed: no
		// backoff, no dead letter, and it does not count against MaxAttempts.
		comp.State, comp.Outcome, comp.NextAt, comp.Error = store.StatePending, store.OutcomeInterrupted, comp.EndedAt, err.Error()
	case s.retries(ctx, req, pol, err) && counted < pol.MaxAttempts:
		if expired(c.Deadline, comp.EndedAt) {
			comp.State, comp.Outcome, comp.Error, comp.Expired = store.StateDead, store.OutcomeFailed, deadlineError(c.Deadline, err.Error()), true
			break
		}
		comp.State, comp.Outcome, comp.Error = store.StatePending, store.OutcomeFailed, err.Error()
		comp.NextAt = capAt(comp.EndedAt.Add(max(pol.Delay(counted, s.q.rand()), behaviors.RetryAfter(err))), c.Deadline)
		if tripped, ok := errors.AsType[*breaker.TrippedError](err); ok {
			// Its failure opened the breaker: it waits on it as the items it refuses do, so the
			// breaker's closing or reset frees it with them.
			comp.ParkedKey = tripped.Key
		}
	default:
		comp.State, comp.Outcome, comp.Error = store.StateDead, store.OutcomeFailed, err.Error()
	}
	return comp
}

// expired reports whether deadline (zero: none) has passed at now.
func expired(deadline, now time.Time) bool { return !deadline.IsZero() && !now.Before(deadline) }

// deadlineError is the error of an item its deadline ended.
func deadlineError(deadline time.Time, last string) string {
	if last == "" {
		return fmt.Sprintf("deadline passed (%s)", deadline.UTC().Format(time.RFC3339Nano))
	}
	return fmt.Sprintf("deadline passed (%s); last error: %s", deadline.UTC().Format(time.RFC3339Nano), last)
}

// capAt returns t, or deadline when that is earlier: an item is due at its deadline at the
// latest, so that it dies then, not when it would have been tried next.
func capAt(t, deadline time.Time) time.Time {
	if !deadline.IsZero() && deadline.Before(t) {
		return deadline
	}
	return t
}

// refusalOf returns the key of the breaker that refused (empty for another refusing behavior,
// whose key means nothing to the breakers) and the time it says to wait.
func refusalOf(err error) (key string, remaining time.Duration) {
	if r, ok := errors.AsType[behaviors.Refusal](err); ok && r.Refusal().By == "breaker" {
		key = r.Refusal().Key
	}
	return key, behaviors.RetryAfter(err)
}

// refusal is why admit turned an item away: the breaker key and the time until it may probe (0:
// its probes are out, and it waits for their verdict).
type refusal struct {
	key       string
	remaining time.Duration
}

// admit asks the breakers that guard c (the key of its registration's or the queue's registry,
// and the key it is parked on) whether it may run now. It returns the half-open keys it took a
// probe of (unhold gives them back when the attempt has ended), or the refusal.
func (s *scheduler) admit(c *store.Claimed, req any) (held []string, r refusal, refused bool) {
	reg, key := s.guardOf(c, req)
	if reg != nil && key != "" {
		if r, refused = s.ask([]*breaker.Registry{reg}, key, &held); refused {
			s.unhold(held)
			return nil, r, true
		}
	}
	if c.ParkedKey != "" && c.ParkedKey != key {
		// Parked on a refusal: ask every registry the scheduler knows for that key.
		if r, refused = s.ask(s.breakers, c.ParkedKey, &held); refused {
			s.unhold(held)
			return nil, r, true
		}
	}
	return held, refusal{}, false
}

// ask asks regs about key; while a breaker is half-open it lets through no more items than it
// has free probe slots, counting those it let through that still run (held).
func (s *scheduler) ask(regs []*breaker.Registry, key string, held *[]string) (refusal, bool) {
	for _, reg := range regs {
		a := s.admission(reg, key)
		switch a.State {
		case breaker.StateOpen:
			return refusal{key, a.Remaining}, true
		case breaker.StateHalfOpen:
			s.mu.Lock()
			ok := s.probing[key] < a.FreeProbes
			if ok {
				s.probing[key]++
			}
			s.mu.Unlock()
			if !ok {
				return refusal{key, 0}, true
			}
			*held = append(*held, key)
		}
	}
	return refusal{}, false
}

// unhold gives back the probes admit took.
func (s *scheduler) unhold(keys []string) {
	if len(keys) == 0 {
		return
	}
	s.mu.Lock()
	for _, k := range keys {
		if s.probing[k]--; s.probing[k] <= 0 {
			delete(s.probing, k)
		}
	}
	s.mu.Unlock()
}

// guardOf returns the registry and key of the breaker that guards c: its registration's
// WithBreaker, or SchedulerConfig.Breakers; the key its enqueue named, or the registry's key
// function's. A key function that panics (one written for another request type) is logged and
// the item is dispatched as if no breaker guarded it, rather than crashing the worker.
func (s *scheduler) guardOf(c *store.Claimed, req any) (reg *breaker.Registry, key string) {
	if len(s.breakers) == 0 {
		return nil, "" // no breaker guards any item: nothing to look up
	}
	defer func() {
		if p := recover(); p != nil {
			s.cfg.Logger.Error("durable: breaker key function panicked; dispatching without its breaker", zap.String("instance", s.cfg.InstanceID),
				zap.Int64("item", int64(c.ID)), zap.String("name", c.Name), zap.String("panic", fmt.Sprint(p)))
			reg, key = nil, ""
		}
	}()
	var g *guard
	if r := s.q.reg.lookupName(c.Name); r != nil {
		g = r.guard
	}
	switch {
	case g != nil:
		reg = g.reg
	case s.cfg.Breakers != nil:
		reg = s.cfg.Breakers
	default:
		return nil, ""
	}
	if c.GuardKey != "" {
		return reg, c.GuardKey
	}
	if g != nil {
		return reg, g.keyOf(req)
	}
	return reg, reg.KeyOf(req)
}

// admission asks reg about key, recovering from a panic of an observer the state change it
// makes calls.
func (s *scheduler) admission(reg *breaker.Registry, key string) (a breaker.Admission) {
	defer func() {
		if p := recover(); p != nil {
			s.cfg.Logger.Error("durable: breaker check panicked; dispatching without it", zap.String("instance", s.cfg.InstanceID),
				zap.String("key", key), zap.String("panic", fmt.Sprint(p)))
			a = breaker.Admission{State: breaker.StateClosed}
		}
	}()
	return reg.Admission(key)
}

// park undoes the claim of an item a breaker (key, when known) or another refusing behavior
// turned away: no attempt. An item waiting on an open breaker is due when the breaker may let a
// probe through, spread over a tenth of the remaining time after it so that the items parked
// together do not all come back in one claim; one whose breaker's probes are out waits for their
// verdict (the breaker's closing frees it, its opening again moves it to the next probe; Recheck
// bounds the wait should neither reach this instance); one refused by something else (a full
// bulkhead) is due again about a poll interval later. Never later than its deadline.
func (s *scheduler) park(comp store.Completion, c *store.Claimed, key string, remaining time.Duration) store.Completion {
	comp.State, comp.Outcome, comp.ParkedKey, comp.StartedAt = store.StatePending, "", key, time.Time{}
	var wait time.Duration
	switch {
	case remaining > 0:
		wait = remaining + time.Duration(s.q.rand()*float64(remaining)/10)
	case key != "":
		wait, comp.Verdict = s.q.recheck, true
	default:
		wait = time.Duration(float64(s.cfg.PollInterval) * (0.5 + s.q.rand()))
	}
	comp.NextAt = capAt(comp.EndedAt.Add(wait), c.Deadline)
	comp.Refused = true
	return comp
}

// warnOnce logs msg once per request name in seen (unknown or unhandled): this instance cannot
// run the items of name, which wait.
func (s *scheduler) warnOnce(seen map[string]bool, name, msg string) {
	s.mu.Lock()
	warned := seen[name]
	seen[name] = true
	s.mu.Unlock()
	if !warned {
		s.cfg.Logger.Warn(msg, zap.String("instance", s.cfg.InstanceID), zap.String("name", name), zap.Duration("recheck", s.q.recheck))
	}
}

// retries is the scheduler's classification of a failed attempt.
func (s *scheduler) retries(ctx context.Context, req any, pol retry.Policy, err error) bool {
	return s.q.retries(ctx, req, s.policySource(req), pol, err)
}

// policySource finds the retry behavior of req's pipeline, when the sender can list it.
func (s *scheduler) policySource(req any) retryPolicySource {
	t := reflect.TypeOf(req)
	if v, ok := s.sources.Load(t); ok {
		src, _ := v.(retryPolicySource)
		return src
	}
	var src retryPolicySource
	if p, ok := s.sender.(pipelineLister); ok {
		if bs, err := p.Pipeline(t); err == nil {
			src = findPolicySource(bs)
		}
	}
	s.sources.Store(t, src)
	return src
}

// pipelineOf returns the behaviors of req's pipeline, when the sender can list them (budgetFor
// asks once per request name).
func (s *scheduler) pipelineOf(req any) []mediator.Behavior {
	if p, ok := s.sender.(pipelineLister); ok {
		bs, _ := p.Pipeline(reflect.TypeOf(req))
		return bs
	}
	return nil
}

// pipelineLister is implemented by *mediator.Mediator.
type pipelineLister interface {
	Pipeline(requestType reflect.Type) ([]mediator.Behavior, error)
}

// breakerChanged notes a state change of a breaker of reg: the items parked on a breaker that
// closed are to be freed, those on one that opened again to wait for its next probe.
func (s *scheduler) breakerChanged(reg *breaker.Registry, c breaker.StateChange) {
	if c.To == breaker.StateHalfOpen {
		return // the items parked on it come due by their times, and admit lets its probes through
	}
	s.mu.Lock()
	if s.state != stateRunning {
		s.mu.Unlock()
		return
	}
	s.moved[c.Key] = reg
	s.mu.Unlock()
	signal(s.unpark)
}

// unparkClosed frees the items parked on breakers that closed, and moves those parked on
// breakers that opened again to their next probe.
func (s *scheduler) unparkClosed() {
	s.mu.Lock()
	if len(s.moved) == 0 {
		s.mu.Unlock()
		return
	}
	moved := s.moved
	s.moved = make(map[string]*breaker.Registry, len(moved))
	s.mu.Unlock()
	now := s.q.clock.Now()
	var (
		failed   []string
		firstErr error
	)
	for key, reg := range moved {
		if _, paused := s.pauses.paused(key, now); paused {
			continue // its items wait for the pause to end: Resume, or its end, frees them
		}
		a := breaker.Admission{State: breaker.StateClosed} // no registry knows the key: an item got through it
		if reg != nil {
			a = s.admission(reg, key)
		}
		ctx, cancel := s.storeCtx()
		var err error
		switch {
		case a.State == breaker.StateOpen:
			_, err = s.q.store.Repark(ctx, key, now.Add(a.Remaining), a.Remaining/10)
		case !a.Refuses():
			// Closed, or half-open with a probe slot free (a probe ended without a verdict):
			// due now, and admit lets no more through than the breaker has slots for.
			_, err = s.q.store.Unpark(ctx, []string{key}, now)
		}
		cancel()
		if err != nil {
			failed = append(failed, key)
			firstErr = cmp.Or(firstErr, err)
		}
	}
	s.noteStore("free or move the items parked on a breaker", firstErr)
	if len(failed) > 0 {
		s.mu.Lock()
		for _, k := range failed {
			if _, ok := s.moved[k]; !ok {
				s.moved[k] = moved[k]
			}
		}
		s.mu.Unlock()
	}
}

func (s *scheduler) dispatch(ctx context.Context, req any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = mediator.NewPanicError(p)
		}
	}()
	_, err = s.sender.SendAny(ctx, req)
	return err
}

// keeper extends the leases of in-flight items and sweeps expired leases.
func (s *scheduler) keeper() {
	hb := time.NewTicker(s.cfg.HeartbeatInterval)
	defer hb.Stop()
	sweep := time.NewTicker(s.cfg.SweepInterval)
	defer sweep.Stop()
	s.sweepOnce()
	for {
		select {
		case <-s.keeperEnd:
			return
		case <-hb.C:
			s.mu.Lock()
			ids := make([]store.ItemID, 0, len(s.inflight))
			for f := range s.inflight {
				ids = append(ids, f.ItemID)
			}
			s.mu.Unlock()
			if len(ids) == 0 {
				continue // nothing to extend: no call, so nothing to say about the database
			}
			slices.Sort(ids)
			ids = slices.Compact(ids)
			ctx, cancel := s.storeCtx()
			err := s.q.store.Extend(ctx, s.cfg.InstanceID, ids, s.q.clock.Now().Add(s.cfg.Lease))
			cancel()
			s.noteStore("extend leases", err)
		case <-sweep.C:
			s.sweepOnce()
		}
	}
}

func (s *scheduler) sweepOnce() {
	ctx, cancel := s.storeCtx()
	n, err := s.q.store.Sweep(ctx, s.q.clock.Now())
	cancel()
	s.noteStore("sweep expired leases", err)
	if err != nil {
		return
	}
	if n > 0 {
		s.cfg.Logger.Info("durable: swept expired leases", zap.String("instance", s.cfg.InstanceID), zap.Int("items", n))
		s.Wake()
	}
}

// Sweep sweeps expired leases now, as the scheduler does every SweepInterval.
func (s *scheduler) Sweep(ctx context.Context) (int, error) {
	return s.q.store.Sweep(ctx, s.q.clock.Now())
}

// dbHealth logs database failures without flooding: the first failure at once, then at most
// every logRepeat while they go on, and one line when a call succeeds again.
type dbHealth struct {
	log      *zap.Logger
	instance string

	mu       sync.Mutex
	failing  bool
	since    time.Time
	failures int
	lastLog  time.Time
}

// who is the instance field of h's lines: none when h has no instance (a breaker store's).
func (h *dbHealth) who() zap.Field {
	if h.instance == "" {
		return zap.Skip()
	}
	return zap.String("instance", h.instance)
}

func (h *dbHealth) failed(op string, err error) {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failures++
	switch {
	case !h.failing:
		h.failing, h.since, h.lastLog, h.failures = true, now, now, 1
		h.log.Error("durable: database call failed", h.who(), zap.String("op", op), zap.Error(err))
	case now.Sub(h.lastLog) >= logRepeat:
		h.lastLog = now
		h.log.Error("durable: database calls still failing", h.who(), zap.String("op", op),
			zap.Error(err), zap.Int("failures", h.failures), zap.Time("since", h.since))
	}
}

func (h *dbHealth) ok() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.failing {
		return
	}
	h.failing = false
	h.log.Info("durable: database calls recovered", h.who(), zap.Int("failures", h.failures),
		zap.Duration("after", time.Since(h.since)))
}

// outcomePaused is the OnSettled outcome of an item parked on a paused breaker key, as
// SchedulerConfig.OnSettled documents it (and metrics.Recorder.OnSettled counts it): no
// record.Outcome, as no attempt was made and none is logged.
const outcomePaused = "paused"

// pausedKeyOf returns the paused breaker key that holds c back at now, if one does (its guard
// key, the key its breaker's key function gives, or the key it is parked on), and until when
// (zero: until resumed). Without paused keys it looks at nothing.
func (s *scheduler) pausedKeyOf(c *store.Claimed, req any, now time.Time) (key string, until time.Time, paused bool) {
	if !s.pauses.any() {
		return "", time.Time{}, false
	}
	_, guard := s.guardOf(c, req)
	for _, k := range []string{guard, c.GuardKey, c.ParkedKey} {
		if until, paused = s.pauses.paused(k, now); paused {
			return k, until, true
		}
	}
	return "", time.Time{}, false
}

// parkPaused undoes the claim of an item held back by a pause of key: no attempt. It is parked
// on the key, due when the pause ends or Config.Recheck later, whichever is sooner (a resume
// frees the items parked on the key at once; the recheck bounds the wait should a pause be
// replaced by a shorter one); never later than its deadline.
func (s *scheduler) parkPaused(comp store.Completion, c *store.Claimed, key string, until time.Time) store.Completion {
	// No error: the item keeps its last attempt's (a pause is no attempt, and a deadline passing
	// under it ends the item with that error); its parked key and the pause say why it waits.
	comp.State, comp.Outcome, comp.ParkedKey, comp.StartedAt, comp.Paused = store.StatePending, "", key, time.Time{}, true
	next := comp.EndedAt.Add(s.q.recheck)
	if !until.IsZero() && until.Before(next) {
		next = until
	}
	comp.NextAt = capAt(next, c.Deadline)
	return comp
}

// pauseCheck is the shortest interval between two looks at the paused breaker keys: with a
// short PollInterval, looking on every poll would add a statement per poll to every idle
// instance, while a key's pause reaching the other instances a second later costs little.
const pauseCheck = time.Second

// watchPauses looks at the paused breaker keys every PollInterval, and at most every
// pauseCheck, until the scheduler stops.
func (s *scheduler) watchPauses() {
	t := time.NewTicker(max(s.cfg.PollInterval, pauseCheck))
	defer t.Stop()
	for {
		select {
		case <-s.keeperEnd:
			return
		case <-t.C:
			s.lookAtPauses()
			s.lookAtLimits()
		}
	}
}

// lookAtPauses reads the paused breaker keys. The items parked on a key that was paused and no
// longer is (resumed on another instance, or ended by its time) are freed as the items of a
// breaker that closed are: due now, unless a breaker holds the key back.
func (s *scheduler) lookAtPauses() {
	gen := s.pauses.generation()
	ctx, cancel := s.storeCtx()
	rows, err := s.q.store.Pauses(ctx, store.PauseBreakerKey)
	cancel()
	s.noteStore("read the paused keys", err)
	if err != nil {
		return
	}
	ended := s.pauses.replace(rows, s.q.clock.Now(), gen)
	if len(ended) == 0 {
		return
	}
	regs := make([]*breaker.Registry, len(ended))
	for i, k := range ended {
		regs[i], _ = s.strictest(k) // outside the lock: asking a registry may call its listeners
	}
	s.mu.Lock()
	if s.state == stateRunning {
		for i, k := range ended {
			s.moved[k] = regs[i]
		}
	}
	s.mu.Unlock()
	signal(s.unpark)
}
