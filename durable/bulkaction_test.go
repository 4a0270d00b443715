package durable_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// bulkEnv is a queue on the real clock (a bulk action's throttle and waits are timed) with a
// Work handler the test steers, counting its runs per letter.
type bulkEnv struct {
	q    *durable.Queue
	m    *mediator.Mediator
	mu   sync.Mutex
	fn   func(ctx context.Context, w *Work) error
	runs map[record.DeadLetterID]int
}

func newBulkEnv(t *testing.T, b backend, cfg durable.Config, mediatorOpts ...func(*mediator.Mediator)) *bulkEnv {
	t.Helper()
	cfg.Policy = fastPolicy
	e := &bulkEnv{q: b.queue(t, cfg), runs: map[record.DeadLetterID]int{}}
	e.m = mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
		d, _ := durable.FromContext(ctx, w)
		e.mu.Lock()
		e.runs[d.DeadLetter]++
		fn := e.fn
		e.mu.Unlock()
		if fn == nil {
			return nil
		}
		return fn(ctx, w)
	}}, mediatorOpts...)
	return e
}

func (e *bulkEnv) handle(fn func(ctx context.Context, w *Work) error) {
	e.mu.Lock()
	e.fn = fn
	e.mu.Unlock()
}

func (e *bulkEnv) ran() map[record.DeadLetterID]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[record.DeadLetterID]int, len(e.runs))
	for k, v := range e.runs {
		out[k] = v
	}
	return out
}

// capture makes n failed letters of source, whose errors are "<errText> <i>".
func (e *bulkEnv) capture(t *testing.T, source, errText string, n int) []record.DeadLetterID {
	t.Helper()
	e.handle(func(_ context.Context, w *Work) error { return fmt.Errorf("%s %d", errText, w.N) })
	defer e.handle(nil)
	items := make([]durable.BatchItem, n)
	for i := range items {
		items[i] = durable.BatchItem{Key: fmt.Sprintf("k%d", i), Request: &Work{N: i}}
	}
	res, err := e.q.RunBatch(context.Background(), e.m, source, items)
	if err != nil || len(res.DeadLetters) != n {
		t.Fatalf("capture: %+v, %v", res, err)
	}
	e.mu.Lock()
	clear(e.runs)
	e.mu.Unlock()
	return res.DeadLetters
}

func (e *bulkEnv) waitAction(t *testing.T, id record.BulkActionID, what string, cond func(a durable.BulkAction) bool) durable.BulkAction {
	t.Helper()
	return e.waitActionFor(t, 60*time.Second, id, what, cond)
}

// waitActionFor is waitAction with its bound.
func (e *bulkEnv) waitActionFor(t *testing.T, bound time.Duration, id record.BulkActionID, what string, cond func(a durable.BulkAction) bool) durable.BulkAction {
	t.Helper()
	var a durable.BulkAction
	eventually(t, bound, what, func() bool {
		var err error
		a, err = e.q.BulkAction(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return cond(a)
	})
	return a
}

func finished(a durable.BulkAction) bool { return a.State.Finished() }

// A replay by filter: the dry run counts and samples the letters it would take and stores
// nothing; the action replays exactly those letters, once each, names itself in each letter's
// timeline and in the audit log, and its totals add up.
func TestBulkReplayByFilter(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		e := newBulkEnv(t, b, durable.Config{})
		timeouts := e.capture(t, "orders", "upstream Timeout", 6)
		others := e.capture(t, "orders", "bad record", 3)
		elsewhere := e.capture(t, "invoices", "upstream timeout", 4)
		spec := durable.BulkActionSpec{Kind: record.BulkReplay, Filter: durable.DeadLetterFilter{Source: "orders", ErrorContains: "TIMEOUT"}, Rate: 1000}

		dry, err := e.q.StartBulkAction(ctx, spec, "alice", durable.DryRun())
		if err != nil || dry.ID != 0 || dry.Matched != 6 || len(dry.Sample) != 6 {
			t.Fatalf("dry run: %+v, %v", dry, err)
		}
		for _, d := range dry.Sample {
			if d.Source != "orders" || !strings.Contains(d.Error, "Timeout") {
				t.Fatalf("sample letter %+v", d)
			}
		}
		if list, err := e.q.BulkActions(ctx, 0, 0); err != nil || len(list) != 0 {
			t.Fatalf("a dry run stored %+v, %v", list, err)
		}

		a, err := e.q.StartBulkAction(ctx, spec, "alice")
		if err != nil || a.ID == 0 || a.State != record.BulkQueued || a.Matched != 6 {
			t.Fatalf("start: %+v, %v", a, err)
		}
		start(t, e.q, e.m, durable.SchedulerConfig{})
		a = e.waitAction(t, a.ID, "the action to finish", finished)
		want := record.BulkActionTotals{Replayed: 6}
		if a.State != record.BulkDone || a.Totals != want || a.Cursor != timeouts[5] || a.Actor != "alice" || !a.FinishedAt.After(a.CreatedAt) {
			t.Fatalf("action %+v", a)
		}
		runs := e.ran()
		for _, id := range timeouts {
			d, tl, err := e.q.DeadLetter(ctx, id)
			if err != nil || d.Status != record.DeadLetterReplayed || runs[id] != 1 || len(tl) != 1 || tl[0].BulkAction != a.ID || tl[0].Actor != "alice" {
				t.Fatalf("letter %d: %+v, %d runs, timeline %+v, %v", id, d, runs[id], tl, err)
			}
		}
		for _, id := range append(others, elsewhere...) {
			if d, _, _ := e.q.DeadLetter(ctx, id); d.Status != record.DeadLetterFailed || runs[id] != 0 {
				t.Fatalf("letter %d outside the filter was touched: %+v, %d runs", id, d, runs[id])
			}
		}
		audit, err := e.q.Audit(ctx, durable.AuditFilter{TargetKind: record.AuditTargetBulkAction, Target: fmt.Sprint(a.ID)})
		if err != nil || len(audit) != 1 || audit[0].Action != record.AuditBulkReplay || audit[0].Actor != "alice" || !strings.Contains(audit[0].Detail, "6 letters") {
			t.Fatalf("audit %+v, %v", audit, err)
		}
	})
}

// A discard by error text retires the letters it selects, each with the action's reason; the
// letters it does not select stay failed.
func TestBulkDiscardByErrorText(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		e := newBulkEnv(t, b, durable.Config{})
		gone := e.capture(t, "orders", "customer 100%_deleted", 5)
		kept := e.capture(t, "orders", "customer 100 deleted", 2)
		start(t, e.q, e.m, durable.SchedulerConfig{})
		a, err := e.q.StartBulkAction(ctx, durable.BulkActionSpec{Kind: record.BulkDiscard, Filter: durable.DeadLetterFilter{ErrorContains: "100%_d"},
			Reason: "customers deleted", Rate: 1000}, "bob")
		if err != nil || a.Matched != 5 {
			t.Fatalf("start: %+v, %v", a, err)
		}
		a = e.waitAction(t, a.ID, "the discard to finish", finished)
		if a.State != record.BulkDone || a.Totals != (record.BulkActionTotals{Discarded: 5}) {
			t.Fatalf("action %+v", a)
		}
		for _, id := range gone {
			d, tl, _ := e.q.DeadLetter(ctx, id)
			if d.Status != record.DeadLetterDiscarded || len(tl) != 1 || tl[0].Reason != "customers deleted" || tl[0].BulkAction != a.ID {
				t.Fatalf("letter %d: %+v %+v", id, d, tl)
			}
		}
		for _, id := range kept {
			if d, _, _ := e.q.DeadLetter(ctx, id); d.Status != record.DeadLetterFailed {
				t.Fatalf("letter %d: %+v", id, d)
			}
		}
		if n := len(e.ran()); n != 0 {
			t.Fatalf("a discard ran %d handlers", n)
		}
	})
}

// A bad spec is refused naming every problem, and nothing is stored.
func TestBulkActionSpecInvalid(t *testing.T) {
	ctx := context.Background()
	e := newBulkEnv(t, sqliteBackend(t), durable.Config{})
	from := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	_, err := e.q.StartBulkAction(ctx, durable.BulkActionSpec{Kind: record.BulkDiscard,
		Filter: durable.DeadLetterFilter{Status: record.DeadLetterReplayed, From: from, To: from, Limit: 3}, Rate: -1, MaxInFlight: 65}, "")
	for _, want := range []string{"actor is required", "Reason is required", `Filter.Status "replayed"`, "Filter.Limit", "Filter.From", "Rate -1", "MaxInFlight 65"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
	_, err = e.q.StartBulkAction(ctx, durable.BulkActionSpec{Kind: "rerun"}, "alice")
	if err == nil || !strings.Contains(err.Error(), `Kind "rerun"`) {
		t.Errorf("error %v", err)
	}
	// Blank text is no reason and no actor; an unbounded rate is no throttle.
	_, err = e.q.StartBulkAction(ctx, durable.BulkActionSpec{Kind: record.BulkDiscard, Reason: " \t ", Rate: math.Inf(1)}, "   ")
	for _, want := range []string{"actor is required", "Reason is required", "Rate +Inf"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
	// A rate so low that the time between two letters overflows a time.Duration ran
	// unthrottled: it is refused, naming the least rate.
	for _, rate := range []float64{1e-11, 1e-300, 1.0 / (25 * 3600)} {
		_, err = e.q.StartBulkAction(ctx, durable.BulkActionSpec{Kind: record.BulkDiscard, Reason: "cleanup", Rate: rate}, "alice")
		if err == nil || !errors.Is(err, durable.ErrInvalidBulkAction) || !strings.Contains(err.Error(), "one letter a day") {
			t.Errorf("Rate %v: error %v; want it refused below one letter a day", rate, err)
		}
	}
	reg := breaker.NewRegistry(breaker.Config{})
	for _, opts := range [][]durable.BulkActionOption{{durable.ResetBreakerFirst(reg, "nowhere")}, {durable.ResetBreakerFirst(reg, "nowhere"), durable.DryRun()}} {
		_, err = e.q.StartBulkAction(ctx, durable.BulkActionSpec{Kind: record.BulkReplay}, "alice", opts...)
		if err == nil || !strings.Contains(err.Error(), `breaker "nowhere"`) || !errors.Is(err, breaker.ErrUnknown) {
			t.Errorf("%d options: error %v", len(opts), err)
		}
	}
	if list, _ := e.q.BulkActions(ctx, 0, 0); len(list) != 0 {
		t.Fatalf("stored %+v", list)
	}
	if _, err := e.q.BulkAction(ctx, 42); !errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("unknown action: %v", err)
	}
	if _, err := e.q.CancelBulkAction(ctx, 42, "alice", ""); !errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("cancel unknown action: %v", err)
	}
}

// Cancelling an action stops it: the letters it replayed stay replayed, no other is taken, and
// the cancel is audited; a second cancel changes nothing and says so.
func TestBulkActionCancel(t *testing.T) {
	ctx := context.Background()
	e := newBulkEnv(t, sqliteBackend(t), durable.Config{})
	e.capture(t, "orders", "bad", 20)
	first := make(chan struct{})
	var once sync.Once
	e.handle(func(context.Context, *Work) error {
		once.Do(func() { close(first) })
		return nil
	})
	s := start(t, e.q, e.m, durable.SchedulerConfig{})
	a, err := e.q.StartBulkAction(ctx, durable.BulkActionSpec{Kind: record.BulkReplay, Rate: 2}, "alice")
	if err != nil {
		t.Fatal(err)
	}
	<-first
	c, err := e.q.CancelBulkAction(ctx, a.ID, "bob", "wrong filter")
	if err != nil || c.State != record.BulkCancelled {
		t.Fatalf("cancel: %+v, %v", c, err)
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	a = must[durable.BulkAction](t)(e.q.BulkAction(ctx, a.ID))
	runs := 0
	for _, n := range e.ran() {
		runs += n
	}
	if a.State != record.BulkCancelled || int64(runs) != a.Totals.Replayed || runs >= 20 {
		t.Fatalf("after cancel: %+v, %d runs", a, runs)
	}
	again, err := e.q.CancelBulkAction(ctx, a.ID, "bob", "")
	if err != nil || again.State != record.BulkCancelled {
		t.Fatalf("second cancel: %+v, %v", again, err)
	}
	audit := must[[]record.AuditEntry](t)(e.q.Audit(ctx, durable.AuditFilter{TargetKind: record.AuditTargetBulkAction}))
	var got []string
	for _, en := range audit {
		got = append(got, fmt.Sprintf("%s %s %s %s", en.Actor, en.Action, en.Outcome, en.Detail))
	}
	want := "bob cancel_bulk_action no_change the action had already ended: cancelled|bob cancel_bulk_action done wrong filter|alice bulk_replay done"
	if j := strings.Join(got, "|"); !strings.HasPrefix(j, want) {
		t.Fatalf("audit:\n%s\nwant prefix\n%s", j, want)
	}
}

// With the endpoint failing again mid-run, the breaker opens and the run pauses on it: the
// letters after it stay failed, untouched (no replay counted, no timeline entry), instead of
// being replayed into a dead endpoint. Once the endpoint is back and the breaker lets probes
// through (never more at once than its free probe slots), the run goes on and every letter is
// settled.
func TestBulkReplayPausesOnBreaker(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		const threshold, n, inFlight = 3, 40, 4
		reg := breaker.NewRegistry(breaker.Config{FailureThreshold: threshold, OpenDuration: 300 * time.Millisecond, HalfOpenProbes: 1})
		e := newBulkEnv(t, b, durable.Config{}, func(m *mediator.Mediator) { m.Use(breaker.New(reg)) })
		ids := e.capture(t, "orders", "bad", n)
		if err := reg.Reset(reg.KeyOf(&Work{})); err != nil { // the capture's failures opened it
			t.Fatal(err)
		}
		var (
			down      atomic.Bool
			running   atomic.Int32
			maxProbes atomic.Int32
			replays   atomic.Int32
		)
		e.handle(func(context.Context, *Work) error {
			if a := reg.Admission(reg.KeyOf(&Work{})); a.State == breaker.StateHalfOpen {
				if r := running.Add(1); r > maxProbes.Load() {
					maxProbes.Store(r)
				}
				defer running.Add(-1)
			}
			if replays.Add(1) == 10 {
				down.Store(true) // the endpoint fails again
			}
			if down.Load() {
				return errors.New("endpoint down")
			}
			return nil
		})
		start(t, e.q, e.m, durable.SchedulerConfig{Breakers: reg})
		a, err := e.q.StartBulkAction(ctx, durable.BulkActionSpec{Kind: record.BulkReplay, Rate: 1000, MaxInFlight: inFlight}, "alice")
		if err != nil {
			t.Fatal(err)
		}
		// Paused, once the failures that opened the breaker are recorded.
		paused := e.waitAction(t, a.ID, "the action to pause on the breaker", func(a durable.BulkAction) bool {
			return a.State == record.BulkPausedOnBreaker && a.Totals.StillFailed >= threshold
		})
		if paused.WaitingKey == "" || !strings.Contains(paused.Error, "refuses calls") {
			t.Fatalf("paused action %+v", paused)
		}
		// While it is paused, the letters not reached are failed and untouched.
		untouched := 0
		for _, id := range ids {
			d, tl, _ := e.q.DeadLetter(ctx, id)
			if d.Status == record.DeadLetterFailed && d.RetryCount == 0 && len(tl) == 0 {
				untouched++
			}
		}
		stillFailed := paused.Totals.StillFailed
		if stillFailed < threshold || stillFailed > threshold+inFlight-1 || untouched < n-10-int(stillFailed)-inFlight {
			t.Fatalf("paused: %+v, %d untouched", paused, untouched)
		}
		down.Store(false) // the endpoint is back
		a = e.waitAction(t, a.ID, "the action to finish", finished)
		// Replays that were in flight when the breaker opened may fail after the pause was seen;
		// a probe that went out before the endpoint was back fails too.
		if a.State != record.BulkDone || a.Totals.Replayed+a.Totals.StillFailed != n || a.Totals.StillFailed > threshold+inFlight {
			t.Fatalf("action %+v (paused with %d still failed)", a, stillFailed)
		}
		if maxProbes.Load() > 1 {
			t.Fatalf("%d letters ran at once while the breaker was half-open, with one probe slot", maxProbes.Load())
		}
		for id, runs := range e.ran() {
			if runs != 1 {
				t.Fatalf("letter %d ran %d times", id, runs)
			}
		}
	})
}
