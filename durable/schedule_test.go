package durable_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	_ "time/tzdata" // the DST test needs America/New_York wherever it runs

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/durabletest"
	istore "github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// Tick is the request the schedules of these tests send; Schedule names the schedule, whose
// function in tickHandlers handles it.
type Tick struct {
	mediator.Command
	Schedule string
}

type tickHandlers map[string]func(ctx context.Context) error

func tickMediator(t testing.TB, h tickHandlers) *mediator.Mediator {
	t.Helper()
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, k *Tick) (mediator.Void, error) {
		if marks := mediator.MarksOf(ctx, k); marks != mediator.Unattended {
			return mediator.Void{}, fmt.Errorf("dispatch marked %v, want Unattended alone", marks)
		}
		if f := h[k.Schedule]; f != nil {
			return mediator.Void{}, f(ctx)
		}
		return mediator.Void{}, nil
	})
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	return m
}

func tick(name string) func() *Tick { return func() *Tick { return &Tick{Schedule: name} } }

// cronStart is 03:00 UTC, a whole minute, so "@every 1m" runs fall on whole minutes.
var cronStart = time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)

func scheduleRuns(t testing.TB, q *durable.Queue, name string) []record.ScheduleRun {
	t.Helper()
	return must[[]record.ScheduleRun](t)(q.ScheduleRuns(context.Background(), name, 1000))
}

// waitRuns waits until the run log of name has n entries and returns them, oldest first.
func waitRuns(t testing.TB, q *durable.Queue, name string, n int) []record.ScheduleRun {
	t.Helper()
	var rs []record.ScheduleRun
	eventually(t, 20*time.Second, fmt.Sprintf("%d runs of %s", n, name), func() bool {
		rs = scheduleRuns(t, q, name)
		return len(rs) >= n
	})
	if len(rs) != n {
		t.Fatalf("%s: %d runs, want %d: %+v", name, len(rs), n, rs)
	}
	for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
		rs[i], rs[j] = rs[j], rs[i]
	}
	return rs
}

func runSummary(rs []record.ScheduleRun) string {
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s:%s", r.DueAt.Format("15:04"), r.Outcome)
	}
	return b.String()
}

// TestScheduleFailingKeepsCadenceAndOthersRun: a schedule that always fails keeps its cadence; a
// run that never ends is skipped at its next due times instead of overlapping; neither delays
// the schedule beside them.
func TestScheduleFailingKeepsCadenceAndOthersRun(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		clock := durabletest.NewManualClock(cronStart)
		q := b.bare(t, durable.Config{Clock: clock})
		for _, name := range []string{"fail", "stuck", "ok"} {
			durable.Schedule(q, name, "@every 1m", tick(name))
		}
		release := make(chan struct{})
		var stuckStarted atomic.Int32
		m := tickMediator(t, tickHandlers{
			"fail": func(context.Context) error { return errors.New("downstream says no") },
			"stuck": func(context.Context) error {
				stuckStarted.Add(1)
				<-release
				return nil
			},
		})
		// The manual clock jumps a minute at a time, past any heartbeat: a lease longer than
		// the test keeps the stuck run's lease from running out.
		start(t, q, m, durable.SchedulerConfig{InstanceID: "a", Lease: time.Hour})
		t.Cleanup(func() { close(release) })
		for i := 1; i <= 3; i++ {
			clock.Advance(time.Minute)
			waitRuns(t, q, "ok", i)
			waitRuns(t, q, "fail", i)
			if i > 1 {
				waitRuns(t, q, "stuck", i-1)
			}
		}
		if got := runSummary(waitRuns(t, q, "ok", 3)); got != "03:01:succeeded 03:02:succeeded 03:03:succeeded" {
			t.Errorf("ok: %s", got)
		}
		fails := waitRuns(t, q, "fail", 3)
		if got := runSummary(fails); got != "03:01:failed 03:02:failed 03:03:failed" {
			t.Errorf("fail: %s", got)
		}
		if fails[0].Error != "downstream says no" || fails[0].Instance != "a" {
			t.Errorf("fail run %+v", fails[0])
		}
		if got := runSummary(waitRuns(t, q, "stuck", 2)); got != "03:02:skipped 03:03:skipped" {
			t.Errorf("stuck: %s", got)
		}
		if n := stuckStarted.Load(); n != 1 {
			t.Errorf("stuck started %d times, want 1", n)
		}
		infos := must[[]record.ScheduleInfo](t)(q.Schedules(context.Background()))
		byName := map[string]record.ScheduleInfo{}
		for _, in := range infos {
			byName[in.Name] = in
		}
		if f := byName["fail"]; f.LastOutcome != record.OutcomeFailed || f.LastError != "downstream says no" ||
			!f.NextRun.Equal(cronStart.Add(4*time.Minute)) || f.Location != "UTC" || f.Spec != "@every 1m" {
			t.Errorf("fail info %+v", f)
		}
		if s := byName["stuck"]; s.RunningOn != "a" || s.LastOutcome != "" {
			t.Errorf("stuck info %+v", s)
		}
	})
}

// TestSchedulePanicIsRecorded: a run whose handler or newRequest panics is a failed run with the
// panic in its error, and the schedule goes on.
func TestSchedulePanicIsRecorded(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		clock := durabletest.NewManualClock(cronStart)
		q := b.bare(t, durable.Config{Clock: clock})
		durable.Schedule(q, "handler", "* * * * *", tick("handler"))
		durable.Schedule(q, "ctor", "* * * * *", func() *Tick { panic("no request today") })
		m := tickMediator(t, tickHandlers{"handler": func(context.Context) error { panic("handler blew up") }})
		start(t, q, m)
		for i := 1; i <= 2; i++ {
			clock.Advance(time.Minute)
			waitRuns(t, q, "handler", i)
			waitRuns(t, q, "ctor", i)
		}
		for name, want := range map[string]string{"handler": "handler blew up", "ctor": "no request today"} {
			rs := waitRuns(t, q, name, 2)
			if runSummary(rs) != "03:01:failed 03:02:failed" || !strings.Contains(rs[1].Error, want) {
				t.Errorf("%s: %s %+v", name, runSummary(rs), rs)
			}
		}
	})
}

// TestScheduleDowntimeOneCatchUp: after an hour with no scheduler, a schedule due every minute
// runs once to catch up, then every minute from then on.
func TestScheduleDowntimeOneCatchUp(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		clock := durabletest.NewManualClock(cronStart)
		var calls atomic.Int32
		m := tickMediator(t, tickHandlers{"job": func(context.Context) error { calls.Add(1); return nil }})

		first := b.bare(t, durable.Config{Clock: clock})
		durable.Schedule(first, "job", "@every 1m", tick("job"))
		s := start(t, first, m, durable.SchedulerConfig{InstanceID: "first"})
		if err := s.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Hour) // nobody runs: sixty runs are missed

		second := b.bare(t, durable.Config{Clock: clock})
		durable.Schedule(second, "job", "@every 1m", tick("job"))
		start(t, second, m, durable.SchedulerConfig{InstanceID: "second"})
		rs := waitRuns(t, second, "job", 1)
		if rs[0].Outcome != record.OutcomeSucceeded || !rs[0].DueAt.Equal(cronStart.Add(time.Minute)) ||
			!rs[0].StartedAt.Equal(cronStart.Add(time.Hour)) || rs[0].Instance != "second" {
			t.Fatalf("catch-up run %+v", rs[0])
		}
		info := must[[]record.ScheduleInfo](t)(second.Schedules(context.Background()))
		if len(info) != 1 || !info[0].NextRun.Equal(cronStart.Add(61*time.Minute)) {
			t.Fatalf("after the catch-up: %+v", info)
		}
		clock.Advance(time.Minute)
		if got := runSummary(waitRuns(t, second, "job", 2)); got != "03:01:succeeded 04:01:succeeded" {
			t.Fatalf("runs %s", got)
		}
		if n := calls.Load(); n != 2 {
			t.Fatalf("%d calls, want 2", n)
		}
	})
}

// TestScheduleTwoInstancesRunEachDueRunOnce: two schedulers on one database, one clock, 100 due
// runs: each runs exactly once, by one of them.
func TestScheduleTwoInstancesRunEachDueRunOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		clock := durabletest.NewManualClock(cronStart)
		var (
			mu    sync.Mutex
			calls = map[string]int{}
		)
		for _, id := range []string{"a", "b"} {
			q := b.bare(t, durable.Config{Clock: clock})
			durable.Schedule(q, "job", "@every 1m", tick("job"))
			m := tickMediator(t, tickHandlers{"job": func(ctx context.Context) error {
				mu.Lock()
				defer mu.Unlock()
				calls[id]++
				return nil
			}})
			start(t, q, m, durable.SchedulerConfig{InstanceID: id})
		}
		reader := b.bare(t, durable.Config{Clock: clock})
		const ticks = 100
		for i := 1; i <= ticks; i++ {
			clock.Advance(time.Minute)
			waitRuns(t, reader, "job", i)
		}
		rs := waitRuns(t, reader, "job", ticks)
		for i, r := range rs {
			if want := cronStart.Add(time.Duration(i+1) * time.Minute); !r.DueAt.Equal(want) || r.Outcome != record.OutcomeSucceeded {
				t.Fatalf("run %d: %+v, want due %v, succeeded", i, r, want)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if calls["a"]+calls["b"] != ticks {
			t.Fatalf("calls %v, want %d in all", calls, ticks)
		}
		t.Logf("runs per instance: %v", calls)
	})
}

// TestScheduleCronAcrossDST: "0 9 * * *" in New York runs at nine local time on both sides of the
// spring change of 2030 (10 March): 14:00 UTC before it, 13:00 UTC after.
func TestScheduleCronAcrossDST(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	eachBackend(t, func(t *testing.T, b backend) {
		clock := durabletest.NewManualClock(time.Date(2030, 3, 9, 12, 0, 0, 0, time.UTC))
		q := b.bare(t, durable.Config{Clock: clock})
		durable.Schedule(q, "morning", "0 9 * * *", tick("morning"), durable.WithLocation(ny))
		start(t, q, tickMediator(t, nil))
		info := must[[]record.ScheduleInfo](t)(q.Schedules(context.Background()))
		if len(info) != 1 || info[0].Location != "America/New_York" ||
			!info[0].NextRun.Equal(time.Date(2030, 3, 9, 14, 0, 0, 0, time.UTC)) {
			t.Fatalf("before: %+v", info)
		}
		clock.Advance(2 * time.Hour)
		waitRuns(t, q, "morning", 1)
		info = must[[]record.ScheduleInfo](t)(q.Schedules(context.Background()))
		if !info[0].NextRun.Equal(time.Date(2030, 3, 10, 13, 0, 0, 0, time.UTC)) {
			t.Fatalf("next run after the change %v, want 13:00 UTC", info[0].NextRun)
		}
		clock.Advance(23 * time.Hour)
		rs := waitRuns(t, q, "morning", 2)
		for i, want := range []time.Time{time.Date(2030, 3, 9, 14, 0, 0, 0, time.UTC), time.Date(2030, 3, 10, 13, 0, 0, 0, time.UTC)} {
			if !rs[i].DueAt.Equal(want) || rs[i].DueAt.In(ny).Hour() != 9 {
				t.Errorf("run %d due %v, want %v", i, rs[i].DueAt, want)
			}
		}
	})
}

// TestScheduleExpiredLeaseContinues: a run whose instance died holds its lease only until the
// lease runs out; the next due run is then run, not skipped.
func TestScheduleExpiredLeaseContinues(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		clock := durabletest.NewManualClock(cronStart)
		q := b.bare(t, durable.Config{Clock: clock})
		durable.Schedule(q, "job", "@every 1m", tick("job"))
		// An instance that died while running the 03:01 run, with a 30 s lease.
		dead := istore.ScheduleDue{Name: "job", Spec: "@every 1m", Location: "UTC", DueAt: cronStart.Add(time.Minute), Next: cronStart.Add(2 * time.Minute)}
		start(t, q, tickMediator(t, nil), durable.SchedulerConfig{InstanceID: "live"})
		ok, err := durable.StoreOf(q).ClaimScheduleRun(context.Background(), dead, "dead", cronStart.Add(time.Minute), cronStart.Add(90*time.Second))
		if err != nil || !ok {
			t.Fatalf("claim as the dead instance: %v %v", ok, err)
		}
		clock.Advance(2 * time.Minute)
		rs := waitRuns(t, q, "job", 1)
		if rs[0].Outcome != record.OutcomeSucceeded || rs[0].Instance != "live" || !rs[0].DueAt.Equal(cronStart.Add(2*time.Minute)) {
			t.Fatalf("run %+v", rs[0])
		}
	})
}

// TestScheduleShutdownWaitsForRuns: Shutdown returns after the running scheduled run has ended
// and been recorded; with its context ended, it cancels the run and says so.
func TestScheduleShutdownWaitsForRuns(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		clock := durabletest.NewManualClock(cronStart)
		q := b.bare(t, durable.Config{Clock: clock})
		durable.Schedule(q, "patient", "@every 1m", tick("patient"))
		durable.Schedule(q, "cancellable", "@every 1m", tick("cancellable"))
		started := make(chan string, 2)
		release := make(chan struct{})
		m := tickMediator(t, tickHandlers{
			"patient": func(ctx context.Context) error {
				started <- "patient"
				<-release
				return nil
			},
			"cancellable": func(ctx context.Context) error {
				started <- "cancellable"
				<-ctx.Done()
				return ctx.Err()
			},
		})
		s := must[*durable.Scheduler](t)(durable.NewScheduler(q, m, durable.SchedulerConfig{PollInterval: 5 * time.Millisecond, ShutdownGrace: time.Minute}))
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Minute)
		<-started
		<-started
		ctx, cancel := context.WithCancel(context.Background())
		result := make(chan error)
		go func() { result <- s.Shutdown(ctx) }()
		cancel() // the cancellable run is interrupted; the patient one still runs
		waitRuns(t, q, "cancellable", 1)
		close(release)
		err := <-result
		if err == nil || !strings.Contains(err.Error(), "1 scheduled runs were interrupted") {
			t.Fatalf("shutdown: %v", err)
		}
		// Recorded before Shutdown returned: no waiting here.
		if rs := scheduleRuns(t, q, "patient"); len(rs) != 1 || rs[0].Outcome != record.OutcomeSucceeded {
			t.Fatalf("patient %+v", rs)
		}
		if rs := waitRuns(t, q, "cancellable", 1); rs[0].Outcome != record.OutcomeFailed ||
			!strings.HasPrefix(rs[0].Error, "interrupted by shutdown") {
			t.Fatalf("cancellable %+v", rs[0])
		}
	})
}

// TestScheduleStartRecomputesChangedSpec: Start writes a changed spec with its next run, leaves
// an unchanged one as it is, and leaves schedules no longer registered alone.
func TestScheduleStartRecomputesChangedSpec(t *testing.T) {
	b := sqliteBackend(t)
	clock := durabletest.NewManualClock(cronStart)
	m := tickMediator(t, nil)
	q1 := b.bare(t, durable.Config{Clock: clock})
	durable.Schedule(q1, "a", "@hourly", tick("a"))
	durable.Schedule(q1, "gone", "@daily", tick("gone"))
	s := start(t, q1, m)
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Minute)
	q2 := b.bare(t, durable.Config{Clock: clock})
	durable.Schedule(q2, "a", "*/15 * * * *", tick("a"))
	start(t, q2, m)
	info := must[[]record.ScheduleInfo](t)(q2.Schedules(context.Background()))
	if len(info) != 2 || info[0].Name != "a" || info[0].Spec != "*/15 * * * *" || !info[0].NextRun.Equal(cronStart.Add(15*time.Minute)) ||
		info[1].Name != "gone" || !info[1].NextRun.Equal(time.Date(2030, 1, 3, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("%+v", info)
	}
}

// TestScheduleMisuse: Schedule panics with a message naming the problem; Start refuses a
// scheduled request type without a handler.
func TestScheduleMisuse(t *testing.T) {
	q := sqliteBackend(t).bare(t, durable.Config{})
	durable.Schedule(q, "taken", "@hourly", tick("taken"))
	for _, c := range []struct {
		name string
		call func() error
		want string
	}{
		{"bad spec", func() error { return durable.Schedule(q, "x", "61 * * * *", tick("x")) }, `durable: Schedule "x": invalid cron expression "61 * * * *"`},
		{"six fields", func() error { return durable.Schedule(q, "x", "0 0 * * * *", tick("x")) }, "invalid cron expression"},
		{"duplicate", func() error { return durable.Schedule(q, "taken", "@daily", tick("taken")) }, `durable: Schedule "taken": name already scheduled (spec "@hourly")`},
		{"zone prefix", func() error { return durable.Schedule(q, "x", "CRON_TZ=Europe/Paris 0 9 * * *", tick("x")) }, "use WithLocation"},
		{"never", func() error { return durable.Schedule(q, "x", "0 0 30 2 *", tick("x")) }, "never names a time"},
		// The cron library runs a shorter @every once a second, and cuts a fraction of a second
		// off: each was accepted and ran at another pace than it said.
		{"every nanosecond", func() error { return durable.Schedule(q, "x", "@every 1ns", tick("x")) }, `"@every 1ns": the interval is under a second`},
		{"every millisecond", func() error { return durable.Schedule(q, "x", "@every 1ms", tick("x")) }, "the interval is under a second"},
		{"every negative", func() error { return durable.Schedule(q, "x", "@every -1s", tick("x")) }, "the interval is under a second"},
		{"every fraction", func() error { return durable.Schedule(q, "x", "@every 1500ms", tick("x")) }, "not a whole number of seconds"},
		{"not a pointer", func() error { return durable.Schedule(q, "x", "@hourly", func() Tick { return Tick{} }) }, "must be a pointer type"},
		{"nil newRequest", func() error { return durable.Schedule[*Tick](q, "x", "@hourly", nil) }, "nil newRequest"},
		{"nil location", func() error { return durable.Schedule(q, "x", "@hourly", tick("x"), durable.WithLocation(nil)) }, "WithLocation(nil)"},
		{"empty name", func() error { return durable.Schedule(q, "", "@hourly", tick("x")) }, "empty name"},
	} {
		err := registerErr(t, c.call)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}

	// The errors are kept: Start refuses to run a queue whose schedules failed.
	if err := q.Start(tickMediator(t, nil)); err == nil || !strings.Contains(err.Error(), "the queue's setup failed") ||
		!strings.Contains(err.Error(), `durable: Schedule "x": nil newRequest function`) {
		t.Fatalf("Start after failed schedules: %v", err)
	}

	type Unhandled struct{ mediator.Command }
	q3 := sqliteBackend(t).bare(t, durable.Config{})
	if err := durable.Schedule(q3, "unhandled", "@hourly", func() *Unhandled { return &Unhandled{} }); err != nil {
		t.Fatal(err)
	}
	if err := q3.Start(tickMediator(t, nil)); err == nil || !strings.Contains(err.Error(), `schedule "unhandled"`) {
		t.Fatalf("Start: %v", err)
	}

	q2 := sqliteBackend(t).bare(t, durable.Config{})
	if err := q2.Start(tickMediator(t, nil)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q2.Shutdown(context.Background()) })
	if err := registerErr(t, func() error { return durable.Schedule(q2, "late", "@hourly", tick("late")) }); err == nil ||
		!strings.Contains(err.Error(), "schedule every request before Start") {
		t.Fatalf("after Start: %v", err)
	}
}

// TestScheduleLeaseIsItsOwn: a schedule run's lease lasts SchedulerConfig.ScheduleLease, not
// the items' Lease, so each can be sized for what it guards.
func TestScheduleLeaseIsItsOwn(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		clock := durabletest.NewManualClock(cronStart)
		q := b.bare(t, durable.Config{Clock: clock})
		durable.Schedule(q, "stuck", "@every 1m", tick("stuck"))
		started, release := make(chan struct{}), make(chan struct{})
		m := tickMediator(t, tickHandlers{"stuck": func(context.Context) error {
			close(started)
			<-release
			return nil
		}})
		start(t, q, m, durable.SchedulerConfig{InstanceID: "a", Lease: time.Minute, ScheduleLease: time.Hour})
		t.Cleanup(func() { close(release) })
		clock.Advance(time.Minute)
		<-started
		rows, err := durable.StoreOf(q).Schedules(context.Background())
		if err != nil || len(rows) != 1 {
			t.Fatalf("schedules: %v %v", rows, err)
		}
		if want := cronStart.Add(time.Minute + time.Hour); !rows[0].RunUntil.Equal(want) {
			t.Errorf("run lease until %v; want %v (ScheduleLease after the claim)", rows[0].RunUntil, want)
		}
	})
}
