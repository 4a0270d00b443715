package drivertest

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/driver"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// OpenFunc returns a driver of a fresh, empty database for one subtest. Exercise may open
// several queues with the driver it returns (as a fleet's instances share one database), and
// closes each; the database itself is the caller's to remove (t.Cleanup).
type OpenFunc func(t *testing.T) driver.Driver

// Exercise runs the conformance suite on the drivers open returns: every test as a parallel
// subtest of t, each on a database of its own. A driver passes when every subtest passes;
// the names of those it fails say which contract it breaks (docs/architecture.md, "Writing a
// driver").
func Exercise(t *testing.T, open OpenFunc) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, open)
		})
	}
}

// Tests returns the names of Exercise's subtests, in order.
func Tests() []string {
	names := make([]string, len(cases))
	for i, c := range cases {
		names[i] = c.name
	}
	return names
}

// testCase is one conformance test.
type testCase struct {
	name string
	run  func(t *testing.T, open OpenFunc)
}

// cases are the suite's tests, grouped as the Executor's interfaces are.
var cases = []testCase{
	{"Schema/MigrateThenSkipMigrations", testMigrate},
	{"Executor/ClaimLeaseFence", testClaimLeaseFence},
	{"Executor/DedupeAndToken", testExecutorDedupe},
	{"Executor/ClaimFairAndByPriority", testClaimFairness},
	{"Items/EnqueueDispatchSucceeds", testEnqueueDispatch},
	{"Items/RetryBackoffThenSuccess", testRetryBackoff},
	{"Items/MaxAttemptsDeadLetter", testMaxAttempts},
	{"Items/DedupeKeyAndToken", testDedupe},
	{"Items/DebounceKey", testDebounce},
	{"Items/OrderingKeyInOrder", testOrdering},
	{"Items/Stats", testStats},
	{"Executor/StatsLimit", testStatsLimit},
	{"Items/CancelAndRunNow", testCancelRunNow},
	{"Items/FleetSharesWork", testFleet},
	{"Controls/PauseHoldsResumeReleases", testPause},
	{"Controls/ConcurrencyLimit", testLimit},
	{"DeadLetters/ReplayAndDiscard", testDeadLetters},
	{"Schedules/AddRunNowRemove", testSchedules},
	{"Notifier/WakesAnotherInstance", testNotifier},
	{"FleetStores/BreakersAndRateLimits", testFleetStores},
	{"HistoryStore/MinutesMerged", testHistory},
}

// work is the request type of the suite.
type work struct {
	mediator.Command
	N int `json:"n"`
}

// workName is work's registered name.
const workName = "drivertest.work"

// retryable is an error the default classifier retries.
type retryable struct{ msg string }

func (e retryable) Error() string   { return e.msg }
func (e retryable) Retryable() bool { return true }

// policy retries quickly and without jitter, so that due times are exact.
var policy = retry.Policy{MaxAttempts: 4, Strategy: retry.Exponential, BaseDelay: time.Second, Multiplier: 2, MaxDelay: time.Minute, Jitter: behaviors.Off}

// clock is a behaviors.Clock that moves only when told to; its timers run in real time.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) After(d time.Duration) (<-chan time.Time, func() bool) {
	tm := time.NewTimer(d)
	return tm.C, tm.Stop
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// env is a queue of the suite with its clock.
type env struct {
	q     *durable.Queue
	clock *clock
}

// openQueue opens a queue on drv with cfg (the suite's policy, a fast poll, a test logger
// unless set), registers Work, and closes it at the end of the test.
func openQueue(t *testing.T, drv driver.Driver, cfg durable.Config) *durable.Queue {
	t.Helper()
	if reflect.ValueOf(cfg.Policy).IsZero() {
		cfg.Policy = policy
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 5 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = zaptest.NewLogger(t)
	}
	if cfg.Rand == nil {
		cfg.Rand = func() float64 { return 0.5 }
	}
	q, err := durable.Open(context.Background(), drv, cfg)
	if err != nil {
		t.Fatalf("durable.Open: %v", err)
	}
	t.Cleanup(func() { _ = q.Close() })
	if err := durable.Register[*work](q, workName); err != nil {
		t.Fatal(err)
	}
	return q
}

// newEnv opens a queue on a fresh database with a fake clock.
func newEnv(t *testing.T, open OpenFunc) *env {
	t.Helper()
	c := newClock()
	return &env{q: openQueue(t, open(t), durable.Config{Clock: c}), clock: c}
}

// sender returns a mediator whose Work handler is fn (nil: succeed).
func sender(t *testing.T, fn func(ctx context.Context, w *work) error) *mediator.Mediator {
	t.Helper()
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, w *work) (mediator.Void, error) {
		if fn == nil {
			return mediator.Void{}, nil
		}
		return mediator.Void{}, fn(ctx, w)
	})
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	return m
}

// start starts q's scheduler with s until the end of the test.
func start(t *testing.T, q *durable.Queue, s mediator.Sender) {
	t.Helper()
	if err := q.Start(s); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := q.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
}

// eventually polls cond until it holds, failing the test after bound: the state waited for
// lives in the database, where no channel can signal.
func eventually(t *testing.T, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", bound, what)
		}
		<-tick.C
	}
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func enqueue(t *testing.T, q *durable.Queue, n int, opts ...durable.EnqueueOption) durable.Enqueued {
	t.Helper()
	return must[durable.Enqueued](t)(q.Enqueue(context.Background(), &work{N: n}, opts...))
}

func item(t *testing.T, q *durable.Queue, id record.ItemID) record.Item {
	t.Helper()
	return must[record.Item](t)(q.Item(context.Background(), id))
}

func waitState(t *testing.T, q *durable.Queue, id record.ItemID, want record.ItemState) record.Item {
	t.Helper()
	var it record.Item
	eventually(t, 20*time.Second, fmt.Sprintf("item %d to be %s", id, want), func() bool {
		it = item(t, q, id)
		return it.State == want
	})
	return it
}

func outcomes(as []record.Attempt) string {
	s := ""
	for i, a := range as {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%d:%s", a.Number, a.Outcome)
	}
	return s
}
