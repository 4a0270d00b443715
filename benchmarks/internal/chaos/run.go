package chaos

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// WaitEvent is one (wait_event_type, wait_event) pair of pg_stat_activity and how many of a
// phase's samples of non-idle backends showed it.
type WaitEvent struct {
	// Type and Event are pg_stat_activity's wait_event_type and wait_event.
	Type, Event string
	// Samples is the number of backend samples in the phase that waited on it.
	Samples int
}

// Diagnostics is PostgreSQL's side of a phase: the bloat of the system's hot tables and what
// its backends waited on.
type Diagnostics struct {
	// DeadTuples is n_dead_tup of each hot table at the phase's end.
	DeadTuples map[string]int64
	// TableBytes is pg_total_relation_size of each hot table at the phase's end.
	TableBytes map[string]int64
	// WaitEvents are the phase's most frequent wait events, most frequent first.
	WaitEvents []WaitEvent
}

// Diagnoser samples PostgreSQL for a system's hot tables; the next step implements it on
// pg_stat_user_tables and pg_stat_activity.
type Diagnoser interface {
	// Diagnose returns the diagnostics of the phase that just ended in w.
	Diagnose(ctx context.Context, w Window) (Diagnostics, error)
}

// Config is how a scenario is run against a system. Zero fields are the defaults given.
type Config struct {
	// Clock is the time of the run; nil is RealClock.
	Clock Clock
	// Replicas is the number of replicas started; zero is 2, so that killing one leaves a fleet
	// that covers it, which is what a crash scenario measures.
	Replicas int
	// Rate is the offered rate in jobs/s; zero is 100, enough to load a replica's 1 ms handler
	// without saturating the 2-core machine the harness runs on beside PostgreSQL.
	Rate float64
	// Faults are the actions of the PostgreSQL phase kinds (postgres-restart, pg-backend-kill,
	// pool-exhaustion, idle-in-tx, active-readers). Kill-worker, start-worker and repeated-kill
	// act on the system and are built in unless given here.
	Faults map[Kind]Fault
	// Diagnoser, when set, samples PostgreSQL at the end of every phase.
	Diagnoser Diagnoser
	// DrainTimeout is how long after the last phase the harness waits for every acknowledged
	// job to complete before counting the rest lost; zero is 60 s, the chaos scenarios'
	// recovery phase, since a system that needs longer has not recovered.
	DrainTimeout time.Duration
	// DrainPoll is how often the drain checks for outstanding jobs; zero is 100 ms.
	DrainPoll time.Duration
}

// PhaseReport is the measures of one system in one phase.
type PhaseReport struct {
	// Window is when the phase ran.
	Window Window
	// Throughput is the completions finished in the phase per second.
	Throughput float64
	// Pickup is the pickup latency percentiles of the handler starts in the phase.
	Pickup Latency
	// Lost and RunTwice count the jobs of Result.Counts enqueued in the phase.
	Lost, RunTwice int
	// Recovery is, for a fault or pressure phase, how long after its end the throughput over
	// RecoveryWindow got back to RecoveryShare of the clean phase's; valid when Recovered.
	Recovery time.Duration
	// Recovered is set for a fault or pressure phase after which the throughput got back
	// before the run ended, and for every other phase.
	Recovered bool
	// Diagnostics is PostgreSQL's side, when a Diagnoser was set.
	Diagnostics Diagnostics
}

// Result is the outcome of one scenario run against one system.
type Result struct {
	// System is the system's name.
	System string
	// Timeline is what the scheduler ran.
	Timeline Timeline
	// Phases are the reports of the phases run, warmup excluded.
	Phases []PhaseReport
	// Counts are the lost, run-twice and retried jobs after the drain.
	Counts Counts
	// Rejected is the number of enqueues the system did not acknowledge.
	Rejected int
	// Drained is set when every acknowledged job completed within the drain timeout.
	Drained bool
	// CleanThroughput is the throughput of the first clean phase: the reference of recovery.
	CleanThroughput float64
	// CleanPickup is the pickup latency of the first clean phase.
	CleanPickup Latency
	// WorstPickup is the highest p95 pickup latency of any phase, with its phase's others.
	WorstPickup Latency
	// Trace is the completions of each second from TraceStart, the start of the first phase
	// after the warmup, to the end of the last phase: the throughput chart's line.
	Trace []float64
	// TraceStart is when Trace's first second began.
	TraceStart time.Time
	// Recovery is how long after the last fault or pressure phase ended the throughput over
	// RecoveryWindow got back to RecoveryShare of CleanThroughput; valid when Recovered.
	Recovery time.Duration
	// Recovered is set when it got back before the run ended.
	Recovered bool
	// Err is the run's error other than a timeout: a fault's or the system's.
	Err error
}

// Phase returns the report of the phase labelled label, and whether it ran.
func (r Result) Phase(label string) (PhaseReport, bool) {
	for _, p := range r.Phases {
		if p.Window.Phase.Label == label {
			return p, true
		}
	}
	return PhaseReport{}, false
}

// systemFault is a kill-worker, start-worker or repeated-kill acting on the system.
type systemFault struct {
	sys   System
	clock Clock
	wg    sync.WaitGroup
	stop  chan struct{}
	err   error // the repeated kill's first error, returned by Stop
}

func (f *systemFault) Start(ctx context.Context, p Phase) error {
	switch p.Kind {
	case KillWorker:
		return f.sys.Kill(ctx, p.Instance)
	case StartWorker:
		return f.sys.Restart(ctx, p.Instance)
	}
	// RepeatedKill: kill now, restart half a period later, again every period; the replica is
	// left running when the phase ends.
	f.stop, f.err = make(chan struct{}), nil
	f.wg.Go(func() {
		for {
			if f.err = f.sys.Kill(ctx, p.Instance); f.err != nil {
				return
			}
			stopped := false
			select {
			case <-f.clock.After(p.Period / 2):
			case <-f.stop:
				stopped = true
			}
			if f.err = f.sys.Restart(context.WithoutCancel(ctx), p.Instance); f.err != nil || stopped {
				return
			}
			select {
			case <-f.clock.After(p.Period - p.Period/2):
			case <-f.stop:
				return
			}
		}
	})
	return nil
}

func (f *systemFault) Stop(_ context.Context, p Phase) error {
	if p.Kind != RepeatedKill {
		return nil
	}
	close(f.stop)
	f.wg.Wait()
	return f.err
}

// Run runs the scenario against the system: starts its replicas, offers load at the rate
// times each phase's RateFactor, runs the phases, stops the load, waits up to the drain
// timeout for the acknowledged jobs, stops the system and measures. The error is the one the
// Result also carries, or the scenario's timeout; the caller's cancellation returns ctx.Err().
func Run(ctx context.Context, sys System, sc Scenario, cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	res := Result{System: sys.Name(), Timeline: Timeline{Scenario: sc}}
	if err := sc.Validate(); err != nil {
		return res, err
	}
	faults := map[Kind]Fault{}
	sf := &systemFault{sys: sys, clock: cfg.Clock}
	for _, k := range []Kind{KillWorker, StartWorker, RepeatedKill} {
		faults[k] = sf
	}
	for k, f := range cfg.Faults {
		faults[k] = f
	}
	if err := sys.Start(ctx, cfg.Replicas); err != nil {
		return res, fmt.Errorf("chaos: start %s: %w", sys.Name(), err)
	}
	rec := NewRecorder(cfg.Clock)

	var consumed sync.WaitGroup
	consumed.Go(func() {
		for c := range sys.Completions() {
			rec.Completed(c)
		}
	})

	var factor atomic.Uint64 // the phase's rate factor in thousandths
	factor.Store(1000)
	var rejected atomic.Int64
	loadCtx, stopLoad := context.WithCancel(ctx)
	var produced sync.WaitGroup
	produced.Go(func() {
		// The load is open: each job is due an interval after the previous one was due, not
		// after its enqueue returned, so a slow enqueue does not lower the offered rate: the jobs a
		// stalled enqueue held up follow it at once, as a backlog of producers would.
		next := cfg.Clock.Now()
		for n := 0; ; n++ {
			rate := cfg.Rate * float64(factor.Load()) / 1000
			next = next.Add(time.Duration(float64(time.Second) / rate))
			select {
			case <-cfg.Clock.After(next.Sub(cfg.Clock.Now())):
			case <-loadCtx.Done():
				return
			}
			j := Job{ID: fmt.Sprintf("j%d", n), Payload: make([]byte, PayloadSize)}
			rec.Enqueued(j.ID, cfg.Clock.Now())
			if err := sys.Enqueue(loadCtx, j); err != nil {
				if loadCtx.Err() != nil {
					return
				}
				rejected.Add(1)
				continue
			}
			rec.Acknowledged(j.ID)
		}
	})

	diags := map[string]Diagnostics{}
	sched := Scheduler{Clock: cfg.Clock, Faults: faults,
		OnPhase: func(p Phase) { factor.Store(uint64(p.RateFactor() * 1000)) }}
	if cfg.Diagnoser != nil {
		sched.OnPhaseEnd = func(w Window) {
			if d, err := cfg.Diagnoser.Diagnose(ctx, w); err == nil {
				diags[w.Phase.Label] = d
			}
		}
	}
	tl, runErr := sched.Run(ctx, sc)
	stopLoad()
	produced.Wait()
	res.Timeline = tl
	res.Err = tl.Err

	if ctx.Err() == nil {
		res.Drained = drain(ctx, rec, cfg)
	}
	stopErr := sys.Stop(context.WithoutCancel(ctx))
	consumed.Wait()
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if stopErr != nil && res.Err == nil {
		res.Err = fmt.Errorf("chaos: stop %s: %w", sys.Name(), stopErr)
	}
	res.Rejected = int(rejected.Load())
	res.Counts = rec.Counts()
	res.measure(rec, diags)
	if runErr == nil {
		runErr = res.Err
	}
	return res, runErr
}

func (c Config) withDefaults() Config {
	if c.Clock == nil {
		c.Clock = RealClock
	}
	if c.Replicas <= 0 {
		c.Replicas = 2
	}
	if c.Rate <= 0 {
		c.Rate = 100
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 60 * time.Second
	}
	if c.DrainPoll <= 0 {
		c.DrainPoll = 100 * time.Millisecond
	}
	return c
}

// drain waits until no acknowledged job is outstanding or the drain timeout passes.
func drain(ctx context.Context, rec *Recorder, cfg Config) bool {
	deadline := cfg.Clock.Now().Add(cfg.DrainTimeout)
	for rec.Outstanding() > 0 {
		if !cfg.Clock.Now().Before(deadline) {
			return false
		}
		select {
		case <-cfg.Clock.After(min(cfg.DrainPoll, deadline.Sub(cfg.Clock.Now()))):
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// measure fills the phase reports and the recovery from the recorder.
func (r *Result) measure(rec *Recorder, diags map[string]Diagnostics) {
	finishes := rec.Finishes()
	for _, w := range r.Timeline.Windows {
		if w.Phase.Kind == Warmup {
			continue
		}
		p := PhaseReport{Window: w, Throughput: Rate(finishes, w.Start, w.End),
			Pickup: LatencyOf(rec.Pickups(w.Start, w.End)), Diagnostics: diags[w.Phase.Label], Recovered: true}
		if w.Phase.Kind == Clean && r.CleanThroughput == 0 {
			r.CleanThroughput, r.CleanPickup = p.Throughput, p.Pickup
		}
		if p.Pickup.P95 > r.WorstPickup.P95 {
			r.WorstPickup = p.Pickup
		}
		if r.TraceStart.IsZero() {
			r.TraceStart = w.Start
		}
		r.Phases = append(r.Phases, p)
	}
	for _, id := range r.Counts.Lost {
		if p := r.phaseEnqueued(rec, id); p != nil {
			p.Lost++
		}
	}
	for _, id := range r.Counts.RunTwice {
		if p := r.phaseEnqueued(rec, id); p != nil {
			p.RunTwice++
		}
	}
	r.Recovered = true
	if len(r.Timeline.Windows) == 0 {
		return
	}
	end := r.Timeline.Windows[len(r.Timeline.Windows)-1].End
	if !r.TraceStart.IsZero() {
		r.Trace = PerSecond(finishes, r.TraceStart, end)
	}
	for i := range r.Phases {
		p := &r.Phases[i]
		if !p.Window.Phase.Faulty() && p.Window.Phase.Kind != HighLoad {
			continue
		}
		p.Recovery, p.Recovered = RecoveryTime(finishes, p.Window.End, end, RecoveryWindow, RecoveryShare*r.CleanThroughput)
		// The run's recovery is the last fault or pressure phase's.
		r.Recovery, r.Recovered = p.Recovery, p.Recovered
	}
}

// phaseEnqueued is the report of the phase job id was enqueued in, or nil (warmup, unknown).
func (r *Result) phaseEnqueued(rec *Recorder, id string) *PhaseReport {
	at, ok := rec.EnqueuedAt(id)
	for i := range r.Phases {
		if ok && r.Phases[i].Window.Contains(at) {
			return &r.Phases[i]
		}
	}
	return nil
}
