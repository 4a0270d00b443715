package gate

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/budget"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable/internal/dbhealth"
	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/mediator"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

type fixedClock struct{ now time.Time }

func (c fixedClock) Now() time.Time { return c.now }
func (c fixedClock) After(d time.Duration) (<-chan time.Time, func() bool) {
	return make(chan time.Time), func() bool { return true }
}

// fakeStore answers the gate's calls: Acquire gives slots while free > 0.
type fakeStore struct {
	mu       sync.Mutex
	free     int
	acquired []string
	unparked []string
	reparked []string
	pauses   []store.PauseRow
	limits   []store.LimitRow
	down     error // what Acquire answers, when set
}

func (s *fakeStore) Unpark(_ context.Context, keys []string, _ time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unparked = append(s.unparked, keys...)
	return len(keys), nil
}

func (s *fakeStore) Repark(_ context.Context, key string, _ time.Time, _ time.Duration) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reparked = append(s.reparked, key)
	return 1, nil
}

func (s *fakeStore) Acquire(_ context.Context, key string, _ store.Fence, _ *store.HoldBack) (bool, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down != nil {
		return false, false, s.down
	}
	if s.free > 0 {
		s.free--
		s.acquired = append(s.acquired, key)
		return true, false, nil
	}
	return false, true, nil
}

func (s *fakeStore) WakeLimited(context.Context, string, time.Time) (int, error) { return 0, nil }
func (s *fakeStore) Pauses(context.Context, string) ([]store.PauseRow, error)    { return s.pauses, nil }
func (s *fakeStore) Limits(context.Context) ([]store.LimitRow, error)            { return s.limits, nil }

type work struct{ N int }

// newGate returns a gate over st whose breakers are reg (when not nil), guarding every item
// under key "api"; Rand is 0.5 (no spread below, a twentieth above), Recheck a minute,
// PollInterval a second.
func newGate(st *fakeStore, reg *breaker.Registry, b *budget.Budget, failOver bool) *Gate {
	cfg := Config{
		Store: st, Clock: fixedClock{t0}, Rand: func() float64 { return 0.5 }, Recheck: time.Minute, PollInterval: time.Second,
		StoreContext: func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
		Health:       &dbhealth.Health{Log: zap.NewNop()}, Logger: zap.NewNop(), Instance: "i",
		Wake: func() {}, NotifyDue: func() {},
	}
	if reg != nil {
		cfg.Breakers, cfg.Default = []*breaker.Registry{reg}, reg
	}
	if b != nil {
		cfg.Budget = func(string, any) (*budget.Budget, bool, bool) { return b, failOver, false }
	}
	return New(cfg)
}

func claimed(attempts int) *store.Claimed {
	return &store.Claimed{ItemRow: store.Item{ID: 7, Name: "w", Attempts: attempts, GuardKey: "api", LeaseOwner: "i", LastError: "before"}}
}

func completion(c *store.Claimed) store.Completion {
	return store.Completion{Fence: c.Fence(), EndedAt: t0, Name: c.Name, ParkedKey: c.ParkedKey}
}

// charged reports whether comp records an attempt (its claim is not undone).
func charged(comp store.Completion) bool { return comp.Outcome != "" }

// reachedThenRefused is the error of an in-process retry whose first attempt reached the
// handler and failed and whose last was refused (as retry.ExhaustedError says it).
type reachedThenRefused struct{ last error }

func (e reachedThenRefused) Error() string {
	return "retry: failed after 2 attempts: " + e.last.Error()
}
func (e reachedThenRefused) Unwrap() error        { return e.last }
func (e reachedThenRefused) HandlerReached() bool { return true }

// quota is a refusal of a user's own behavior with a Retry-After hint, and no wish to be retried
// in process (as a rate limit's refusal says).
type quota struct{ wait time.Duration }

func (q quota) Error() string { return "quota spent" }
func (q quota) Refusal() behaviors.RefusalInfo {
	return behaviors.RefusalInfo{By: "quota", Key: "tenant-1"}
}
func (q quota) RetryAfter() time.Duration    { return q.wait }
func (q quota) Retryable() bool              { return false }
func alwaysRetry(error) bool                 { return true }
func neverRetry(error) bool                  { return false }
func classifyNot(err error) func(error) bool { return func(e error) bool { return !errors.Is(e, err) } }

var errPermanent = errors.New("permanent")

var pol = retry.Policy{MaxAttempts: 3, Strategy: retry.Fixed, BaseDelay: time.Second, MaxDelay: time.Hour, Jitter: behaviors.Off}

// The rule after the handler, in one table: what is charged, what is retried when, what dies.
func TestJudgeTheRule(t *testing.T) {
	open := &breaker.OpenError{Key: "api", Remaining: 10 * time.Second}
	for _, c := range []struct {
		name     string
		attempts int
		err      error
		stopping bool
		retries  func(error) bool
		deadline time.Time

		state   store.State
		charged bool
		nextAt  time.Time
		parked  string
		expired bool
	}{
		{name: "success", attempts: 1, state: store.StateSucceeded, charged: true},
		{name: "a refusal before any handler: parked on the refuser until it may probe, uncharged", attempts: 1, err: open,
			retries: neverRetry, state: store.StatePending, charged: false, nextAt: t0.Add(10*time.Second + time.Second/2), parked: "api"},
		{name: "a user's refusal before any handler: uncharged, due at its hint", attempts: 1, err: quota{3 * time.Second},
			retries: neverRetry, state: store.StatePending, charged: false, nextAt: t0.Add(3*time.Second + 150*time.Millisecond)},
		{name: "a refusal after a failed attempt: charged, retried at the later of backoff and hint, never dead", attempts: 1,
			err: reachedThenRefused{quota{5 * time.Second}}, retries: neverRetry, state: store.StatePending, charged: true, nextAt: t0.Add(5 * time.Second)},
		{name: "a refusal after a failure with a shorter hint: the backoff", attempts: 1,
			err: reachedThenRefused{quota{time.Millisecond}}, retries: neverRetry, state: store.StatePending, charged: true, nextAt: t0.Add(time.Second)},
		{name: "a refusal after a failure on the last attempt: dead of MaxAttempts", attempts: 3,
			err: reachedThenRefused{quota{time.Second}}, retries: neverRetry, state: store.StateDead, charged: true},
		{name: "a retryable failure: retried after the backoff", attempts: 2, err: errors.New("503"), retries: alwaysRetry,
			state: store.StatePending, charged: true, nextAt: t0.Add(time.Second)},
		{name: "a permanent failure: dead at once", attempts: 1, err: errPermanent, retries: classifyNot(errPermanent),
			state: store.StateDead, charged: true},
		{name: "out of attempts: dead", attempts: 3, err: errors.New("503"), retries: alwaysRetry, state: store.StateDead, charged: true},
		{name: "a shutdown's cancellation: interrupted, due now", attempts: 1, err: context.Canceled, stopping: true,
			retries: alwaysRetry, state: store.StatePending, charged: true, nextAt: t0},
		{name: "a refusal during a shutdown is an interruption", attempts: 1, err: open, stopping: true, retries: alwaysRetry,
			state: store.StatePending, charged: true, nextAt: t0},
		{name: "a retryable failure past the deadline: dead of the deadline", attempts: 1, err: errors.New("503"), retries: alwaysRetry,
			deadline: t0, state: store.StateDead, charged: true, expired: true},
		{name: "a retry due past the deadline is due at the deadline", attempts: 1, err: errors.New("503"), retries: alwaysRetry,
			deadline: t0.Add(time.Millisecond), state: store.StatePending, charged: true, nextAt: t0.Add(time.Millisecond)},
		{name: "a failure that tripped the breaker waits on it", attempts: 1,
			err: &breaker.TrippedError{Key: "api", Remaining: 30 * time.Second, Err: errors.New("503")}, retries: alwaysRetry,
			state: store.StatePending, charged: true, nextAt: t0.Add(30 * time.Second), parked: "api"},
		{name: "no handler for it: uncharged, a Recheck later", attempts: 1, err: &mediator.NoHandlerError{Type: reflect.TypeFor[*work](), Kind: "request"},
			retries: alwaysRetry, state: store.StatePending, charged: false, nextAt: t0.Add(time.Minute)},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newGate(&fakeStore{}, nil, nil, false)
			cl := claimed(c.attempts)
			cl.Deadline = c.deadline
			tk := &Ticket{Context: context.Background()}
			got := g.Judge(cl, &work{}, tk, completion(cl), c.err, c.stopping, pol, c.retries)
			if got.State != c.state || charged(got) != c.charged || got.ParkedKey != c.parked || got.Expired != c.expired ||
				(got.State == store.StatePending && !got.NextAt.Equal(c.nextAt)) {
				t.Errorf("got state %s charged %v next %v parked %q expired %v (%q); want %s %v %v %q %v",
					got.State, charged(got), got.NextAt.Sub(t0), got.ParkedKey, got.Expired, got.Error, c.state, c.charged, c.nextAt.Sub(t0), c.parked, c.expired)
			}
			if c.err != nil && got.State != store.StateSucceeded && !strings.Contains(got.Error, c.err.Error()) {
				t.Errorf("error %q does not say %q", got.Error, c.err)
			}
		})
	}
}

// Retryable: a refusal anywhere in the chain is worth another try whatever the policy says;
// the rest is the policy's.
func TestRetryableRefusalAlways(t *testing.T) {
	wrapped := fmt.Errorf("handler: %w", reachedThenRefused{quota{time.Second}})
	if !Retryable(wrapped, neverRetry) {
		t.Error("a refusal met after a failure is not retryable")
	}
	if Retryable(errPermanent, neverRetry) || !Retryable(errPermanent, alwaysRetry) {
		t.Error("the policy's word on other errors is not kept")
	}
}

// Before the handler: a dead item's checks, then in order a pause, the breakers, the budget,
// the concurrency slot; each hold-back parks the item on its key, uncharged.
func TestAdmitHoldBacks(t *testing.T) {
	dispatch := func() context.Context { return context.Background() }
	t.Run("abandoned last attempt", func(t *testing.T) {
		g := newGate(&fakeStore{}, nil, nil, false)
		cl := claimed(4) // counted 4 > MaxAttempts 3
		got, ok := g.Check(cl, pol, completion(cl))
		if ok || got.State != store.StateDead || !strings.Contains(got.Error, "attempts exhausted (3); last error: before") {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		g := newGate(&fakeStore{}, nil, nil, false)
		cl := claimed(1)
		cl.Deadline = t0
		got, ok := g.Check(cl, pol, completion(cl))
		if ok || got.State != store.StateDead || !got.Expired || !strings.Contains(got.Error, "deadline passed") {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("pause of its key, before its breaker", func(t *testing.T) {
		reg := breaker.NewRegistry(breaker.Config{Clock: fixedClock{t0}})
		trip(t, reg, "api")
		g := newGate(&fakeStore{}, reg, nil, false)
		g.Pauses().Set("api", t0.Add(10*time.Second))
		cl := claimed(1)
		comp := completion(cl)
		_, got, ok := g.Admit(cl, &work{}, &comp, dispatch)
		if ok || !got.Paused || got.ParkedKey != "api" || charged(got) || !got.NextAt.Equal(t0.Add(10*time.Second)) {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("open breaker", func(t *testing.T) {
		reg := breaker.NewRegistry(breaker.Config{Clock: fixedClock{t0}, OpenDuration: 20 * time.Second})
		trip(t, reg, "api")
		g := newGate(&fakeStore{}, reg, nil, false)
		cl := claimed(1)
		comp := completion(cl)
		_, got, ok := g.Admit(cl, &work{}, &comp, dispatch)
		if ok || !got.Refused || got.ParkedKey != "api" || charged(got) || !got.NextAt.Equal(t0.Add(21*time.Second)) {
			t.Fatalf("%+v next %v", got, got.NextAt.Sub(t0))
		}
	})
	t.Run("open breaker asked after the clock moved past the claim", func(t *testing.T) {
		// Claimed at t0, opened then, asked a second later (a loaded worker): the item is due
		// no sooner than the breaker may probe, not a second before it.
		clock := &movingClock{now: t0}
		reg := breaker.NewRegistry(breaker.Config{Clock: clock, OpenDuration: 20 * time.Second})
		trip(t, reg, "api")
		g := newGate(&fakeStore{}, reg, nil, false)
		g.cfg.Clock = clock
		clock.now = t0.Add(time.Second)
		cl := claimed(1)
		comp := completion(cl) // ended (claimed) at t0
		_, got, ok := g.Admit(cl, &work{}, &comp, dispatch)
		if ok || !got.Refused || got.NextAt.Before(t0.Add(20*time.Second)) {
			t.Fatalf("due %v after the claim, before the breaker may probe (20s)", got.NextAt.Sub(t0))
		}
	})
	t.Run("budget over: parked, or dead when the registration says so", func(t *testing.T) {
		for _, failOver := range []bool{false, true} {
			b := budget.New(budget.Config{Ratio: 0.0001, Floor: budget.NoFloor, Clock: fixedClock{t0}})
			g := newGate(&fakeStore{}, nil, b, failOver)
			cl := claimed(2) // a re-dispatch: a retry the budget is asked for
			comp := completion(cl)
			_, got, ok := g.Admit(cl, &work{}, &comp, dispatch)
			if ok || charged(got) || (got.State == store.StateDead) != failOver {
				t.Fatalf("failOver %v: %+v", failOver, got)
			}
		}
	})
	t.Run("no free slot: held back, uncharged; a free one: taken and noted", func(t *testing.T) {
		st := &fakeStore{}
		g := newGate(st, nil, nil, false)
		g.Limits().Set("api", 1)
		cl := claimed(1)
		comp := completion(cl)
		_, got, ok := g.Admit(cl, &work{}, &comp, dispatch)
		if ok || !got.Limited || !got.Stored || got.ParkedKey != "api" || charged(got) {
			t.Fatalf("no slot: %+v", got)
		}
		st.free = 1
		comp = completion(cl)
		tk, _, ok := g.Admit(cl, &work{}, &comp, dispatch)
		if !ok || comp.Held != "api" {
			t.Fatalf("a free slot: ok %v held %q", ok, comp.Held)
		}
		tk.Release()
	})
}

// halfOpenGate returns a gate whose breaker of "api" is half-open with probes slots free.
func halfOpenGate(t *testing.T, probes int) *Gate {
	clock := &movingClock{now: t0}
	reg := breaker.NewRegistry(breaker.Config{Clock: clock, OpenDuration: time.Second, HalfOpenProbes: probes})
	trip(t, reg, "api")
	clock.now = t0.Add(2 * time.Second)
	g := newGate(&fakeStore{}, reg, nil, false)
	g.cfg.Clock = clock
	return g
}

// A half-open breaker lets through no more items than it has probe slots; a released probe
// lets the next through.
func TestAdmitHalfOpenProbeSlots(t *testing.T) {
	g := halfOpenGate(t, 1)
	dispatch := func() context.Context { return context.Background() }
	first, second := claimed(1), claimed(1)
	second.ID = 8
	c1, c2 := completion(first), completion(second)
	tk, _, ok := g.Admit(first, &work{}, &c1, dispatch)
	if !ok {
		t.Fatal("the probe was refused")
	}
	if _, got, ok := g.Admit(second, &work{}, &c2, dispatch); ok || !got.Verdict || got.ParkedKey != "api" {
		t.Fatalf("a second item got past the one probe slot: ok %v %+v", ok, got)
	}
	tk.Release()
	c2 = completion(second)
	tk2, _, ok := g.Admit(second, &work{}, &c2, dispatch)
	if !ok {
		t.Fatal("the released slot was not given to the next item")
	}
	tk2.Release()
}

type movingClock struct{ now time.Time }

func (c *movingClock) Now() time.Time { return c.now }
func (c *movingClock) After(time.Duration) (<-chan time.Time, func() bool) {
	return make(chan time.Time), func() bool { return true }
}

func TestCapAt(t *testing.T) {
	if got := CapAt(t0.Add(time.Hour), t0); !got.Equal(t0) {
		t.Error(got)
	}
	if got := CapAt(t0, time.Time{}); !got.Equal(t0) {
		t.Error(got)
	}
	if got := CapAt(t0, t0.Add(time.Hour)); !got.Equal(t0) {
		t.Error(got)
	}
}

// trip opens the breaker of key.
func trip(t *testing.T, reg *breaker.Registry, key string) {
	t.Helper()
	reg.Declare(key)
	if err := reg.Trip(key); err != nil {
		t.Fatal(err)
	}
}

// Two probe slots, two items through: when one ends, one more may go, not two (the gate counts
// the probes still out).
func TestAdmitGivesBackOneProbeSlotPerRelease(t *testing.T) {
	g := halfOpenGate(t, 2)
	dispatch := func() context.Context { return context.Background() }
	admit := func(id int) (Ticket, bool) {
		c := claimed(1)
		c.ID = store.ItemID(id)
		comp := completion(c)
		tk, _, ok := g.Admit(c, &work{}, &comp, dispatch)
		return tk, ok
	}
	a, okA := admit(1)
	b, okB := admit(2)
	if !okA || !okB {
		t.Fatalf("the two probe slots let through %v %v", okA, okB)
	}
	a.Release()
	c, okC := admit(3)
	if !okC {
		t.Fatal("the slot the first probe gave back was not given again")
	}
	if _, okD := admit(4); okD {
		t.Fatal("a fourth item got through while two probes are out")
	}
	b.Release()
	c.Release()
}

// An item parked on another key than its own guard's is held back by that key's breaker too.
func TestAdmitAsksTheKeyAnItemIsParkedOn(t *testing.T) {
	reg := breaker.NewRegistry(breaker.Config{Clock: fixedClock{t0}, OpenDuration: 20 * time.Second})
	trip(t, reg, "other")
	g := newGate(&fakeStore{}, reg, nil, false)
	dispatch := func() context.Context { return context.Background() }
	c := claimed(1)
	c.ParkedKey = "other" // parked by an inner breaker's refusal; its own guard ("api") is closed
	comp := completion(c)
	if _, got, ok := g.Admit(c, &work{}, &comp, dispatch); ok || got.ParkedKey != "other" || !got.Refused {
		t.Fatalf("an item parked on an open key was admitted: ok %v %+v", ok, got)
	}
	c = claimed(1)
	c.ParkedKey = "api"
	comp = completion(c)
	tk, _, ok := g.Admit(c, &work{}, &comp, dispatch)
	if !ok {
		t.Fatal("an item parked on its own closed key was held back")
	}
	tk.Release()
}

// An item whose counted attempts reached MaxAttempts may still run (its last attempt was not
// made); one past it (its last attempt abandoned) is dead.
func TestCheckDeadOnlyPastMaxAttempts(t *testing.T) {
	g := newGate(&fakeStore{}, nil, nil, false)
	pol := retry.Policy{MaxAttempts: 3}
	for attempts, dead := range map[int]bool{3: false, 4: true} {
		c := claimed(attempts)
		got, ok := g.Check(c, pol, completion(c))
		if ok == dead || (got.State == store.StateDead) != dead {
			t.Errorf("%d counted attempts of 3: ok %v, state %q; want dead %v", attempts, ok, got.State, dead)
		}
	}
}

// A concurrency slot the database could not give (it did not answer): the item is held back,
// uncharged, and asked about again a poll interval later, not at the recheck.
func TestLimitAskedAgainSoonWhenTheDatabaseDidNotAnswer(t *testing.T) {
	st := &fakeStore{down: errors.New("connection refused")}
	g := newGate(st, nil, nil, false)
	g.cfg.Rand = func() float64 { return 0.25 }
	g.Limits().Set("api", 1)
	c := claimed(1)
	comp := completion(c)
	_, got, ok := g.Admit(c, &work{}, &comp, func() context.Context { return context.Background() })
	// PollInterval 1 s times (0.5 + Rand 0.25).
	if ok || charged(got) || got.Stored || !got.NextAt.Equal(t0.Add(750*time.Millisecond)) {
		t.Fatalf("ok %v %+v; want held back, uncharged, due a poll interval later", ok, got)
	}
}

// The error of an item whose deadline passed gives the deadline to the second, as every time
// an operator reads: it printed nanoseconds ("2026-12-07T10:00:00.123456789Z").
func TestDeadlineErrorGivesTheSecond(t *testing.T) {
	deadline := time.Date(2026, 12, 7, 10, 0, 0, 123456789, time.FixedZone("CET", 3600))
	if got, want := DeadlineError(deadline, ""), "deadline passed (2026-12-07T09:00:00Z)"; got != want {
		t.Errorf("DeadlineError: %q, want %q", got, want)
	}
	if got, want := DeadlineError(deadline, "busy"), "deadline passed (2026-12-07T09:00:00Z); last error: busy"; got != want {
		t.Errorf("DeadlineError: %q, want %q", got, want)
	}
}
