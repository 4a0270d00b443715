package durable

import (
	"bytes"
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
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// ScheduleOption configures one Schedule.
type ScheduleOption func(*scheduleConfig)

type scheduleConfig struct {
	loc *time.Location
}

// WithLocation sets the zone spec is read in. Default UTC, not time.Local: every
// instance must compute the same next run, and hosts' zones differ; UTC never
// skips or repeats an hour. Choose a zone for schedules of people's hours.
func WithLocation(loc *time.Location) ScheduleOption {
	return func(c *scheduleConfig) { c.loc = loc }
}

// Schedule has one instance's scheduler, whichever claims each run first, send newRequest()
// through the mediator at each time spec names, and log the run (Queue.ScheduleRuns). spec is a
// five-field cron expression or a descriptor ("@hourly", "@every 90s"), in UTC unless
// WithLocation says otherwise. Q needs a handler in Start's mediator, not a Register: it is never
// stored. Every instance should register the same schedules; Start stores them (a changed spec
// replaces the stored one). It returns an error naming the mistake, and schedules nothing, on
// a nil queue or newRequest, an empty or taken name, a Q not a pointer, a bad spec or location,
// or a call after Start; the error is kept, and Start refuses to run with it, as with Register.
// A schedule added while the queue runs is Queue.AddSchedule's, whose request is a registered
// name and a payload. A schedule declared here may be paused, resumed and run now at run time
// (Queue.PauseSchedule, ResumeSchedule, RunScheduleNow), not removed.
//
// Each run is its own goroutine, so a slow run delays no other schedule; its next due time moves
// on when it is claimed, so a failing run keeps the cadence. Runs of a schedule never overlap: one
// due while the previous runs is record.OutcomeSkipped, as queuing would fall ever further
// behind; so is one due while the request name Q is registered under is paused (Queue.Pause),
// its error saying so. After downtime one catch-up run is made, not one per missed time: each run does the whole job. A run
// holds a lease (Config.ScheduleLease): a dead instance's run is not logged, and its schedule
// goes on when the lease runs out. Shutdown waits for runs as for items.
func Schedule[Q any](q *Queue, name, spec string, newRequest func() Q, opts ...ScheduleOption) error {
	if q == nil {
		return errors.New("durable: Schedule: nil queue")
	}
	var fn func() any
	if newRequest != nil {
		fn = func() any { return newRequest() }
	}
	return q.reg.keep(q.schedule(reflect.TypeFor[Q](), name, spec, fn, opts))
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
	// request and payload are a schedule added at run time's (newRequest and typ are then
	// nil): each run decodes a new request from them.
	request string
	payload []byte
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
	sched, err := parseSpec(spec, cfg.loc, "WithLocation")
	if err != nil {
		return fail("%v", err)
	}
	e := &scheduleEntry{name: name, spec: strings.TrimSpace(spec), loc: cfg.loc, sched: sched, typ: t, newRequest: newRequest}
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

// parseSpec parses spec, read in loc, refusing a time zone prefix (zoneOption names what sets
// the zone instead) and an expression that names no time.
func parseSpec(spec string, loc *time.Location, zoneOption string) (cron.Schedule, error) {
	if trimmed := strings.TrimSpace(spec); strings.HasPrefix(trimmed, "TZ=") || strings.HasPrefix(trimmed, "CRON_TZ=") {
		return nil, fmt.Errorf("spec %q names its time zone: drop the prefix and use %s", spec, zoneOption)
	}
	sched, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, fmt.Errorf("invalid cron expression %q: %v (five fields: minute hour day-of-month month day-of-week, or @hourly, @daily, @every 90s, ...)", spec, err)
	}
	// The cron library runs an @every interval under a second once a second, and cuts a
	// fraction of a second off a longer one: refused, so that a schedule runs at the pace it says.
	if every, ok := sched.(cron.ConstantDelaySchedule); ok {
		d, _ := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(spec), "@every")))
		switch {
		case d < time.Second:
			return nil, fmt.Errorf("%q: the interval is under a second, the shortest a schedule runs at", spec)
		case d != every.Delay:
			return nil, fmt.Errorf("%q: the interval is not a whole number of seconds (%v would be run every %v)", spec, d, every.Delay)
		}
	}
	e := scheduleEntry{loc: loc, sched: sched}
	if e.next(time.Now()) == never {
		return nil, fmt.Errorf("cron expression %q never names a time", spec)
	}
	return sched, nil
}

// Schedules lists the schedules in the queue's database, in name order.
func (q *Queue) Schedules(ctx context.Context) ([]record.ScheduleInfo, error) {
	rows, err := q.store.Schedules(ctx)
	if err != nil {
		return nil, err
	}
	now := q.clock.Now()
	out := make([]record.ScheduleInfo, len(rows))
	for i, r := range rows {
		out[i] = scheduleInfo(r, now)
	}
	return out, nil
}

// scheduleInfo is the record of the row r at now.
func scheduleInfo(r store.ScheduleRow, now time.Time) record.ScheduleInfo {
	i := record.ScheduleInfo{Name: r.Name, Spec: r.Spec, Location: r.Location, NextRun: r.NextAt,
		LastStartedAt: r.LastStartedAt, LastEndedAt: r.LastEndedAt, LastOutcome: record.Outcome(r.LastOutcome), LastError: r.LastError,
		Request: r.Request, Payload: r.Payload, RemovedAt: r.RemovedAt, RemovedBy: r.RemovedBy, RunNowAt: r.RunNowAt, RunNowBy: r.RunNowBy}
	if r.Running(now) {
		i.RunningOn = r.RunOwner
	}
	if r.Paused(now) {
		i.Paused, i.PausedAt, i.PausedUntil, i.PausedBy = true, r.PausedAt, r.PausedUntil, r.PausedBy
	}
	return i
}

// ScheduleRuns returns name's run log, newest first, at most limit runs (0 means
// 100, days of an hourly schedule).
func (q *Queue) ScheduleRuns(ctx context.Context, name string, limit int) ([]record.ScheduleRun, error) {
	if limit < 0 {
		return nil, fmt.Errorf("durable: ScheduleRuns: limit %d is negative", limit)
	}
	rows, err := q.store.ScheduleRuns(ctx, name, limit)
	if err != nil {
		return nil, err
	}
	out := make([]record.ScheduleRun, len(rows))
	for i, r := range rows {
		out[i] = record.ScheduleRun{ID: r.ID, Name: r.Name, Instance: r.Instance, DueAt: r.DueAt, StartedAt: r.StartedAt,
			EndedAt: r.EndedAt, Outcome: record.Outcome(r.Outcome), Error: r.Error, RunNowBy: r.RunNowBy}
	}
	return out, nil
}

// cronLoop is the part of a scheduler that runs the queue's schedules: it claims due runs,
// starts each in its own goroutine, extends their leases, and at shutdown waits for them.
type cronLoop struct {
	s     *scheduler
	code  map[string]*scheduleEntry // declared in code (Schedule), by name
	ended chan struct{}             // a run ended
	done  chan struct{}             // the loop returned; result is set
	// stored are the entries of the schedules added at run time as last read, by name; the
	// loop's alone.
	stored map[string]*scheduleEntry
	// namePauses are the pauses of request names, read once in a turn when a run is due
	// (heldBy); nil until then. The loop's alone.
	namePauses map[string]store.PauseRow

	mu          sync.Mutex
	active      int
	interrupted int
	result      error
}

// startCron writes the schedules declared in code and starts the loop that runs them and the
// schedules added at run time. Every scheduler runs the loop, declared schedules or not: a
// schedule added on any instance may be run by any that has its request registered.
func (s *scheduler) startCron() {
	entries := s.q.schedules.list()
	c := &cronLoop{s: s, code: make(map[string]*scheduleEntry, len(entries)), stored: map[string]*scheduleEntry{},
		ended: make(chan struct{}, 1), done: make(chan struct{})}
	s.cron = c
	// Written now, so that the schedules exist once Start returns (when the database answers:
	// otherwise the loop writes them when it does).
	now := s.q.clock.Now()
	for _, e := range entries {
		c.code[e.name] = e
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

// minScheduleReload is the shortest interval at which the schedule loop reads the schedules
// without another reason to: a cron spec's resolution is one second, so reading more often
// would apply a change no sooner in the schedule's terms, and a scheduler with a short
// PollInterval for its items would pay a read of the table at each.
const minScheduleReload = time.Second

// loop reads the schedules and acts on them at the next due time, every PollInterval or
// minScheduleReload, the longer (the bound on how long a change made on another instance takes
// to apply here), when a run ends and when a change is made on this instance.
func (c *cronLoop) loop() error {
	s := c.s
	reload := max(s.cfg.PollInterval, minScheduleReload)
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
			poll.Reset(reload)
		}
		select {
		case <-stopC:
		case <-clockC:
		case <-poll.C:
		case <-c.ended:
		case <-s.cronWake:
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

// turn reads the schedules, writes the declared ones missing from the table, claims the runs
// asked for now and the due runs and starts them, skips those whose previous run still runs,
// passes over those of paused schedules, and returns how long until the next one is due (ok
// false: none this instance can tell; the poll looks again).
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
	c.namePauses = nil // read again, when a run is due, for this turn
	found := make(map[string]bool, len(rows))
	for _, r := range rows {
		found[r.Name] = true
	}
	earliest := never
	for _, e := range c.code {
		if found[e.name] {
			continue
		}
		// Not written yet (the database did not answer at Start) or deleted by hand.
		next := e.next(now)
		ctx, cancel := s.storeCtx()
		err := s.q.store.UpsertSchedule(ctx, e.name, e.spec, e.loc.String(), next, now)
		cancel()
		s.noteStore("write schedules", err)
		if err == nil {
			earliest = earlier(earliest, next)
		}
	}
	for _, r := range rows {
		if s.stopping() {
			return 0, false
		}
		if e := c.entryOf(r); e != nil {
			earliest = earlier(earliest, c.act(e, r, now))
		}
	}
	if earliest == never {
		return 0, false
	}
	return max(0, earliest.Sub(now)), true
}

// entryOf returns the entry of the row r that this instance runs, or nil: a schedule declared
// by an instance of another version (another spec, or one this instance does not declare), one
// added at run time whose request this instance has not registered, or a removed one. Those are
// left to the instances that agree.
func (c *cronLoop) entryOf(r store.ScheduleRow) *scheduleEntry {
	if r.Request == "" {
		e := c.code[r.Name]
		if e == nil || r.Spec != e.spec || r.Location != e.loc.String() {
			return nil
		}
		return e
	}
	if !r.RemovedAt.IsZero() || c.s.q.reg.lookupName(r.Request) == nil {
		delete(c.stored, r.Name)
		return nil
	}
	if e := c.stored[r.Name]; e != nil && e.spec == r.Spec && e.loc.String() == r.Location && e.request == r.Request &&
		bytes.Equal(e.payload, r.Payload) {
		return e
	}
	loc, err := time.LoadLocation(r.Location)
	if err != nil {
		return nil
	}
	sched, err := parseSpec(r.Spec, loc, "Location")
	if err != nil {
		return nil // validated when added: a spec of another version's cron parser
	}
	e := &scheduleEntry{name: r.Name, spec: r.Spec, loc: loc, sched: sched, request: r.Request, payload: bytes.Clone(r.Payload)}
	c.stored[r.Name] = e
	return e
}

// act claims and starts the run of e asked for now, if any, and acts on its due run, if due:
// it claims and starts it, skips it while a run is still going or while its request name is
// paused, or passes over it while the schedule is paused. It returns the due time to wait for
// next (never: none known).
func (c *cronLoop) act(e *scheduleEntry, r store.ScheduleRow, now time.Time) time.Time {
	s := c.s
	if !r.RunNowAt.IsZero() && !r.Running(now) {
		// Asked for by an operator, paused or not; while a run is going it waits for the run's
		// end (a run ending wakes the loop, or the poll sees it). A pause of its request name
		// holds it back, as it holds back RunNow of an item: it is skipped, saying so.
		until := now.Add(s.cfg.ScheduleLease)
		held := c.heldBy(e, now)
		ctx, cancel := s.storeCtx()
		if held != "" {
			_, err := s.q.store.SkipScheduleRunNow(ctx, e.name, r.RunNowAt, r.RunNowBy, s.cfg.InstanceID, now, held)
			cancel()
			s.noteStore("skip a run now of a schedule", err)
		} else {
			acted, err := s.q.store.ClaimScheduleRunNow(ctx, e.name, r.RunNowAt, s.cfg.InstanceID, now, until)
			cancel()
			s.noteStore("claim a run now of a schedule", err)
			if acted {
				c.launch(e, r.RunNowAt, now, r.RunNowBy)
				// A run due now as well overlaps this one: it is skipped.
				r.RunOwner, r.RunUntil, r.RunStartedAt = s.cfg.InstanceID, until, now
			}
		}
	}
	if r.NextAt.After(now) {
		return r.NextAt
	}
	d := store.ScheduleDue{Name: e.name, Spec: e.spec, Location: r.Location, DueAt: r.NextAt, Next: e.next(now)}
	var (
		acted bool
		err   error
	)
	ctx, cancel := s.storeCtx()
	defer cancel()
	switch {
	case r.Paused(now):
		acted, err = s.q.store.PassScheduleRun(ctx, d, now)
		s.noteStore("pass over a run of a paused schedule", err)
	case r.Running(now):
		reason := fmt.Sprintf("the run started at %s on %s was still running", r.RunStartedAt.Format(time.RFC3339Nano), r.RunOwner)
		acted, err = s.q.store.SkipScheduleRun(ctx, d, s.cfg.InstanceID, now, reason)
		s.noteStore("skip a schedule run", err)
	default:
		if held := c.heldBy(e, now); held != "" {
			acted, err = s.q.store.SkipHeldScheduleRun(ctx, d, s.cfg.InstanceID, now, held)
			s.noteStore("skip a schedule run", err)
			break
		}
		acted, err = s.q.store.ClaimScheduleRun(ctx, d, s.cfg.InstanceID, now, now.Add(s.cfg.ScheduleLease))
		s.noteStore("claim a schedule run", err)
		if acted {
			c.launch(e, d.DueAt, now, "")
		}
	}
	if acted {
		return d.Next
	}
	return never
}

// heldBy returns why a run of e is held back at now, "" when it is not: the pause of the
// request name e sends (a schedule added at run time's, or the name its request type is
// registered under), as the items of that name are held back. The pauses are read once in a
// turn, when a run is due; a failed read holds nothing back (the failure is logged).
func (c *cronLoop) heldBy(e *scheduleEntry, now time.Time) string {
	name := e.request
	if name == "" {
		reg := c.s.q.reg.lookupType(e.typ)
		if reg == nil {
			return ""
		}
		name = reg.name
	}
	if c.namePauses == nil {
		s := c.s
		ctx, cancel := s.storeCtx()
		rows, err := s.q.store.Pauses(ctx, store.PauseName)
		cancel()
		s.noteStore("read the paused names", err)
		c.namePauses = make(map[string]store.PauseRow, len(rows))
		for _, r := range rows {
			c.namePauses[r.Target] = r
		}
	}
	p, ok := c.namePauses[name]
	if !ok || !p.Until.IsZero() && !p.Until.After(now) {
		return ""
	}
	return fmt.Sprintf("request name %q is paused by %s %s", name, p.Actor, pauseDetail(p.Until, p.Reason))
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// launch runs one claimed run of e in its own goroutine and records it; runNowBy is the
// operator whose run-now it is, "" for a due run.
func (c *cronLoop) launch(e *scheduleEntry, due, started time.Time, runNowBy string) {
	s := c.s
	c.mu.Lock()
	c.active++
	c.mu.Unlock()
	go func() {
		err := c.run(e)
		run := store.ScheduleRunRow{Name: e.name, Instance: s.cfg.InstanceID, DueAt: due, StartedAt: started,
			EndedAt: s.q.clock.Now(), Outcome: record.OutcomeSucceeded, RunNowBy: runNowBy}
		interrupted := err != nil && s.life.Err() != nil
		if err != nil {
			run.Outcome, run.Error = record.OutcomeFailed, err.Error()
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
	var req any
	if e.request != "" {
		if req, err = c.s.q.reg.decode(e.request, e.payload); err != nil {
			return fmt.Errorf("durable: schedule %q: %w", e.name, err)
		}
	} else if req = e.newRequest(); req == nil || reflect.ValueOf(req).IsNil() {
		return fmt.Errorf("durable: schedule %q: newRequest returned nil", e.name)
	}
	ctx := mediator.WithMarks(c.s.life, req, mediator.Unattended)
	_, err = c.s.sender.SendAny(ctx, req)
	return err
}
