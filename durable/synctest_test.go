package durable_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable"
	istore "github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/mediator"
)

// These tests run the scheduler on SQLite inside a synctest bubble: SQLite is in-process, so
// the bubble's virtual clock drives poll intervals, heartbeats, sweeps, leases and backoff, and
// minutes of scheduler time pass in an instant, deterministically. (PostgreSQL's network I/O
// cannot run in a bubble; the conformance suite covers it with an injected clock instead.)

// bubbleQueue opens a store on a new SQLite file inside the current bubble.
func bubbleQueue(t *testing.T, path string, policy retry.Policy) *durable.Queue {
	t.Helper()
	q := openQueue(t, sqlite.Open(path), durable.Config{Policy: policy, Rand: func() float64 { return 0.5 }})
	return q
}

func bubbleScheduler(t *testing.T, q *durable.Queue, h handlers, cfg durable.SchedulerConfig) *durable.Scheduler {
	t.Helper()
	cfg.Logger = zaptest.NewLogger(t)
	s, err := durable.NewScheduler(q, mediatorFor(t, h), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBubbleBackoffTiming(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	synctest.Test(t, func(t *testing.T) {
		q := bubbleQueue(t, path, retry.Policy{MaxAttempts: 4, BaseDelay: 10 * time.Second, Multiplier: 3, Jitter: behaviors.Off})
		var (
			mu    sync.Mutex
			calls []time.Duration
		)
		begin := time.Now()
		done := make(chan struct{})
		s := bubbleScheduler(t, q, handlers{work: func(ctx context.Context, w *Work) error {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, time.Since(begin))
			if len(calls) < 3 {
				return retryableErr{"not yet"}
			}
			close(done)
			return nil
		}}, durable.SchedulerConfig{PollInterval: time.Second})
		id := must[durable.Enqueued](t)(q.Enqueue(context.Background(), &Work{N: 1})).ID
		s.Wake()
		<-done
		if err := s.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		// Due at 0, 10 s and 10 + 30 s; each claimed at the first poll at or after that.
		want := []time.Duration{0, 10 * time.Second, 40 * time.Second}
		for i, c := range calls {
			if c < want[i] || c > want[i]+time.Second {
				t.Errorf("call %d at %v, want %v (+ at most one poll)", i+1, c, want[i])
			}
		}
		if as := attempts(t, q, id); outcomes(as) != "1:failed 2:failed 3:succeeded" {
			t.Fatalf("rows %s", outcomes(as))
		}
	})
}

func TestBubbleHeartbeatsOutliveLease(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	synctest.Test(t, func(t *testing.T) {
		q := bubbleQueue(t, path, fastPolicy)
		q2 := bubbleQueue(t, path, fastPolicy)
		started := make(chan struct{})
		done := make(chan struct{})
		var finish sync.Once
		a := bubbleScheduler(t, q, handlers{work: func(ctx context.Context, w *Work) error {
			close(started)
			time.Sleep(5 * time.Minute) // ten leases long
			finish.Do(func() { close(done) })
			return nil
		}}, durable.SchedulerConfig{InstanceID: "a", Lease: 30 * time.Second})
		id := must[durable.Enqueued](t)(q.Enqueue(context.Background(), &Work{N: 1})).ID
		a.Wake()
		<-started
		// A second instance sweeps every second and would take the item if its lease lapsed.
		b := bubbleScheduler(t, q2, handlers{work: func(ctx context.Context, w *Work) error {
			t.Error("the item was taken from a live instance")
			finish.Do(func() { close(done) })
			return nil
		}}, durable.SchedulerConfig{InstanceID: "b", Lease: 30 * time.Second, SweepInterval: time.Second})
		<-done
		for _, s := range []*durable.Scheduler{a, b} {
			if err := s.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		as := attempts(t, q, id)
		if outcomes(as) != "1:succeeded" || as[0].Instance != "a" || as[0].EndedAt.Sub(as[0].StartedAt) != 5*time.Minute {
			t.Fatalf("rows %+v", as)
		}
	})
}

func TestBubbleDeadWorkerLeaseExpires(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := bubbleQueue(t, path, fastPolicy)
		id := must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: 1})).ID
		// A worker claims the item and is never heard of again.
		lease := 30 * time.Second
		dead := must[[]istore.Claimed](t)(durable.StoreOf(q).Claim(ctx, "dead", time.Now(), lease, 1))
		claimedAt := time.Now()
		ran := make(chan time.Duration, 1)
		s := bubbleScheduler(t, q, handlers{work: func(ctx context.Context, w *Work) error {
			ran <- time.Since(claimedAt)
			return nil
		}}, durable.SchedulerConfig{InstanceID: "live", Lease: lease, SweepInterval: 5 * time.Second, PollInterval: time.Second})
		after := <-ran
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		// Swept at the first sweep after the lease ran out, claimed at the next poll.
		if after <= lease || after > lease+5*time.Second+time.Second {
			t.Fatalf("reclaimed after %v, want just after the %v lease", after, lease)
		}
		res := must[[]error](t)(durable.StoreOf(q).Complete(ctx, []istore.Completion{{
			Fence: dead[0].Fence(), State: istore.StateSucceeded, Outcome: istore.OutcomeSucceeded,
			StartedAt: claimedAt, EndedAt: time.Now(),
		}}))
		if !errors.Is(res[0], istore.ErrLeaseLost) {
			t.Fatalf("late completion: %v", res[0])
		}
		if as := attempts(t, q, id); outcomes(as) != "1:abandoned 2:succeeded" || as[0].Instance != "dead" {
			t.Fatalf("rows %s", outcomes(as))
		}
	})
}

func TestBubbleShutdownDeadline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := bubbleQueue(t, path, fastPolicy)
		started := make(chan struct{})
		s := bubbleScheduler(t, q, handlers{work: func(ctx context.Context, w *Work) error {
			close(started)
			select {
			case <-ctx.Done(): // shutdown gave up waiting
				return ctx.Err()
			case <-time.After(time.Hour):
				return nil
			}
		}}, durable.SchedulerConfig{PollInterval: time.Second})
		id := must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: 1})).ID
		<-started
		begin := time.Now()
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := s.Shutdown(sctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("shutdown: %v", err)
		}
		if waited := time.Since(begin); waited != 10*time.Second {
			t.Fatalf("shutdown waited %v, want the 10s deadline", waited)
		}
		it := item(t, q, id)
		if it.State != record.StatePending || outcomes(attempts(t, q, id)) != "1:interrupted" {
			t.Fatalf("item %+v", it)
		}
	})
}

// A scheduler claims items only for free workers: every item it holds is running, so a crash
// of its process charges no item that had not started.
func TestBubbleClaimsOnlyForFreeWorkers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := bubbleQueue(t, path, fastPolicy)
		for n := range 6 {
			must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: n}))
		}
		release := make(chan struct{})
		s := bubbleScheduler(t, q, handlers{work: func(ctx context.Context, w *Work) error {
			<-release
			return nil
		}}, durable.SchedulerConfig{Workers: 2, BatchSize: 10, PollInterval: time.Second})
		time.Sleep(10 * time.Second) // many poll intervals
		synctest.Wait()
		if st := stats(t, q); st.Counts[record.StateRunning] != 2 || st.Counts[record.StatePending] != 4 {
			t.Fatalf("held %+v, want 2 running", st.Counts)
		}
		close(release)
		for stats(t, q).Counts[record.StateSucceeded] != 6 {
			time.Sleep(time.Second)
		}
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// A half-open breaker whose probe slot is taken refuses calls with no remaining open time; the
// items it refuses wait for the probe's verdict instead of spinning (or coming back on every
// poll), and make no attempt row.
func TestBubbleBusyProbeSlotDoesNotSpin(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := bubbleQueue(t, path, retry.Policy{MaxAttempts: 5, BaseDelay: time.Second, Jitter: behaviors.Off})
		reg := breaker.NewRegistry(breaker.Config{Key: func(any) string { return "k" }, FailureThreshold: 1, OpenDuration: time.Second, ProbeTimeout: time.Hour})
		release := make(chan struct{})
		var probeCalls, refusedTries atomic.Int64
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			if w.N == 0 {
				if probeCalls.Add(1) == 1 {
					return retryableErr{"down"} // trips the breaker
				}
				<-release // the probe hangs
			}
			return nil
		}}, func(m *mediator.Mediator) {
			m.Use(mediator.BehaviorFunc(func(ctx context.Context, req any, next mediator.Next) (any, error) {
				if w, ok := req.(*Work); ok && w.N == 1 {
					refusedTries.Add(1)
				}
				return next(ctx, req)
			}), mediator.WithOrder(behaviors.BreakerOrder-1))
			m.Use(breaker.New(reg))
		})
		s := must[*durable.Scheduler](t)(durable.NewScheduler(q, m, durable.SchedulerConfig{Workers: 2, PollInterval: time.Second,
			Logger: zaptest.NewLogger(t)}))
		probe := must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: 0})).ID
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		for probeCalls.Load() < 2 { // tripped, then half-open a second later: the probe runs
			time.Sleep(100 * time.Millisecond)
		}
		refused := must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: 1})).ID
		s.Wake()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		tries := refusedTries.Load()
		close(release)
		for item(t, q, refused).State != record.StateSucceeded || item(t, q, probe).State != record.StateSucceeded {
			time.Sleep(100 * time.Millisecond)
		}
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		// Refused once, then parked for the probe's verdict: not tried again on every poll.
		if tries != 1 {
			t.Fatalf("the refused item was tried %d times in 10s", tries)
		}
		if as := attempts(t, q, refused); outcomes(as) != "1:succeeded" {
			t.Fatalf("refused item rows %s", outcomes(as))
		}
		if as := attempts(t, q, probe); outcomes(as) != "1:failed 2:succeeded" {
			t.Fatalf("probe item rows %s", outcomes(as))
		}
	})
}

// With fast handlers every claiming round trip carries a whole batch: the outcomes of all the
// items that ran and claims for all their workers, not a part of them while the rest of the
// workers take turns with it.
func TestBubbleRoundTripsCarryWholeBatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := bubbleQueue(t, path, fastPolicy)
		const workers, items = 8, 64
		for n := range items {
			must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: n}))
		}
		var (
			mu     sync.Mutex
			sizes  []int
			ran    atomic.Int64
			allRan = make(chan struct{})
		)
		s := bubbleScheduler(t, q, handlers{work: func(ctx context.Context, w *Work) error {
			if ran.Add(1) == items {
				close(allRan)
			}
			return nil
		}}, durable.SchedulerConfig{Workers: workers, BatchSize: 100, PollInterval: time.Second,
			OnClaim: []func(time.Duration, int, error){func(_ time.Duration, n int, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err == nil && n > 0 {
					sizes = append(sizes, n)
				}
			}}})
		s.Wake()
		<-allRan
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(sizes) != items/workers || slices.ContainsFunc(sizes, func(n int) bool { return n != workers }) {
			t.Fatalf("claims of %v items, want %d claims of %d", sizes, items/workers, workers)
		}
		if st := stats(t, q); st.Counts[record.StateSucceeded] != items {
			t.Fatalf("counts %+v", st.Counts)
		}
	})
}

// A slow item does not hold back the others: the claim loop waits for the items it has just
// claimed, not for one that was already running.
func TestBubbleSlowItemDoesNotHoldBackBatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := bubbleQueue(t, path, fastPolicy)
		const fast = 60
		must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: -1}))
		for n := range fast {
			must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: n}))
		}
		var (
			ran     atomic.Int64
			allFast = make(chan struct{})
			release = make(chan struct{})
		)
		s := bubbleScheduler(t, q, handlers{work: func(ctx context.Context, w *Work) error {
			if w.N < 0 {
				<-release
				return nil
			}
			if ran.Add(1) == fast {
				close(allFast)
			}
			return nil
		}}, durable.SchedulerConfig{Workers: 4, BatchSize: 100, PollInterval: time.Second})
		begin := time.Now()
		s.Wake()
		<-allFast
		// Twenty round trips of three fast items each; waiting for the slow item before each
		// of them would have cost twenty waits.
		if took := time.Since(begin); took > time.Millisecond {
			t.Errorf("the fast items took %v beside a slow one, want at most a millisecond", took)
		}
		close(release)
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// The items a crash left to run alone run one after another, each as soon as the one before it
// has ended: not one per isolation check.
func TestBubbleItemsToRunAloneFollowEachOther(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := bubbleQueue(t, path, fastPolicy)
		const n = 4
		for i := range n {
			must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: i}))
		}
		st := durable.StoreOf(q)
		// A process that died holding them: claimed, never completed, swept once the lease ran out.
		if got := must[[]istore.Claimed](t)(st.Claim(ctx, "dead", time.Now(), time.Second, n)); len(got) != n {
			t.Fatalf("claimed %d", len(got))
		}
		time.Sleep(2 * time.Second)
		if swept := must[int](t)(st.Sweep(ctx, time.Now())); swept != n {
			t.Fatalf("swept %d", swept)
		}
		var (
			ran  atomic.Int64
			done = make(chan struct{})
		)
		begin := time.Now()
		s := bubbleScheduler(t, q, handlers{work: func(ctx context.Context, w *Work) error {
			if ran.Add(1) == n {
				close(done)
			}
			return nil
		}}, durable.SchedulerConfig{Workers: 4, PollInterval: 10 * time.Millisecond})
		<-done
		if took := time.Since(begin); took > 100*time.Millisecond {
			t.Errorf("%d items to run alone took %v, want each right after the one before", n, took)
		}
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		for _, it := range must[[]record.Item](t)(q.List(ctx, durable.Filter{})) {
			if it.State != record.StateSucceeded {
				t.Errorf("item %d %s", it.ID, it.State)
			}
		}
	})
}
