package durabletest_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/durabletest"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

var errDown = unavailable{}

type fixture struct {
	q     *durable.Queue
	clock *durabletest.ManualClock
	m     *mediator.Mediator
	calls atomic.Int64
	fail  atomic.Bool
}

// newFixture returns a queue with maxAttempts, guarded by the registry breakers makes with the
// fixture's clock, when given.
func newFixture(t *testing.T, maxAttempts int, breakers ...func(behaviors.Clock) *breaker.Registry) *fixture {
	f := &fixture{clock: durabletest.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))}
	cfg := durable.Config{
		Clock:  f.clock,
		Policy: retry.Policy{MaxAttempts: maxAttempts, BaseDelay: time.Second, Multiplier: 2, Jitter: behaviors.Off},
	}
	for _, b := range breakers {
		cfg.Breakers = b(f.clock)
	}
	f.q = durabletest.NewQueue(t, cfg)
	durable.Register[*SendInvoice](f.q, "billing.send-invoice")
	f.m = mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(f.m, func(ctx context.Context, r *SendInvoice) (mediator.Void, error) {
		f.calls.Add(1)
		if _, ok := durable.FromContext(ctx, r); !ok {
			t.Errorf("the dispatch of %s is not a durable one", r.Invoice)
		}
		if f.fail.Load() {
			return mediator.Void{}, errDown
		}
		return mediator.Void{}, nil
	})
	if err := f.m.Build(); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) enqueue(t *testing.T, invoice string) record.ItemID {
	t.Helper()
	res, err := f.q.Enqueue(context.Background(), &SendInvoice{Invoice: invoice})
	if err != nil {
		t.Fatal(err)
	}
	return res.ID
}

func TestWorkRunsEachDueItemOnce(t *testing.T) {
	f := newFixture(t, 3)
	ctx := context.Background()
	id := f.enqueue(t, "INV-1")
	if got := durabletest.Work(ctx, t, f.q, f.m); got != (durabletest.Result{Succeeded: 1}) {
		t.Fatalf("Work = %v", got)
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("handler ran %d times", n)
	}
	it, err := f.q.Item(ctx, id)
	if err != nil || it.State != record.StateSucceeded || it.Attempts != 1 {
		t.Fatalf("item %+v, %v", it, err)
	}
	as, err := f.q.Attempts(ctx, id)
	if err != nil || len(as) != 1 || as[0].Outcome != record.OutcomeSucceeded || as[0].Instance != "durabletest" {
		t.Fatalf("attempts %+v, %v", as, err)
	}
	// Nothing is due any more.
	if got := durabletest.Work(ctx, t, f.q, f.m); got != (durabletest.Result{}) || f.calls.Load() != 1 {
		t.Fatalf("second Work = %v, %d calls", got, f.calls.Load())
	}
}

func TestWorkRetriesThenDeadLetters(t *testing.T) {
	f := newFixture(t, 3)
	ctx := context.Background()
	f.fail.Store(true)
	id := f.enqueue(t, "INV-2")
	for i, delay := range []time.Duration{time.Second, 2 * time.Second} {
		if got := durabletest.Work(ctx, t, f.q, f.m); got != (durabletest.Result{Retried: 1}) {
			t.Fatalf("attempt %d: Work = %v", i+1, got)
		}
		it, _ := f.q.Item(ctx, id)
		if it.State != record.StatePending || !it.NextAt.Equal(f.clock.Now().Add(delay)) || it.LastError != errDown.Error() {
			t.Fatalf("after attempt %d: %+v", i+1, it)
		}
		// Not due before its backoff has passed.
		f.clock.Advance(delay - time.Millisecond)
		if got := durabletest.Work(ctx, t, f.q, f.m); got != (durabletest.Result{}) {
			t.Fatalf("before the backoff passed: %v", got)
		}
		f.clock.Advance(time.Millisecond)
	}
	if got := durabletest.Work(ctx, t, f.q, f.m); got != (durabletest.Result{Dead: 1}) {
		t.Fatalf("last attempt: Work = %v", got)
	}
	it, _ := f.q.Item(ctx, id)
	as, _ := f.q.Attempts(ctx, id)
	if it.State != record.StateDead || it.Attempts != 3 || len(as) != 3 || f.calls.Load() != 3 {
		t.Fatalf("dead letter %+v, %d rows, %d calls", it, len(as), f.calls.Load())
	}
}

func TestWorkHonoursAnOpenBreaker(t *testing.T) {
	var reg *breaker.Registry
	f := newFixture(t, 3, func(clock behaviors.Clock) *breaker.Registry {
		reg = breaker.NewRegistry(breaker.Config{Key: func(any) string { return "invoices" }, OpenDuration: 30 * time.Second, Clock: clock})
		return reg
	})
	ctx := context.Background()
	id := f.enqueue(t, "INV-3")
	if _, err := reg.Gate("invoices"); err != nil {
		t.Fatal(err)
	}
	if err := reg.Trip("invoices"); err != nil {
		t.Fatal(err)
	}
	if got := durabletest.Work(ctx, t, f.q, f.m); got != (durabletest.Result{Refused: 1}) || f.calls.Load() != 0 {
		t.Fatalf("Work = %v, %d calls", got, f.calls.Load())
	}
	it, _ := f.q.Item(ctx, id)
	// Due when the breaker may probe, spread over a tenth of the open time after it.
	if wait := it.NextAt.Sub(f.clock.Now()); it.State != record.StatePending || it.Attempts != 0 || it.ParkedKey != "invoices" ||
		wait < 30*time.Second || wait > 33*time.Second {
		t.Fatalf("refused item %+v", it)
	}
	f.clock.Advance(33 * time.Second)
	if got := durabletest.Work(ctx, t, f.q, f.m); got != (durabletest.Result{Succeeded: 1}) {
		t.Fatalf("after the breaker closed: %v", got)
	}
}

func TestRequireEnqueued(t *testing.T) {
	f := newFixture(t, 3)
	f.enqueue(t, "INV-1")
	f.enqueue(t, "INV-2")
	all := durabletest.RequireEnqueued[*SendInvoice](t, f.q)
	if len(all) != 2 || all[0].Invoice != "INV-1" || all[1].Invoice != "INV-2" {
		t.Fatalf("RequireEnqueued = %+v", all)
	}
	two := durabletest.RequireEnqueued(t, f.q, func(r *SendInvoice) bool { return r.Invoice == "INV-2" })
	if len(two) != 1 || two[0].Invoice != "INV-2" {
		t.Fatalf("with a predicate: %+v", two)
	}
	// Failing cases report through t.
	for name, c := range map[string]struct {
		run  func(tb testing.TB)
		want string
	}{
		"no match": {func(tb testing.TB) {
			durabletest.RequireEnqueued(tb, f.q, func(r *SendInvoice) bool { return r.Invoice == "INV-9" })
		}, "none of the 2 pending items"},
		"not registered": {func(tb testing.TB) { durabletest.RequireEnqueued[*struct{ mediator.Command }](tb, f.q) }, "is not registered"},
	} {
		rec := &recorder{TB: t}
		runFatal(rec, c.run)
		if !strings.Contains(rec.msg, c.want) {
			t.Errorf("%s: message %q, want %q", name, rec.msg, c.want)
		}
	}
	// Items that ran are no longer pending.
	durabletest.Work(context.Background(), t, f.q, f.m)
	rec := &recorder{TB: t}
	runFatal(rec, func(tb testing.TB) { durabletest.RequireEnqueued[*SendInvoice](tb, f.q) })
	if !strings.Contains(rec.msg, "no pending item") {
		t.Errorf("after Work: %q", rec.msg)
	}
}

// recorder captures a Fatalf instead of failing the test.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatal(args ...any) {
	r.msg = fmt.Sprint(args...)
	panic(r)
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	panic(r)
}

func runFatal(r *recorder, fn func(tb testing.TB)) {
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
	}()
	fn(r)
}
