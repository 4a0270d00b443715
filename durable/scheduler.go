package durable

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/durable/driver"
	"github.com/switchboard-go/switchboard/durable/internal/claimloop"
	"github.com/switchboard-go/switchboard/durable/internal/dbhealth"
	"github.com/switchboard-go/switchboard/durable/internal/executor"
	"github.com/switchboard-go/switchboard/durable/internal/gate"
	"github.com/switchboard-go/switchboard/durable/internal/maintenance"
	"github.com/switchboard-go/switchboard/durable/internal/notify"
	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/mediator"
)

// scheduler is one instance's engine, which Queue.Start runs: it assembles the internal
// services (the admission gate, the executor, the claim loop, the rescuer and the pruner, the
// listener for items due, the schedule and bulk-action loops) and runs and stops them in order.
// Each service is one concept in a package of its own under durable/internal; this type only
// wires them and owns the instance's lifecycle. Instances sharing a PostgreSQL store divide the
// work between them, each item going to one instance at a time.
type scheduler struct {
	q      *Queue
	sender mediator.Sender
	cfg    schedulerConfig
	health dbhealth.Health

	gate    *gate.Gate
	exec    *executor.Executor
	loop    *claimloop.Loop
	leases  maintenance.Leases
	rescuer *maintenance.Rescuer
	pruner  *maintenance.Pruner
	items   *engineItems
	history *historyRecorder // nil when the driver keeps no history or HistoryRetention is negative

	mu     sync.Mutex
	state  schedState
	result error // Shutdown's outcome, set before finished is closed
	cause  error // why the dispatches were cancelled, once they were

	// base is the parent of store calls; it ends when the scheduler has stopped.
	base    context.Context
	endBase context.CancelFunc
	// life is the parent of every dispatch context; Shutdown cancels it at its deadline.
	life    context.Context
	endLife context.CancelFunc

	stop     chan struct{} // closed by Shutdown: claim no more
	finished chan struct{}

	graceOnce  sync.Once
	graceTimer *time.Timer
	graceEnd   chan struct{} // closed when ShutdownGrace has passed

	cron *cronLoop // runs the queue's schedules (schedule.go)
	// cronWake makes the schedule loop read the schedules now: a change made on this instance
	// (schedulecontrol.go) applies here at once, not at the next poll.
	cronWake chan struct{}

	// pausesRead is closed once the paused keys were first read (or the read failed): the
	// bulk loop holds its first replay back until then, as the claim loop its first claim.
	pausesRead chan struct{}
	bulk       *bulkLoop // takes up the queue's bulk actions (bulkrun.go)

	// listenCtx ends the listening connection once the claim loop has returned.
	listenCtx context.Context
	endListen context.CancelFunc
	hooks     notify.Hooks // tests
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
func newScheduler(q *Queue, sender mediator.Sender, cfg schedulerConfig) (*scheduler, error) {
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
		stop:       make(chan struct{}),
		cronWake:   make(chan struct{}, 1),
		finished:   make(chan struct{}),
		graceEnd:   make(chan struct{}),
		pausesRead: make(chan struct{}),
	}
	s.health = dbhealth.Health{Log: cfg.Logger, Instance: cfg.InstanceID}
	s.base, s.endBase = context.WithCancel(context.Background())
	s.life, s.endLife = context.WithCancel(context.Background())
	s.listenCtx, s.endListen = context.WithCancel(context.Background())
	s.items = newEngineItems(q, sender, cfg.Logger)
	s.gate = gate.New(gate.Config{
		Store: q.store, Clock: q.clock, Rand: q.rand, Recheck: q.recheck, PollInterval: cfg.PollInterval,
		StoreContext: s.storeCtx, Health: &s.health, Logger: cfg.Logger, Instance: cfg.InstanceID,
		Breakers: q.breakers(cfg.Breakers), Default: cfg.Breakers, Guard: q.reg.guardOf, Budget: s.items.budgetFor,
		Wake: s.Wake, NotifyDue: q.notifyDue,
	})
	s.exec = executor.New(executor.Config{Items: s.items, Gate: s.gate, Sender: sender, Clock: q.clock, Logger: cfg.Logger,
		Instance: cfg.InstanceID, Recheck: q.recheck, SuccessRows: q.successRows}, s.life)
	var onClaim func(time.Duration, int, error)
	if len(cfg.OnClaim) > 0 {
		onClaim = s.noteClaim // no clock read per claim for no observer
	}
	s.loop = claimloop.New(claimloop.Config{
		Store: q.store, Executor: s.exec, Gate: s.gate, Leases: &s.leases, Clock: q.clock, Instance: cfg.InstanceID,
		Workers: cfg.Workers, BatchSize: cfg.BatchSize, PollInterval: cfg.PollInterval, Lease: cfg.Lease,
		StoreContext: s.storeCtx, Health: &s.health, Logger: cfg.Logger, Stop: s.stop, GraceEnd: s.graceEnd,
		Grace: s.startGrace, OnClaim: onClaim, Settled: s.settled,
		Claimed: q.shares.add,
	})
	s.rescuer = maintenance.NewRescuer(maintenance.RescuerConfig{
		Store: q.store, Leases: &s.leases, Clock: q.clock, Instance: cfg.InstanceID, Lease: cfg.Lease,
		HeartbeatInterval: cfg.HeartbeatInterval, SweepInterval: cfg.SweepInterval, StoreContext: s.storeCtx,
		Health: &s.health, Logger: cfg.Logger, Swept: s.Wake,
	})
	history, _ := q.store.(driver.HistoryStore)
	s.pruner = maintenance.NewPruner(maintenance.PrunerConfig{
		Store: q.store, Clock: q.clock, Instance: cfg.InstanceID, Retention: cfg.Retention, StoreContext: s.storeCtx,
		History: history, HistoryRetention: cfg.HistoryRetention,
		Health: &s.health, Logger: cfg.Logger, Stopping: s.stopping,
	})
	s.bulk = newBulkLoop(s)
	if hs, ok := q.store.(driver.HistoryStore); ok && cfg.HistoryRetention >= 0 {
		s.history = &historyRecorder{st: hs, clock: q.clock, instance: cfg.InstanceID, logger: cfg.Logger, storeCtx: s.storeCtx,
			health: &s.health, gauges: q.historyGauges}
	}
	return s, nil
}

// InstanceID returns the id this scheduler writes into leases and attempt rows.
func (s *scheduler) InstanceID() string { return s.cfg.InstanceID }

// Start starts the claim loop, the workers, the gate, the rescuer, the pruner, the listener and
// the schedule and bulk-action loops. It fails with ErrStarted if the scheduler is running and
// with ErrStopped once Shutdown was called (a scheduler runs once; make a new one to run
// again).
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
	s.gate.Start()
	var workers sync.WaitGroup
	for range s.cfg.Workers {
		workers.Go(s.loop.Work)
	}
	s.startCron()
	s.startBulk()
	// The maintenance ends with the claim loop (keeperEnd), the pruner and the gate's watch at
	// once when Shutdown begins (stop).
	keeperEnd := make(chan struct{})
	var background sync.WaitGroup
	background.Go(func() { s.rescuer.Run(keeperEnd) })
	background.Go(func() { s.pruner.Run(s.stop) })
	background.Go(func() { s.gate.Watch(keeperEnd) })
	if s.history != nil {
		// The last flush, of the minute in progress, comes after the claim loop's last outcome.
		s.history.listen(s.q.breakers(s.cfg.Breakers))
		background.Go(func() { s.history.run(keeperEnd) })
	}
	listener := make(chan struct{})
	go func() {
		defer close(listener)
		notify.Listen(s.listenCtx, notifierOf(s.q.store), s.q.sender, &s.health, s.Wake, s.hooks)
	}()
	go func() {
		// The paused keys are read before the first claim, so that a restart holds them back
		// as the instance did before; then by the gate's watch.
		s.gate.Look()
		close(s.pausesRead)
		res := s.loop.Run()
		s.finish(res)
		s.endListen()
		<-listener
		s.loop.CloseWork() // workers exit once their current item is done
		close(keeperEnd)
		background.Wait()
		if res.Running == 0 {
			workers.Wait()
		}
		s.waitCron()
		s.waitBulk()
		s.mu.Lock()
		if s.graceTimer != nil {
			s.graceTimer.Stop()
		}
		s.mu.Unlock()
		s.gate.Stop()
		s.q.running.CompareAndSwap(s, nil)
		s.endLife()
		s.endBase()
		close(s.finished)
	}()
	return nil
}

// Wake makes the scheduler claim now instead of at the end of its poll interval.
func (s *scheduler) Wake() { s.loop.Wake() }

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

// noteStore logs a failed store call (rate-limited) or a recovery.
func (s *scheduler) noteStore(op string, err error) { s.health.Note(op, err) }

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

// finish records Shutdown's outcome from how the claim loop ended.
func (s *scheduler) finish(res claimloop.Result) {
	interrupted := s.loop.Interrupted()
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	if s.cause != nil && (res.Running > 0 || interrupted > 0 || res.Unwritten > 0) {
		if interrupted > 0 {
			errs = append(errs, fmt.Errorf("durable: shutdown's context ended before a clean stop (%w); %d running items were interrupted",
				s.cause, interrupted))
		} else {
			errs = append(errs, fmt.Errorf("durable: shutdown's context ended before a clean stop (%w)", s.cause))
		}
	}
	if res.Running > 0 {
		errs = append(errs, fmt.Errorf("durable: shutdown gave up on %d handlers that did not return within ShutdownGrace (%v) of their cancellation; their items run again once their leases run out",
			res.Running, s.cfg.ShutdownGrace))
		s.cfg.Logger.Warn("durable: shutdown gave up on handlers that ignore cancellation", zap.String("instance", s.cfg.InstanceID),
			zap.Int("handlers", res.Running), zap.Duration("grace", s.cfg.ShutdownGrace))
	}
	if res.Unwritten > 0 {
		errs = append(errs, fmt.Errorf("durable: shutdown could not record the outcomes of %d items within ShutdownGrace (%v): %w; those items run again once their leases run out",
			res.Unwritten, s.cfg.ShutdownGrace, res.Err))
		s.cfg.Logger.Warn("durable: shutdown gave up waiting for the database", zap.String("instance", s.cfg.InstanceID),
			zap.Int("outcomes", res.Unwritten), zap.Duration("grace", s.cfg.ShutdownGrace), zap.Error(res.Err))
	}
	s.result = errors.Join(errs...)
}

// settled follows each batch of completions the claim loop wrote: the dead letters it made are
// announced, the observers told, and the gate frees what the completions freed.
func (s *scheduler) settled(batch []store.Completion, results []error) {
	s.notifyDead(batch, results)
	s.notifySettled(batch, results)
	s.gate.Settled(batch, results)
	if s.history != nil {
		s.history.settled(batch, results)
	}
}

// Sweep sweeps expired leases now, as the scheduler does every SweepInterval.
func (s *scheduler) Sweep(ctx context.Context) (int, error) { return s.rescuer.Sweep(ctx) }

// Prune runs a prune pass now, as the scheduler does every pruneInterval, and returns how many
// items it deleted.
func (s *scheduler) Prune() int { return s.pruner.Pass() }
