package durable

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/mediator"
)

// ScheduleOption configures one Schedule.
type ScheduleOption func(*scheduleConfig)

type scheduleConfig struct {
	loc *time.Location
}

// WithLocation sets the time zone the schedule's cron expression is read in: "0 9 * * *" in
// America/New_York runs at nine in New York, at 14:00 UTC in winter and 13:00 UTC in summer.
// Default UTC, not time.Local: every instance must compute the same next run from the same
// spec, and the local zone of hosts and containers differs (a container is often UTC, a
// developer's machine is not); UTC also has no daylight-saving changes, so a schedule in it
// never skips or repeats a wall-clock hour. Choose a zone only for schedules that follow
// people's working hours.
func WithLocation(loc *time.Location) ScheduleOption {
	return func(c *scheduleConfig) { c.loc = loc }
}

// ScheduleOutcome is how one run of a schedule ended.
type ScheduleOutcome string

// Schedule run outcomes.
const (
	// ScheduleSucceeded: the request's dispatch returned no error.
	ScheduleSucceeded ScheduleOutcome = "succeeded"
	// ScheduleFailed: the dispatch returned an error, or it (or the newRequest function)
	// panicked, or a shutdown interrupted it.
	ScheduleFailed ScheduleOutcome = "failed"
	// ScheduleSkipped: the run was due while the schedule's previous run still ran, so it was
	// not started.
	ScheduleSkipped ScheduleOutcome = "skipped"
)

// ScheduleInfo describes a schedule as its row in the database says: the schedules of every
// instance's registrations, including ones no longer registered anywhere (rows are never
// deleted: the run log stays readable).
type ScheduleInfo struct {
	// Name is the schedule's name.
	Name string
	// Spec is its cron expression.
	Spec string
	// Location is the name of the time zone Spec is read in (time.Location.String).
	Location string
	// NextRun is when its next run is due.
	NextRun time.Time
	// RunningOn is the instance running it now, or empty. A run of an instance that died stays
	// listed until its lease runs out.
	RunningOn string
	// LastStartedAt and LastEndedAt are the times of the last run that ended; zero before one
	// has.
	LastStartedAt, LastEndedAt time.Time
	// LastOutcome is the outcome of that run (ScheduleSucceeded or ScheduleFailed; skipped
	// runs are only in the run log).
	LastOutcome ScheduleOutcome
	// LastError is that run's error; empty when it succeeded.
	LastError string
}

// ScheduleRun is one entry of a schedule's run log (Queue.ScheduleRuns).
type ScheduleRun struct {
	// ID is the run's own id, increasing.
	ID int64
	// Name is the schedule.
	Name string
	// Instance is the scheduler instance that ran (or skipped) it.
	Instance string
	// DueAt is the time the run was due. A catch-up run after downtime is due long before it
	// started.
	DueAt time.Time
	// StartedAt and EndedAt are when the run started and ended; equal for a skipped run.
	StartedAt, EndedAt time.Time
	// Outcome is how it ended.
	Outcome ScheduleOutcome
	// Error is its error, or for a skipped run why it was skipped; empty when it succeeded.
	Error string
}

// Schedule registers a request to be sent through the mediator on a schedule: at each time
// spec names, the scheduler (Queue.Start) of one instance, whichever claims that run first in
// the database, sends newRequest() and records the run in the run log (Queue.ScheduleRuns).
//
// spec is a cron expression as robfig/cron/v3 parses it with ParseStandard: five fields
// (minute, hour, day of month, month, day of week: "*/15 * * * *", "0 9 * * MON-FRI") or a
// descriptor ("@hourly", "@daily", "@weekly", "@monthly", "@yearly", "@every 90s"). It is read
// in UTC unless WithLocation says otherwise; a "CRON_TZ=" or "TZ=" prefix is refused in favour
// of WithLocation, so a schedule's zone is said one way. The first run is the first time spec
// names after the schedule is first written to the database.
//
// Q is the request type as it is sent (a pointer type, *Cleanup), with a handler in the
// mediator given to Start (Start fails otherwise). It need not be registered with Register:
// a scheduled request is never stored, only built by newRequest at each run. If it is
// registered and its pipeline has the deferral, a failing run is deferred to the queue like any
// failing send, and the run is logged as failed with the *DeferredError. The dispatch is marked
// mediator.Unattended for that request, so a fallback or exception handler does not answer for
// the handler and the run log shows what the handler did.
//
// The run semantics, and the reasons for them:
//   - Each run is its own goroutine: a slow or failing run never delays another schedule.
//   - A run's next due time is moved on when the run is claimed, before it starts, so a run
//     that fails or panics keeps its schedule's cadence (the failure is in the run log).
//   - Runs of one schedule never overlap: a run due while the previous one still runs (on any
//     instance) is skipped and logged as ScheduleSkipped. Queuing it instead would let a
//     schedule whose runs outlast its interval fall further behind at every run, and running
//     it beside the previous one would have two runs of a job, written to run one at a time,
//     work on the same data.
//   - After downtime (no instance ran for several due times), exactly one catch-up run is
//     made, and the cadence resumes from then: a schedule's runs each do the whole job, so
//     repeating the missed ones would only load the downstream when it is coming back.
//   - A run holds a lease (SchedulerConfig.ScheduleLease, extended by heartbeats); a run whose
//     instance died leaves no log entry, and its schedule continues once the lease runs out.
//   - Shutdown waits for running scheduled runs as it waits for items, with the same context
//     and grace: when its context ends they are cancelled.
//
// Every instance that runs a scheduler should register the same schedules. Start writes the
// registered schedules to the database: a new name is inserted, a changed spec or location
// replaces the stored one and recomputes the next run; schedules no longer registered are left
// as they are (and run by no one). While instances of two versions with different specs for one
// name share a database, the one started last defines it and the others leave it alone.
//
// Registration is setup: Schedule panics, with a message naming the problem, on a nil queue or
// newRequest, an empty or already scheduled name, a Q that is not a pointer type, a spec that
// does not parse or never names a time, a nil location, or a call after Start.
func Schedule[Q any](q *Queue, name, spec string, newRequest func() Q, opts ...ScheduleOption) {
	if q == nil {
		panic("durable: Schedule: nil queue")
	}
	var fn func() any
	if newRequest != nil {
		fn = func() any { return newRequest() }
	}
	if err := q.schedule(reflect.TypeFor[Q](), name, spec, fn, opts); err != nil {
		panic(err)
	}
}

// never is the due time of a schedule whose spec names no further time.
var never = time.UnixMicro(math.MaxInt64).UTC()

// scheduleEntry is one registered schedule.
type scheduleEntry struct {
	name, spec string
	loc        *time.Location
	sched      cron.Schedule
	typ        reflect.Type
	newRequest func() any
}

// next is the first time after t that the entry's spec names, in UTC, or never.
func (e *scheduleEntry) next(t time.Time) time.Time {
	n := e.sched.Next(t.In(e.loc))
	if n.IsZero() {
		return never
	}
	return n.UTC()
}

// timetable holds a queue's registered schedules.
type timetable struct {
	mu      sync.Mutex
	entries []*scheduleEntry
}

func (tt *timetable) list() []*scheduleEntry {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return tt.entries
}

func (q *Queue) schedule(t reflect.Type, name, spec string, newRequest func() any, opts []ScheduleOption) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("durable: Schedule %q: "+format, append([]any{name}, args...)...)
	}
	if name == "" {
		return fmt.Errorf("durable: Schedule %s: empty name", t)
	}
	if t == nil || t.Kind() != reflect.Pointer {
		return fail("the request type %v must be a pointer type, as it is sent (*Cleanup, not Cleanup)", t)
	}
	if newRequest == nil {
		return fail("nil newRequest function")
	}
	cfg := scheduleConfig{loc: time.UTC}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.loc == nil {
		return fail("WithLocation(nil): give a *time.Location (time.UTC, time.LoadLocation(\"Europe/Paris\"))")
	}
	if trimmed := strings.TrimSpace(spec); strings.HasPrefix(trimmed, "TZ=") || strings.HasPrefix(trimmed, "CRON_TZ=") {
		return fail("spec %q names its time zone: drop the prefix and use WithLocation", spec)
	}
	sched, err := cron.ParseStandard(spec)
	if err != nil {
		return fail("invalid cron expression %q: %v (five fields: minute hour day-of-month month day-of-week, or @hourly, @daily, @every 90s, ...)", spec, err)
	}
	e := &scheduleEntry{name: name, spec: strings.TrimSpace(spec), loc: cfg.loc, sched: sched, typ: t, newRequest: newRequest}
	if e.next(time.Now()) == never {
		return fail("cron expression %q never names a time", spec)
	}
	q.mu.Lock()
	started := q.sched != nil || q.stopped
	q.mu.Unlock()
	if started {
		return fail("the queue's scheduler was started: schedule every request before Start")
	}
	q.schedules.mu.Lock()
	defer q.schedules.mu.Unlock()
	for _, o := range q.schedules.entries {
		if o.name == name {
			return fail("name already scheduled (spec %q)", o.spec)
		}
	}
	q.schedules.entries = append(q.schedules.entries, e)
	return nil
}

// Schedules lists the schedules in the queue's database, in name order.
func (q *Queue) Schedules(ctx context.Context) ([]ScheduleInfo, error) {
	rows, err := q.store.Schedules(ctx)
	if err != nil {
		return nil, err
	}
	now := q.clock.Now()
	out := make([]ScheduleInfo, len(rows))
	for i, r := range rows {
		out[i] = ScheduleInfo{Name: r.Name, Spec: r.Spec, Location: r.Location, NextRun: r.NextAt,
			LastStartedAt: r.LastStartedAt, LastEndedAt: r.LastEndedAt, LastOutcome: ScheduleOutcome(r.LastOutcome), LastError: r.LastError}
		if r.Running(now) {
			out[i].RunningOn = r.RunOwner
		}
	}
	return out, nil
}

// ScheduleRuns returns the run log of the schedule name, newest first: at most limit runs.
// A zero limit means 100, a few days of an hourly schedule, enough to see a pattern without
// paging; a negative limit is an error.
func (q *Queue) ScheduleRuns(ctx context.Context, name string, limit int) ([]ScheduleRun, error) {
	if limit < 0 {
		return nil, fmt.Errorf("durable: ScheduleRuns: limit %d is negative", limit)
	}
	rows, err := q.store.ScheduleRuns(ctx, name, limit)
	if err != nil {
		return nil, err
	}
	out := make([]ScheduleRun, len(rows))
	for i, r := range rows {
		out[i] = ScheduleRun{ID: r.ID, Name: r.Name, Instance: r.Instance, DueAt: r.DueAt, StartedAt: r.StartedAt,
			EndedAt: r.EndedAt, Outcome: ScheduleOutcome(r.Outcome), Error: r.Error}
	}
	return out, nil
}

// cronLoop is the part of a scheduler that runs the queue's schedules: it claims due runs,
// starts each in its own goroutine, extends their leases, and at shutdown waits for them.
type cronLoop struct {
	s       *scheduler
	entries []*scheduleEntry
	ended   chan struct{} // a run ended
	done    chan struct{} // the loop returned; result is set

	mu          sync.Mutex
	active      int
	interrupted int
	result      error
}

// startCron writes the registered schedules and starts the loop that runs them; a scheduler
// without schedules starts nothing.
func (s *scheduler) startCron() {
	entries := s.q.schedules.list()
	if len(entries) == 0 {
		return
	}
	c := &cronLoop{s: s, entries: entries, ended: make(chan struct{}, 1), done: make(chan struct{})}
	s.cron = c
	// Written now, so that the schedules exist once Start returns (when the database answers:
	// otherwise the loop writes them when it does).
	now := s.q.clock.Now()
	for _, e := range entries {
		ctx, cancel := s.storeCtx()
		err := s.q.store.UpsertSchedule(ctx, e.name, e.spec, e.loc.String(), e.next(now), now)
		cancel()
		s.noteStore("write schedules", err)
	}
	go func() {
		defer close(c.done)
		c.result = c.loop()
	}()
}

// waitCron waits for the schedule loop to stop (once every run ended, or at the end of the
// shutdown grace) and adds what it left to Shutdown's outcome.
func (s *scheduler) waitCron() {
	if s.cron == nil {
		return
	}
	<-s.cron.done
	if s.cron.result != nil {
		s.mu.Lock()
		s.result = errors.Join(s.result, s.cron.result)
		s.mu.Unlock()
	}
}

func (c *cronLoop) running() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active
}

func (c *cronLoop) loop() error {
	s := c.s
	poll := time.NewTimer(0)
	defer poll.Stop()
	hb := time.NewTicker(s.cfg.HeartbeatInterval)
	defer hb.Stop()
	stopC := s.stop
	for {
		var (
			clockC <-chan time.Time
			stop   = func() bool { return false }
		)
		if s.stopping() {
			stopC = nil
			if c.running() == 0 {
				return c.outcome(0)
			}
		} else {
			if wait, ok := c.turn(); ok {
				clockC, stop = s.q.clock.After(wait)
			}
			poll.Reset(s.cfg.PollInterval)
		}
		select {
		case <-stopC:
		case <-clockC:
		case <-poll.C:
		case <-c.ended:
		case <-hb.C:
			if c.running() > 0 {
				ctx, cancel := s.storeCtx()
				err := s.q.store.ExtendScheduleRuns(ctx, s.cfg.InstanceID, s.q.clock.Now().Add(s.cfg.ScheduleLease))
				cancel()
				s.noteStore("extend schedule leases", err)
			}
		case <-s.graceEnd:
			stop()
			return c.outcome(c.running())
		}
		stop()
	}
}

// outcome is what the loop leaves to Shutdown's result: runs it interrupted and runs that had
// not returned.
func (c *cronLoop) outcome(left int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	if c.interrupted > 0 {
		errs = append(errs, fmt.Errorf("durable: shutdown's context ended before a clean stop; %d scheduled runs were interrupted", c.interrupted))
	}
	if left > 0 {
		errs = append(errs, fmt.Errorf("durable: shutdown gave up on %d scheduled runs that did not return within ShutdownGrace (%v) of their cancellation",
			left, c.s.cfg.ShutdownGrace))
	}
	return errors.Join(errs...)
}

// turn claims the due runs of the registered schedules and starts them, skips those whose
// previous run still runs, and returns how long until the next one is due (ok false: none
// this instance can tell; the poll looks again).
func (c *cronLoop) turn() (wait time.Duration, ok bool) {
	s := c.s
	now := s.q.clock.Now()
	ctx, cancel := s.storeCtx()
	rows, err := s.q.store.Schedules(ctx)
	cancel()
	s.noteStore("read schedules", err)
	if err != nil {
		return 0, false
	}
	byName := make(map[string]store.ScheduleRow, len(rows))
	for _, r := range rows {
		byName[r.Name] = r
	}
	earliest := never
	for _, e := range c.entries {
		if s.stopping() {
			return 0, false
		}
		r, found := byName[e.name]
		if !found {
			// Not written yet (the database did not answer at Start) or deleted by hand.
			next := e.next(now)
			ctx, cancel := s.storeCtx()
			err := s.q.store.UpsertSchedule(ctx, e.name, e.spec, e.loc.String(), next, now)
			cancel()
			s.noteStore("write schedules", err)
			if err == nil {
				earliest = earlier(earliest, next)
			}
			continue
		}
		if r.Spec != e.spec || r.Location != e.loc.String() {
			continue // defined by an instance of another version: left to those that agree
		}
		if r.NextAt.After(now) {
			earliest = earlier(earliest, r.NextAt)
			continue
		}
		d := store.ScheduleDue{Name: e.name, Spec: e.spec, Location: r.Location, DueAt: r.NextAt, Next: e.next(now)}
		var acted bool
		ctx, cancel := s.storeCtx()
		if r.Running(now) {
			reason := fmt.Sprintf("the run started at %s on %s was still running", r.RunStartedAt.Format(time.RFC3339Nano), r.RunOwner)
			acted, err = s.q.store.SkipScheduleRun(ctx, d, s.cfg.InstanceID, now, reason)
			s.noteStore("skip a schedule run", err)
		} else {
			acted, err = s.q.store.ClaimScheduleRun(ctx, d, s.cfg.InstanceID, now, now.Add(s.cfg.ScheduleLease))
			s.noteStore("claim a schedule run", err)
			if acted {
				c.launch(e, d.DueAt, now)
			}
		}
		cancel()
		if acted {
			earliest = earlier(earliest, d.Next)
		}
	}
	if earliest == never {
		return 0, false
	}
	return max(0, earliest.Sub(now)), true
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// launch runs one claimed run of e in its own goroutine and records it.
func (c *cronLoop) launch(e *scheduleEntry, due, started time.Time) {
	s := c.s
	c.mu.Lock()
	c.active++
	c.mu.Unlock()
	go func() {
		err := c.run(e)
		run := store.ScheduleRunRow{Name: e.name, Instance: s.cfg.InstanceID, DueAt: due, StartedAt: started,
			EndedAt: s.q.clock.Now(), Outcome: string(ScheduleSucceeded)}
		interrupted := err != nil && s.life.Err() != nil
		if err != nil {
			run.Outcome, run.Error = string(ScheduleFailed), err.Error()
			if interrupted {
				run.Error = "interrupted by shutdown: " + run.Error
			}
		}
		ctx, cancel := s.storeCtx()
		werr := s.q.store.EndScheduleRun(ctx, run)
		cancel()
		s.noteStore("record a schedule run", werr)
		c.mu.Lock()
		c.active--
		if interrupted {
			c.interrupted++
		}
		c.mu.Unlock()
		signal(c.ended)
	}()
}

// run builds the request and sends it, marked Unattended; a panic of either becomes the
// run's error.
func (c *cronLoop) run(e *scheduleEntry) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = mediator.NewPanicError(p)
		}
	}()
	req := e.newRequest()
	if req == nil || reflect.ValueOf(req).IsNil() {
		return fmt.Errorf("durable: schedule %q: newRequest returned nil", e.name)
	}
	ctx := mediator.WithMarks(c.s.life, req, mediator.Unattended)
	_, err = c.s.sender.SendAny(ctx, req)
	return err
}
