package durable_test

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/switchboard-go/switchboard/behaviors/ratelimit"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// An item the rate limiter refuses is parked until the next permit with no attempt charged,
// and runs once the permit has come. The limiter's MaxWait of an hour does not hold the
// scheduler's worker: a stored dispatch never waits for its permit.
func TestRateLimitedItemParksUntilThePermit(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		var mu sync.Mutex
		var ran []int
		rl := ratelimit.New(ratelimit.Config{Rate: 1, MaxWait: time.Hour, Clock: e.clock, Key: func(any) string { return "api" }})
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			mu.Lock()
			ran = append(ran, w.N)
			mu.Unlock()
			return nil
		}}, func(m *mediator.Mediator) { m.Use(rl) })
		first := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: 1})).ID
		second := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: 2})).ID
		refusedAt := e.clock.Now()
		start(t, e.q, m, durable.SchedulerConfig{Workers: 1})
		waitState(t, e.q, first, record.StateSucceeded)
		eventually(t, 20*time.Second, "the refusal of the second", func() bool {
			return rl.Snapshot()[0].Refused > 0 && item(t, e.q, second).State == record.StatePending
		})
		it := item(t, e.q, second)
		// Parked until the permit a second later (and a twentieth of it, the queue's spread
		// with Rand 0.5), with no attempt.
		if it.State != record.StatePending || it.Attempts != 0 || len(attempts(t, e.q, second)) != 0 ||
			!it.NextAt.Equal(refusedAt.Add(time.Second+50*time.Millisecond)) {
			t.Fatalf("refused item: %+v, rows %s", it, outcomes(attempts(t, e.q, second)))
		}
		mu.Lock()
		if len(ran) != 1 {
			t.Fatalf("ran %v before the permit", ran)
		}
		mu.Unlock()
		e.clock.Advance(2 * time.Second)
		waitState(t, e.q, second, record.StateSucceeded)
		if as := attempts(t, e.q, second); outcomes(as) != "1:succeeded" {
			t.Fatalf("rows %s", outcomes(as))
		}
	})
}

// A backlog behind a rate limit parks each refused item until a slot of its own, one permit
// after the previous item's: the items come back about one a permit, and each is refused about
// once, instead of all of them coming back at the next permit and being refused again and again.
func TestRateLimitedBacklogComesBackOneAPermit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	synctest.Test(t, func(t *testing.T) {
		q := bubbleQueue(t, path, retry.Policy{})
		var refused atomic.Int64
		rl := ratelimit.New(ratelimit.Config{Rate: 20, Key: func(any) string { return "api" },
			OnRefused: []func(context.Context, ratelimit.RefusedEvent){func(context.Context, ratelimit.RefusedEvent) { refused.Add(1) }}})
		const n = 100
		var ran atomic.Int64
		done := make(chan struct{})
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			if ran.Add(1) == n {
				close(done)
			}
			return nil
		}}, func(m *mediator.Mediator) { m.Use(rl) })
		for i := range n {
			must[durable.Enqueued](t)(q.Enqueue(context.Background(), &Work{N: i}))
		}
		begin := time.Now()
		s := must[*durable.Scheduler](t)(durable.NewScheduler(q, m, durable.SchedulerConfig{Workers: 4, PollInterval: 50 * time.Millisecond,
			Logger: zaptest.NewLogger(t)}))
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		<-done
		took := time.Since(begin)
		if err := s.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		// 100 permits at 20 a second: about 5 s; each item refused about once (parked to its
		// slot), twice at most on average.
		t.Logf("%d items in %v, %d refusals", n, took, refused.Load())
		if r := refused.Load(); r > 2*n {
			t.Errorf("%d refusals for %d items", r, n)
		}
		if took < 4900*time.Millisecond || took > 7*time.Second {
			t.Errorf("the backlog took %v", took)
		}
	})
}

// An urgent item (a priority above the default) behind a rate-limited backlog runs within a
// few permits, not behind every slot the backlog was promised: its refusal parks it until the
// next permit (its dispatch is marked mediator.Urgent), and the claim, by priority, takes it
// before the routine item promised the same permit.
func TestRateLimitedUrgentItemGoesBeforeTheBacklog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	synctest.Test(t, func(t *testing.T) {
		q := bubbleQueue(t, path, retry.Policy{})
		rl := ratelimit.New(ratelimit.Config{Rate: 20, Key: func(any) string { return "api" }})
		const n = 100
		const urgent = -1
		var ran atomic.Int64
		ranAt := make(chan time.Time, 1)
		done := make(chan struct{})
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			if w.N == urgent {
				ranAt <- time.Now()
			}
			if ran.Add(1) == n+1 {
				close(done)
			}
			return nil
		}}, func(m *mediator.Mediator) { m.Use(rl) })
		for i := range n {
			must[durable.Enqueued](t)(q.Enqueue(context.Background(), &Work{N: i}))
		}
		// One worker: the claim takes one due item at a time, by priority, so the urgent item
		// is the one claimed at the permit it shares with a routine item. With several, both
		// are claimed together and their dispatches race for the permit (the race detector's
		// scheduling made the urgent one lose it up to a dozen times in a row, 650 ms).
		s := must[*durable.Scheduler](t)(durable.NewScheduler(q, m, durable.SchedulerConfig{Workers: 1, PollInterval: 50 * time.Millisecond,
			Logger: zaptest.NewLogger(t)}))
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		// A second on, the backlog has been refused and parked to its slots, some 4 s ahead;
		// just after a permit, so that the urgent item finds none.
		time.Sleep(time.Second + 10*time.Millisecond)
		enqueued := time.Now()
		must[durable.Enqueued](t)(q.Enqueue(context.Background(), &Work{N: urgent}, durable.WithPriority(9)))
		took := (<-ranAt).Sub(enqueued)
		<-done
		if err := s.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Logf("the urgent item ran %v after its enqueue", took)
		// Its next permit is at most an interval (50 ms) away, and it may lose that permit to
		// the routine item promised it, and the next: a few permits, with the poll and the
		// parking's spread, not the 4 s of the backlog.
		if took > 500*time.Millisecond {
			t.Errorf("the urgent item ran %v after its enqueue: it waited behind the backlog's slots", took)
		}
	})
}
