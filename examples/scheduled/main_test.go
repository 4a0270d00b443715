package main

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchboard-go/switchboard/durable/record"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The run logs on the real clock: a failed run keeps the cadence, a run due while the slow one
// goes is skipped, a run now runs while paused and the due run of the pause is not logged, the
// schedule runs again after the resume, and the nightly report runs now, once, for its payload.
func TestRun(t *testing.T) {
	var out strings.Builder
	sum, err := run(context.Background(), &out, filepath.Join(t.TempDir(), "queue.db"))
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log("\n" + out.String())

	runs := sum.runs[ratesSchedule]
	byCode := func(r record.ScheduleRun) bool { return r.RunNowBy == "" }
	failed := slices.IndexFunc(runs, func(r record.ScheduleRun) bool { return r.Outcome == record.OutcomeFailed })
	if failed < 1 || runs[failed-1].Outcome != record.OutcomeSucceeded || !strings.Contains(runs[failed].Error, "503") {
		t.Fatalf("no success followed by the 503 failure in %+v", runs)
	}
	// The cadence goes on after the failure: the next due run is a second later.
	next := slices.IndexFunc(runs[failed+1:], func(r record.ScheduleRun) bool { return byCode(r) && r.Outcome != record.OutcomeSkipped })
	if next < 0 || !runs[failed+1+next].DueAt.Equal(runs[failed].DueAt.Add(time.Second)) {
		t.Errorf("the run after the failure (due %v) is not due a second later: %+v", runs[failed].DueAt, runs)
	}
	// The skipped run was due while the slow run went, and says so.
	skipped := slices.IndexFunc(runs, func(r record.ScheduleRun) bool { return r.Outcome == record.OutcomeSkipped })
	if skipped < 0 {
		t.Fatalf("no skipped run in %+v", runs)
	}
	slow := runs[failed+1+next]
	if s := runs[skipped]; !strings.Contains(s.Error, "still running") || s.DueAt.Before(slow.StartedAt) || s.DueAt.After(slow.EndedAt) {
		t.Errorf("skipped run %+v, not due while the slow run %+v went", s, slow)
	}

	// Bob's run now ran while the schedule was paused; no run due by the schedule was logged
	// between the pause and the resume, though one was due (and passed over) then.
	nowRun := slices.IndexFunc(runs, func(r record.ScheduleRun) bool { return r.RunNowBy == "bob" })
	if nowRun < 0 || runs[nowRun].Outcome != record.OutcomeSucceeded || runs[nowRun].DueAt.Before(sum.paused) {
		t.Errorf("no succeeded run now by bob after the pause at %v: %+v", sum.paused, runs)
	}
	if sum.passed.Before(sum.paused) || !sum.passed.Before(sum.resumed) {
		t.Errorf("the run passed over was due %v, not between the pause %v and the resume %v", sum.passed, sum.paused, sum.resumed)
	}
	for _, r := range runs {
		if byCode(r) && !r.DueAt.Before(sum.paused) && r.DueAt.Before(sum.resumed) {
			t.Errorf("a run due %v was logged while the schedule was paused (%v to %v)", r.DueAt, sum.paused, sum.resumed)
		}
	}
	if last := runs[len(runs)-1]; !byCode(last) || last.Outcome != record.OutcomeSucceeded || last.DueAt.Before(sum.resumed) {
		t.Errorf("the last run %+v is not a run due by the schedule after the resume at %v", last, sum.resumed)
	}

	// The nightly report: added at run time for 02:00 UTC, run now once by bob with its payload.
	if n := sum.nightly.NextRun.UTC(); n.Hour() != 2 || n.Minute() != 0 || sum.nightly.Request != "reports.send" {
		t.Errorf("the nightly schedule as added: %+v", sum.nightly)
	}
	nightly := sum.runs[reportSchedule]
	if len(nightly) != 1 || nightly[0].RunNowBy != "bob" || nightly[0].Outcome != record.OutcomeSucceeded {
		t.Errorf("the nightly report's runs: %+v", nightly)
	}
	if !slices.Equal(sum.reports, []string{"finance@example.com"}) {
		t.Errorf("reports mailed to %v", sum.reports)
	}
	for _, s := range sum.schedule {
		if s.Paused || s.LastOutcome != record.OutcomeSucceeded {
			t.Errorf("schedule %s at the end: paused %v, last outcome %s", s.Name, s.Paused, s.LastOutcome)
		}
	}
	if len(sum.schedule) != 2 {
		t.Errorf("%d schedules stored, want 2", len(sum.schedule))
	}
}
