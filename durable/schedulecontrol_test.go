package durable_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/durabletest"
	istore "github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// fleet starts the instances ids on b's database, each with Tick registered as "tick" and the
// schedules declare declares, and returns a queue of its own (not started) for the operator's
// calls, and the count of Tick runs per schedule and instance.
func scheduleFleet(t *testing.T, b backend, clock *durabletest.ManualClock, declare func(q *durable.Queue), ids ...string) (*durable.Queue, func() map[string]map[string]int) {
	t.Helper()
	var (
		mu    sync.Mutex
		calls = map[string]map[string]int{}
	)
	for _, id := range ids {
		q := b.bare(t, durable.Config{Clock: clock})
		durable.Register[*Tick](q, "tick")
		if declare != nil {
			declare(q)
		}
		m := mediator.New(nil, mediator.Config{})
		mediator.HandleFunc(m, func(ctx context.Context, k *Tick) (mediator.Void, error) {
			mu.Lock()
			defer mu.Unlock()
			if calls[k.Schedule] == nil {
				calls[k.Schedule] = map[string]int{}
			}
			calls[k.Schedule][id]++
			return mediator.Void{}, nil
		})
		if err := m.Build(); err != nil {
			t.Fatal(err)
		}
		start(t, q, m, durable.SchedulerConfig{InstanceID: id})
	}
	operator := b.bare(t, durable.Config{Clock: clock})
	durable.Register[*Tick](operator, "tick")
	return operator, func() map[string]map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]map[string]int{}
		for k, v := range calls {
			out[k] = map[string]int{}
			for id, n := range v {
				out[k][id] = n
			}
		}
		return out
	}
}

func total(byInstance map[string]int) int {
	n := 0
	for _, v := range byInstance {
		n += v
	}
	return n
}

func scheduleInfo(t *testing.T, q *durable.Queue, name string) record.ScheduleInfo {
	t.Helper()
	for _, i := range must[[]record.ScheduleInfo](t)(q.Schedules(context.Background())) {
		if i.Name == name {
			return i
		}
	}
	t.Fatalf("no schedule %q", name)
	return record.ScheduleInfo{}
}

// TestScheduleAddedAtRunTimeRunsOnOneInstance: a schedule added through one queue, after the
// schedulers of two other instances started, is found by them at their next poll, and each due
// run is run once, by one of them, with the request its payload encodes.
func TestScheduleAddedAtRunTimeRunsOnOneInstance(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		clock := durabletest.NewManualClock(cronStart)
		op, calls := scheduleFleet(t, b, clock, nil, "a", "b")
		info, err := op.AddSchedule(context.Background(), durable.ScheduleSpec{Name: "added", Spec: "@every 1m", Request: "tick",
			Payload: []byte(`{"Schedule":"added"}`)}, "ops")
		if err != nil {
			t.Fatal(err)
		}
		if info.Request != "tick" || info.Location != "UTC" || !info.NextRun.Equal(cronStart.Add(time.Minute)) || info.Paused {
			t.Fatalf("added %+v", info)
		}
		for i := 1; i <= 3; i++ {
			clock.Advance(time.Minute)
			waitRuns(t, op, "added", i)
		}
		if got := runSummary(waitRuns(t, op, "added", 3)); got != "03:01:succeeded 03:02:succeeded 03:03:succeeded" {
			t.Fatalf("runs %s", got)
		}
		if n := total(calls()["added"]); n != 3 {
			t.Fatalf("calls %v, want 3 in all", calls())
		}
		audit := must[[]record.AuditEntry](t)(op.Audit(context.Background(), durable.AuditFilter{TargetKind: record.AuditTargetSchedule, Target: "added"}))
		if len(audit) != 1 || audit[0].Action != record.AuditAddSchedule || audit[0].Actor != "ops" || audit[0].Outcome != record.AuditDone ||
			!strings.Contains(audit[0].Detail, `spec "@every 1m" in UTC, request tick`) {
			t.Fatalf("audit %+v", audit)
		}
	})
}

// TestSchedulePauseResumeFleetWide: a pause made through one queue stops the due runs on every
// instance (passed over, unlogged) until resumed; a timed pause ends by itself; a resume does not
// catch up the runs passed over.
func TestSchedulePauseResumeFleetWide(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		clock := durabletest.NewManualClock(cronStart)
		declare := func(q *durable.Queue) { durable.Schedule(q, "job", "@every 1m", tick("job")) }
		op, calls := scheduleFleet(t, b, clock, declare, "a", "b")
		ctx := context.Background()
		eventually(t, 20*time.Second, "the declared schedule written", func() bool {
			rows, err := op.Schedules(ctx)
			return err == nil && len(rows) == 1
		})
		info := must[record.ScheduleInfo](t)(op.PauseSchedule(ctx, "job", "ops", time.Time{}))
		if !info.Paused || info.PausedBy != "ops" || !info.PausedUntil.IsZero() {
			t.Fatalf("paused %+v", info)
		}
		clock.Advance(time.Minute) // 03:01 passed over
		eventually(t, 20*time.Second, "the 03:01 run passed over", func() bool {
			return scheduleInfo(t, op, "job").NextRun.Equal(cronStart.Add(2 * time.Minute))
		})
		if rs := scheduleRuns(t, op, "job"); len(rs) != 0 {
			t.Fatalf("a paused schedule ran: %+v", rs)
		}
		if info := must[record.ScheduleInfo](t)(op.ResumeSchedule(ctx, "job", "ops")); info.Paused ||
			!info.NextRun.Equal(cronStart.Add(2*time.Minute)) {
			t.Fatalf("resumed %+v", info)
		}
		clock.Advance(time.Minute) // 03:02 runs
		waitRuns(t, op, "job", 1)

		// A pause until 03:03:30: 03:03 is passed over, 03:04 runs.
		must[record.ScheduleInfo](t)(op.PauseSchedule(ctx, "job", "ops", cronStart.Add(3*time.Minute+30*time.Second)))
		clock.Advance(time.Minute)
		eventually(t, 20*time.Second, "the 03:03 run passed over", func() bool {
			return scheduleInfo(t, op, "job").NextRun.Equal(cronStart.Add(4 * time.Minute))
		})
		clock.Advance(time.Minute)
		if got := runSummary(waitRuns(t, op, "job", 2)); got != "03:02:succeeded 03:04:succeeded" {
			t.Fatalf("runs %s", got)
		}
		if n := total(calls()["job"]); n != 2 {
			t.Fatalf("calls %v, want 2", calls())
		}
		if info := scheduleInfo(t, op, "job"); info.Paused {
			t.Fatalf("a pause past its end still shown: %+v", info)
		}
		// Resuming what is not paused changes nothing, and the audit log says so.
		must[record.ScheduleInfo](t)(op.ResumeSchedule(ctx, "job", "ops"))
		audit := must[[]record.AuditEntry](t)(op.Audit(ctx, durable.AuditFilter{TargetKind: record.AuditTargetSchedule, Target: "job"}))
		var got []string
		for _, e := range audit {
			got = append(got, string(e.Action)+":"+string(e.Outcome)+":"+e.Detail)
		}
		want := []string{"resume:no_change:not paused", "pause:done:until 2030-01-02T03:03:30Z", "resume:done:", "pause:done:"}
		if strings.Join(got, " | ") != strings.Join(want, " | ") {
			t.Fatalf("audit\n%s\nwant\n%s", strings.Join(got, " | "), strings.Join(want, " | "))
		}
	})
}

// TestScheduleRunNowRunsOnce: a run-now asked through one queue is run once, by one of two
// instances, even of a paused schedule, and logged with its actor; a second ask while one is
// pending changes nothing.
func TestScheduleRunNowRunsOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		clock := durabletest.NewManualClock(cronStart)
		ctx := context.Background()
		op, calls := scheduleFleet(t, b, clock, nil, "a", "b")
		must[record.ScheduleInfo](t)(op.AddSchedule(ctx, durable.ScheduleSpec{Name: "nightly", Spec: "0 2 * * *", Request: "tick",
			Payload: []byte(`{"Schedule":"nightly"}`)}, "ops"))
		must[record.ScheduleInfo](t)(op.PauseSchedule(ctx, "nightly", "ops", time.Time{}))
		clock.Advance(time.Second)
		if info := must[record.ScheduleInfo](t)(op.RunScheduleNow(ctx, "nightly", "alice")); info.RunNowBy != "alice" ||
			!info.RunNowAt.Equal(cronStart.Add(time.Second)) {
			t.Fatalf("asked %+v", info)
		}
		rs := waitRuns(t, op, "nightly", 1)
		if rs[0].RunNowBy != "alice" || rs[0].Outcome != record.OutcomeSucceeded || !rs[0].DueAt.Equal(cronStart.Add(time.Second)) {
			t.Fatalf("run %+v", rs[0])
		}
		if n := total(calls()["nightly"]); n != 1 {
			t.Fatalf("calls %v, want 1", calls())
		}
		if info := scheduleInfo(t, op, "nightly"); !info.RunNowAt.IsZero() || !info.Paused ||
			!info.NextRun.Equal(time.Date(2030, 1, 3, 2, 0, 0, 0, time.UTC)) {
			t.Fatalf("after the run %+v", info)
		}
	})
}

// TestScheduleRunNowPendingIsOnce: asking twice before any instance claims the run asks once.
func TestScheduleRunNowPendingIsOnce(t *testing.T) {
	b := sqliteBackend(t)
	ctx := context.Background()
	q := b.bare(t, durable.Config{})
	durable.Register[*Tick](q, "tick")
	must[record.ScheduleInfo](t)(q.AddSchedule(ctx, durable.ScheduleSpec{Name: "s", Spec: "@hourly", Request: "tick", Payload: []byte(`{}`)}, "ops"))
	must[record.ScheduleInfo](t)(q.RunScheduleNow(ctx, "s", "alice"))
	if info := must[record.ScheduleInfo](t)(q.RunScheduleNow(ctx, "s", "bob")); info.RunNowBy != "alice" {
		t.Fatalf("second ask %+v", info)
	}
	audit := must[[]record.AuditEntry](t)(q.Audit(ctx, durable.AuditFilter{TargetKind: record.AuditTargetSchedule, Target: "s"}))
	if len(audit) != 3 || audit[0].Outcome != record.AuditNoChange || audit[0].Actor != "bob" ||
		!strings.HasPrefix(audit[0].Detail, "a run asked for by alice at ") || audit[1].Outcome != record.AuditDone {
		t.Fatalf("audit %+v", audit)
	}
}

// TestScheduleRemoveStopsRuns: a schedule removed through one queue is run by no instance any
// more; its row and run log stay; its name may be added again. One declared in code is not
// removed.
func TestScheduleRemoveStopsRuns(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		clock := durabletest.NewManualClock(cronStart)
		ctx := context.Background()
		declare := func(q *durable.Queue) { durable.Schedule(q, "code", "@every 1m", tick("code")) }
		op, calls := scheduleFleet(t, b, clock, declare, "a", "b")
		spec := durable.ScheduleSpec{Name: "gone", Spec: "@every 1m", Request: "tick", Payload: []byte(`{"Schedule":"gone"}`)}
		must[record.ScheduleInfo](t)(op.AddSchedule(ctx, spec, "ops"))
		clock.Advance(time.Minute)
		waitRuns(t, op, "gone", 1)
		waitRuns(t, op, "code", 1)
		info := must[record.ScheduleInfo](t)(op.RemoveSchedule(ctx, "gone", "ops"))
		if info.RemovedAt.IsZero() || info.RemovedBy != "ops" {
			t.Fatalf("removed %+v", info)
		}
		// Every instance's turn that claims the 03:02 run of "code" read the table after the
		// removal, and so did every later one.
		clock.Advance(time.Minute)
		waitRuns(t, op, "code", 2)
		clock.Advance(time.Minute)
		waitRuns(t, op, "code", 3)
		if rs := scheduleRuns(t, op, "gone"); len(rs) != 1 {
			t.Fatalf("a removed schedule ran: %s", runSummary(rs))
		}
		if n := total(calls()["gone"]); n != 1 {
			t.Fatalf("calls %v", calls())
		}
		if _, err := op.PauseSchedule(ctx, "gone", "ops", time.Time{}); !errors.Is(err, durable.ErrNotFound) {
			t.Fatalf("pause of a removed schedule: %v", err)
		}
		if _, err := op.RemoveSchedule(ctx, "code", "ops"); !errors.Is(err, durable.ErrScheduleInCode) ||
			!strings.Contains(err.Error(), "pause it") {
			t.Fatalf("remove of a declared schedule: %v", err)
		}
		// Added again: it runs again, and its run log goes on.
		must[record.ScheduleInfo](t)(op.AddSchedule(ctx, spec, "ops"))
		clock.Advance(time.Minute)
		if got := runSummary(waitRuns(t, op, "gone", 2)); got != "03:01:succeeded 03:04:succeeded" {
			t.Fatalf("runs %s", got)
		}
	})
}

// TestAddScheduleRefusesBadInput: each refusal names the field that is wrong, every problem in
// one error.
func TestAddScheduleRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	q := sqliteBackend(t).bare(t, durable.Config{})
	durable.Register[*Tick](q, "tick")
	durable.Schedule(q, "code", "@hourly", tick("code"))
	ok := durable.ScheduleSpec{Name: "s", Spec: "@hourly", Request: "tick", Payload: []byte(`{}`)}
	with := func(f func(*durable.ScheduleSpec)) durable.ScheduleSpec { s := ok; f(&s); return s }
	for _, c := range []struct {
		name  string
		spec  durable.ScheduleSpec
		actor string
		want  []string
	}{
		{"empty", durable.ScheduleSpec{}, "", []string{"actor is required", "Name is empty", "Spec is empty", "Request is empty"}},
		{"unknown request", with(func(s *durable.ScheduleSpec) { s.Request = "nope" }), "ops", []string{`Request "nope" is not a registered request name`}},
		{"payload", with(func(s *durable.ScheduleSpec) { s.Payload = []byte(`{"Schedule": 5}`) }), "ops", []string{"Payload does not decode as a tick request"}},
		{"no payload", with(func(s *durable.ScheduleSpec) { s.Payload = nil }), "ops", []string{"Payload is empty"}},
		{"spec", with(func(s *durable.ScheduleSpec) { s.Spec = "61 * * * *" }), "ops", []string{`Spec: invalid cron expression "61 * * * *"`}},
		{"zone prefix", with(func(s *durable.ScheduleSpec) { s.Spec = "TZ=Europe/Paris 0 9 * * *" }), "ops", []string{"use Location"}},
		{"every millisecond", with(func(s *durable.ScheduleSpec) { s.Spec = "@every 1ms" }), "ops", []string{`Spec: "@every 1ms": the interval is under a second`}},
		// A name of 60 KB was stored, and carried by every list and audit entry.
		{"long name", with(func(s *durable.ScheduleSpec) { s.Name = strings.Repeat("n", 60_000) }), "ops", []string{"Name is 60000 bytes, more than 1024"}},
		{"location", with(func(s *durable.ScheduleSpec) { s.Location = "Mars/Olympus" }), "ops", []string{`Location "Mars/Olympus" is not a known time zone`}},
		{"local", with(func(s *durable.ScheduleSpec) { s.Location = "Local" }), "ops", []string{`Location "Local" is the host's zone`}},
		{"location and spec", with(func(s *durable.ScheduleSpec) { s.Location, s.Spec = "Mars/Olympus", "bad cron" }), "ops",
			[]string{`Location "Mars/Olympus" is not a known time zone`, `Spec: invalid cron expression "bad cron"`}},
	} {
		_, err := q.AddSchedule(ctx, c.spec, c.actor)
		if !errors.Is(err, durable.ErrInvalidSchedule) {
			t.Errorf("%s: %v, want ErrInvalidSchedule", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want %q", c.name, err, w)
			}
		}
	}
	if _, err := q.AddSchedule(ctx, with(func(s *durable.ScheduleSpec) { s.Name = "code" }), "ops"); !errors.Is(err, durable.ErrScheduleInCode) {
		t.Errorf("a declared name: %v", err)
	}
	must[record.ScheduleInfo](t)(q.AddSchedule(ctx, ok, "ops"))
	if _, err := q.AddSchedule(ctx, ok, "ops"); !errors.Is(err, durable.ErrScheduleExists) {
		t.Errorf("twice: %v", err)
	}
	for name, call := range map[string]func() error{
		"pause":   func() error { _, err := q.PauseSchedule(ctx, "none", "ops", time.Time{}); return err },
		"resume":  func() error { _, err := q.ResumeSchedule(ctx, "none", "ops"); return err },
		"run now": func() error { _, err := q.RunScheduleNow(ctx, "none", "ops"); return err },
		"remove":  func() error { _, err := q.RemoveSchedule(ctx, "none", "ops"); return err },
	} {
		if err := call(); !errors.Is(err, durable.ErrNotFound) {
			t.Errorf("%s of an unknown schedule: %v", name, err)
		}
	}
	if _, err := q.PauseSchedule(ctx, "s", "ops", time.Now().Add(-time.Hour)); !errors.Is(err, durable.ErrInvalidSchedule) ||
		!strings.Contains(err.Error(), "is not after now") {
		t.Errorf("a pause that ended: %v", err)
	}
	if _, err := q.PauseSchedule(ctx, "s", "", time.Time{}); !errors.Is(err, durable.ErrInvalidSchedule) || !strings.Contains(err.Error(), "actor is required") {
		t.Errorf("no actor: %v", err)
	}
}

// TestAddScheduleConcurrentOnce: of calls adding one name at once, one adds it; the others
// are told it exists, and the audit log has one add.
func TestAddScheduleConcurrentOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		const n = 8
		errs := make(chan error, n)
		var wg sync.WaitGroup
		begin := make(chan struct{})
		for i := range n {
			q := b.bare(t, durable.Config{})
			durable.Register[*Tick](q, "tick")
			must[[]record.ScheduleInfo](t)(q.Schedules(ctx)) // connected before the start
			wg.Go(func() {
				<-begin
				_, err := q.AddSchedule(ctx, durable.ScheduleSpec{Name: "once", Spec: "@hourly", Request: "tick", Payload: []byte(`{}`)}, fmt.Sprint("op", i))
				errs <- err
			})
		}
		close(begin)
		wg.Wait()
		close(errs)
		added := 0
		for err := range errs {
			switch {
			case err == nil:
				added++
			case !errors.Is(err, durable.ErrScheduleExists):
				t.Errorf("an add: %v", err)
			}
		}
		q := b.bare(t, durable.Config{})
		audit := must[[]record.AuditEntry](t)(q.Audit(ctx, durable.AuditFilter{TargetKind: record.AuditTargetSchedule, Target: "once"}))
		if added != 1 || len(audit) != 1 {
			t.Fatalf("%d adds succeeded, %d audited; want 1", added, len(audit))
		}
	})
}

// TestScheduleRunNowWaitsForTheRunGoing: a run now asked while a run of the schedule is going
// starts when that run ends, never beside it.
func TestScheduleRunNowWaitsForTheRunGoing(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		clock := durabletest.NewManualClock(cronStart)
		q := b.bare(t, durable.Config{Clock: clock})
		durable.Schedule(q, "slow", "@every 1m", tick("slow"))
		var (
			mu               sync.Mutex
			running, overlap int
		)
		started, release := make(chan struct{}, 2), make(chan struct{})
		m := tickMediator(t, tickHandlers{"slow": func(context.Context) error {
			mu.Lock()
			running++
			overlap = max(overlap, running)
			mu.Unlock()
			started <- struct{}{}
			<-release
			mu.Lock()
			running--
			mu.Unlock()
			return nil
		}})
		start(t, q, m, durable.SchedulerConfig{InstanceID: "a", Lease: time.Hour})
		clock.Advance(time.Minute)
		<-started
		must[record.ScheduleInfo](t)(q.RunScheduleNow(context.Background(), "slow", "alice"))
		// The run now is pending while the due run holds its lease.
		if i := scheduleInfo(t, q, "slow"); i.RunNowBy != "alice" || i.RunningOn != "a" {
			t.Fatalf("while running %+v", i)
		}
		release <- struct{}{}
		<-started
		close(release)
		rs := waitRuns(t, q, "slow", 2)
		if rs[0].RunNowBy != "" || rs[1].RunNowBy != "alice" || rs[1].StartedAt.Before(rs[0].EndedAt) {
			t.Fatalf("runs %+v", rs)
		}
		mu.Lock()
		defer mu.Unlock()
		if overlap != 1 {
			t.Fatalf("%d runs at once", overlap)
		}
	})
}

// TestScheduleDeclaredInCodeTakesOverAStoredName: Start gives the row of a stored schedule to
// the code's declaration of its name; the run log goes on.
func TestScheduleDeclaredInCodeTakesOverAStoredName(t *testing.T) {
	b := sqliteBackend(t)
	ctx := context.Background()
	clock := durabletest.NewManualClock(cronStart)
	op := b.bare(t, durable.Config{Clock: clock})
	durable.Register[*Tick](op, "tick")
	must[record.ScheduleInfo](t)(op.AddSchedule(ctx, durable.ScheduleSpec{Name: "moved", Spec: "@daily", Request: "tick", Payload: []byte(`{}`)}, "ops"))
	q := b.bare(t, durable.Config{Clock: clock})
	durable.Schedule(q, "moved", "@every 1m", tick("moved"))
	start(t, q, tickMediator(t, nil))
	if i := scheduleInfo(t, op, "moved"); i.Request != "" || i.Spec != "@every 1m" || !i.NextRun.Equal(cronStart.Add(time.Minute)) {
		t.Fatalf("after Start %+v", i)
	}
	if _, err := op.RemoveSchedule(ctx, "moved", "ops"); !errors.Is(err, durable.ErrScheduleInCode) {
		t.Fatalf("remove: %v", err)
	}
	clock.Advance(time.Minute)
	waitRuns(t, op, "moved", 1)
}

// TestSchedulePauseHoldsAgainstAStaleRead: an instance that read the schedule before it was
// paused or removed cannot claim its due run after: the claim checks the stored pause and
// removal, not the instance's last read.
func TestSchedulePauseHoldsAgainstAStaleRead(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		clock := durabletest.NewManualClock(cronStart)
		q := b.bare(t, durable.Config{Clock: clock})
		durable.Register[*Tick](q, "tick")
		for _, name := range []string{"paused", "removed"} {
			must[record.ScheduleInfo](t)(q.AddSchedule(ctx, durable.ScheduleSpec{Name: name, Spec: "@every 1m", Request: "tick", Payload: []byte(`{}`)}, "ops"))
		}
		due := func(name string) istore.ScheduleDue {
			return istore.ScheduleDue{Name: name, Spec: "@every 1m", Location: "UTC", DueAt: cronStart.Add(time.Minute), Next: cronStart.Add(2 * time.Minute)}
		}
		must[record.ScheduleInfo](t)(q.PauseSchedule(ctx, "paused", "ops", time.Time{}))
		must[record.ScheduleInfo](t)(q.RemoveSchedule(ctx, "removed", "ops"))
		at := cronStart.Add(time.Minute)
		for _, name := range []string{"paused", "removed"} {
			ok, err := durable.StoreOf(q).ClaimScheduleRun(ctx, due(name), "stale", at, at.Add(time.Minute))
			if err != nil || ok {
				t.Errorf("claim of the %s schedule's due run as read before: %v %v, want refused", name, ok, err)
			}
		}
		// A timed pause that ended no longer holds.
		must[record.ScheduleInfo](t)(q.ResumeSchedule(ctx, "paused", "ops"))
		must[record.ScheduleInfo](t)(q.PauseSchedule(ctx, "paused", "ops", cronStart.Add(30*time.Second)))
		if ok, err := durable.StoreOf(q).ClaimScheduleRun(ctx, due("paused"), "stale", at, at.Add(time.Minute)); err != nil || !ok {
			t.Errorf("claim after the pause ended: %v %v", ok, err)
		}
	})
}
