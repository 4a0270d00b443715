package durable_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable"
	istore "github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

func TestEnqueueDispatchSucceeds(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		var got sync.Map
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			d, ok := durable.FromContext(ctx, w)
			if !ok {
				return errors.New("no dispatch info on the context")
			}
			got.Store(w.N, d)
			return nil
		}})
		var ids []record.ItemID
		for n := range 3 {
			res := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: n}))
			ids = append(ids, res.ID)
		}
		s := start(t, e.q, m, durable.SchedulerConfig{InstanceID: "a"})
		for n, id := range ids {
			it := waitState(t, e.q, id, record.StateSucceeded)
			if it.Attempts != 1 || it.LeaseOwner != "" {
				t.Errorf("item %d: attempts %d, lease owner %q", id, it.Attempts, it.LeaseOwner)
			}
			as := attempts(t, e.q, id)
			if len(as) != 1 || as[0].Outcome != record.OutcomeSucceeded || as[0].Instance != s.InstanceID() || as[0].Number != 1 {
				t.Errorf("item %d attempts: %+v", id, as)
			}
			d, _ := got.Load(n)
			if d.(durable.Dispatch).ItemID != id || d.(durable.Dispatch).Attempt != 1 || d.(durable.Dispatch).Name != "test.work" {
				t.Errorf("dispatch info %+v for item %d", d, id)
			}
		}
	})
}

func TestRetryBackoffThenSuccess(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			if d, _ := durable.FromContext(ctx, w); d.Attempt <= 2 {
				return retryableErr{fmt.Sprintf("attempt %d failed", d.Attempt)}
			}
			return nil
		}})
		id := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: 1})).ID
		start(t, e.q, m, durable.SchedulerConfig{})
		t0 := e.clock.Now()
		eventually(t, 20*time.Second, "first failure", func() bool {
			return item(t, e.q, id).Attempts == 1 && item(t, e.q, id).State == record.StatePending
		})
		if it := item(t, e.q, id); !it.NextAt.Equal(t0.Add(time.Second)) || it.LastError != "attempt 1 failed" {
			t.Fatalf("after attempt 1: next %v (want %v), last error %q", it.NextAt, t0.Add(time.Second), it.LastError)
		}
		e.clock.Advance(time.Second)
		eventually(t, 20*time.Second, "second failure", func() bool {
			return item(t, e.q, id).Attempts == 2 && item(t, e.q, id).State == record.StatePending
		})
		if it := item(t, e.q, id); !it.NextAt.Equal(t0.Add(3 * time.Second)) {
			t.Fatalf("after attempt 2: next %v, want %v", it.NextAt, t0.Add(3*time.Second))
		}
		e.clock.Advance(2 * time.Second)
		it := waitState(t, e.q, id, record.StateSucceeded)
		as := attempts(t, e.q, id)
		if it.Attempts != 3 || outcomes(as) != "1:failed 2:failed 3:succeeded" {
			t.Fatalf("attempts %d, rows %s", it.Attempts, outcomes(as))
		}
		if as[0].Error != "attempt 1 failed" || as[2].Error != "" {
			t.Errorf("attempt errors: %q, %q", as[0].Error, as[2].Error)
		}
	})
}

func TestMaxAttemptsDeadLetter(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error { return retryableErr{"down"} }})
		id := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: 1})).ID
		start(t, e.q, m, durable.SchedulerConfig{})
		for n := 1; n < fastPolicy.MaxAttempts; n++ {
			eventually(t, 20*time.Second, fmt.Sprintf("attempt %d", n), func() bool {
				it := item(t, e.q, id)
				return it.Attempts == n && it.State == record.StatePending
			})
			e.clock.Advance(time.Hour)
		}
		it := waitState(t, e.q, id, record.StateDead)
		as := attempts(t, e.q, id)
		if it.Attempts != 5 || len(as) != 5 || it.LastError != "down" || string(it.Payload) != `{"n":1}` {
			t.Fatalf("dead item: %+v, %d attempt rows", it, len(as))
		}
	})
}

func TestNonRetryableDeadLetter(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error { return errPermanent }})
		id := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: 1})).ID
		start(t, e.q, m, durable.SchedulerConfig{})
		it := waitState(t, e.q, id, record.StateDead)
		if as := attempts(t, e.q, id); it.Attempts != 1 || outcomes(as) != "1:failed" || as[0].Error != errPermanent.Error() {
			t.Fatalf("item %+v attempts %s", it, outcomes(as))
		}
	})
}

// An undecodable payload is a dead letter without an attempt; an item of a name this instance
// does not know waits (no attempt) for an instance that knows it, as during a rolling deploy:
// it used to be dead-lettered at once. The scheduler carries on with the other items.
func TestUnknownWaitsUndecodableDeadLetterSchedulerContinues(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		lines := &logRecorder{}
		ctx := context.Background()
		now := e.clock.Now()
		unknown, _, err := e.store.Enqueue(ctx, istore.NewItem{Name: "test.renamed", Payload: []byte(`{}`), NextAt: now, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		broken, _, err := e.store.Enqueue(ctx, istore.NewItem{Name: "test.work", Payload: []byte(`{"n":"not a number"}`), NextAt: now, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		good := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 1})).ID
		first := start(t, e.q, mediatorFor(t, handlers{}), durable.SchedulerConfig{Workers: 1, BatchSize: 1, Logger: lines.logger()})
		waitState(t, e.q, good, record.StateSucceeded)
		eventually(t, 20*time.Second, "the unknown item to be put off", func() bool { return item(t, e.q, record.ItemID(unknown)).LastError != "" })
		u := item(t, e.q, record.ItemID(unknown))
		if u.State != record.StatePending || u.LastError != `durable: unknown request name "test.renamed"` || u.Attempts != 0 ||
			len(attempts(t, e.q, record.ItemID(unknown))) != 0 || !u.NextAt.Equal(now.Add(time.Minute)) {
			t.Errorf("unknown: %+v", u)
		}
		if !lines.has("durable: request name not registered in this instance; its items wait for an instance that knows it") {
			t.Errorf("no warning about the unknown name:\n%s", lines.dump(0, now))
		}
		// An instance that knows the name runs it (this one stops, so it does not take it first).
		if err := first.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		q2 := b.queue(t, durable.Config{Policy: fastPolicy, Clock: e.clock})
		durable.Register[*Outer](q2, "test.renamed")
		m2 := mediatorFor(t, handlers{}, func(m *mediator.Mediator) {
			mediator.HandleFunc(m, func(context.Context, *Outer) (mediator.Void, error) { return void, nil })
		})
		e.clock.Advance(time.Minute)
		start(t, q2, m2, durable.SchedulerConfig{Workers: 1})
		waitState(t, e.q, record.ItemID(unknown), record.StateSucceeded)
		d := waitState(t, e.q, record.ItemID(broken), record.StateDead)
		if d.Attempts != 0 || len(attempts(t, e.q, record.ItemID(broken))) != 0 || d.LastError == "" {
			t.Errorf("undecodable: %+v", d)
		}
		// The scheduler keeps going after both.
		later := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 2})).ID
		waitState(t, e.q, later, record.StateSucceeded)
	})
}

func TestOpenBreakerMakesNoAttempt(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		var calls atomic.Int64
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error { calls.Add(1); return nil }})
		br := breaker.NewRegistry(breaker.Config{OpenDuration: 10 * time.Second, Clock: e.clock,
			Key: func(req any) string { return fmt.Sprintf("endpoint-%d", req.(*Work).N) }})
		if _, err := br.Gate("endpoint-1"); err != nil {
			t.Fatal(err)
		}
		if err := br.Trip("endpoint-1"); err != nil {
			t.Fatal(err)
		}
		id := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: 1})).ID
		t0 := e.clock.Now()
		start(t, e.q, m, durable.SchedulerConfig{Breakers: br})
		eventually(t, 20*time.Second, "the breaker to be consulted", func() bool {
			it := item(t, e.q, id)
			return it.ParkedKey == "endpoint-1" && it.State == record.StatePending && it.NextAt.Equal(t0.Add(probeDue(10*time.Second)))
		})
		if it, as := item(t, e.q, id), attempts(t, e.q, id); it.Attempts != 0 || len(as) != 0 || calls.Load() != 0 {
			t.Fatalf("open breaker: attempts %d, rows %d, handler calls %d", it.Attempts, len(as), calls.Load())
		}
		e.clock.Advance(probeDue(10 * time.Second)) // the breaker may probe, and the item is due
		it := waitState(t, e.q, id, record.StateSucceeded)
		if as := attempts(t, e.q, id); it.Attempts != 1 || outcomes(as) != "1:succeeded" {
			t.Fatalf("after the breaker closed: attempts %d, rows %s", it.Attempts, outcomes(as))
		}
	})
}

// The breaker of the pipeline refuses the dispatch (it opened between the scheduler's check
// and the call, or the scheduler has no breaker view): the handler did not run, so there is no
// attempt, and the item waits on that breaker.
func TestCircuitOpenDuringDispatchIsNoAttempt(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		var calls atomic.Int64
		reg := breaker.NewRegistry(breaker.Config{Key: func(any) string { return "x" }, OpenDuration: 7 * time.Second, Clock: e.clock})
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			calls.Add(1)
			return nil
		}}, func(m *mediator.Mediator) {
			m.Use(breaker.New(reg))
		})
		if _, err := reg.Gate("x"); err != nil {
			t.Fatal(err)
		}
		if err := reg.Trip("x"); err != nil {
			t.Fatal(err)
		}
		id := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: 1})).ID
		t0 := e.clock.Now()
		start(t, e.q, m, durable.SchedulerConfig{})
		eventually(t, 20*time.Second, "the refused dispatch", func() bool { return item(t, e.q, id).ParkedKey == "x" })
		if it := item(t, e.q, id); it.Attempts != 0 || it.State != record.StatePending || !it.NextAt.Equal(t0.Add(probeDue(7*time.Second))) ||
			len(attempts(t, e.q, id)) != 0 || calls.Load() != 0 {
			t.Fatalf("after circuit open: %+v", it)
		}
		e.clock.Advance(probeDue(7 * time.Second))
		waitState(t, e.q, id, record.StateSucceeded)
		if as := attempts(t, e.q, id); outcomes(as) != "1:succeeded" {
			t.Fatalf("rows %s", outcomes(as))
		}
	})
}

func TestDedupeKey(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		first := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Unique{ID: "a"}))
		second := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Unique{ID: "a"}))
		other := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Unique{ID: "b"}))
		viaOption := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 9}, durable.WithDedupeKey("unique:a")))
		if first.Duplicate || !second.Duplicate || second.ID != first.ID || other.Duplicate || other.ID == first.ID || !viaOption.Duplicate || viaOption.ID != first.ID {
			t.Fatalf("first %+v second %+v other %+v option %+v", first, second, other, viaOption)
		}
		start(t, e.q, mediatorFor(t, handlers{}))
		waitState(t, e.q, first.ID, record.StateSucceeded)
		// Once the first is done, the key is free again.
		third := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Unique{ID: "a"}))
		if third.Duplicate || third.ID == first.ID {
			t.Fatalf("after completion: %+v", third)
		}
		waitState(t, e.q, third.ID, record.StateSucceeded)
		if st := stats(t, e.q); st.Counts[record.StateSucceeded] != 3 {
			t.Fatalf("stats %+v", st)
		}
	})
}

func TestOrderingKeyInOrderOneAtATime(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		var (
			mu      sync.Mutex
			seen    = map[string][]int{}
			running = map[string]int{}
			overlap atomic.Bool
			failed  atomic.Bool
		)
		m := mediatorFor(t, handlers{keyed: func(ctx context.Context, k *Keyed) error {
			mu.Lock()
			running[k.Key]++
			if running[k.Key] > 1 {
				overlap.Store(true)
			}
			mu.Unlock()
			defer func() {
				mu.Lock()
				running[k.Key]--
				mu.Unlock()
			}()
			// The head of key "a" fails once: everything behind it must wait for its retry.
			if k.Key == "a" && k.Seq == 0 && failed.CompareAndSwap(false, true) {
				return retryableErr{"first try of a/0"}
			}
			mu.Lock()
			seen[k.Key] = append(seen[k.Key], k.Seq)
			mu.Unlock()
			return nil
		}})
		const perKey = 15
		var last record.ItemID
		for i := range perKey {
			for _, key := range []string{"a", "b", "c"} {
				last = must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Keyed{Key: key, Seq: i})).ID
			}
		}
		free := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 1})).ID
		start(t, e.q, m, durable.SchedulerConfig{Workers: 8, BatchSize: 10})
		waitState(t, e.q, free, record.StateSucceeded)
		eventually(t, 20*time.Second, "a/0 to fail once", func() bool { return failed.Load() })
		mu.Lock()
		if len(seen["a"]) != 0 {
			t.Errorf("items behind a failed head ran: %v", seen["a"])
		}
		mu.Unlock()
		e.clock.Advance(time.Second)
		waitState(t, e.q, last, record.StateSucceeded)
		eventually(t, 20*time.Second, "every keyed item", func() bool { return stats(t, e.q).Counts[record.StateSucceeded] == 3*perKey+1 })
		mu.Lock()
		defer mu.Unlock()
		want := make([]int, perKey)
		for i := range want {
			want[i] = i
		}
		for _, key := range []string{"a", "b", "c"} {
			if !slices.Equal(seen[key], want) {
				t.Errorf("key %s order %v", key, seen[key])
			}
		}
		if overlap.Load() {
			t.Error("two items of one key ran at once")
		}
	})
}

func TestFenceRejectsLateCompletion(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		id := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 1})).ID
		lease := 30 * time.Second
		claimedA := must[[]istore.Claimed](t)(e.store.Claim(ctx, "worker-a", e.clock.Now(), lease, 10))
		if len(claimedA) != 1 || claimedA[0].Attempts != 1 || claimedA[0].LeaseOwner != "worker-a" {
			t.Fatalf("claim: %+v", claimedA)
		}
		// Nothing else is due while it is leased.
		if again := must[[]istore.Claimed](t)(e.store.Claim(ctx, "worker-b", e.clock.Now(), lease, 10)); len(again) != 0 {
			t.Fatalf("claimed twice: %+v", again)
		}
		// Before expiry the sweep leaves it alone.
		e.clock.Advance(lease - time.Second)
		if n := must[int](t)(e.store.Sweep(ctx, e.clock.Now())); n != 0 {
			t.Fatalf("swept %d before expiry", n)
		}
		e.clock.Advance(2 * time.Second)
		if n := must[int](t)(e.store.Sweep(ctx, e.clock.Now())); n != 1 {
			t.Fatalf("swept %d, want 1", n)
		}
		// Its lease ran out while it ran: it is claimed alone from now on.
		if again := must[[]istore.Claimed](t)(e.store.Claim(ctx, "worker-b", e.clock.Now(), lease, 10)); len(again) != 0 {
			t.Fatalf("an item whose lease ran out was claimed with others: %+v", again)
		}
		claimedB := must[[]istore.Claimed](t)(e.store.ClaimIsolated(ctx, "worker-b", e.clock.Now(), lease))
		if len(claimedB) != 1 || claimedB[0].Attempts != 2 || !claimedB[0].Isolate {
			t.Fatalf("reclaim: %+v", claimedB)
		}
		now := e.clock.Now()
		late := istore.Completion{Fence: claimedA[0].Fence(), State: istore.StateSucceeded, Outcome: istore.OutcomeSucceeded, StartedAt: now, EndedAt: now}
		on := istore.Completion{Fence: claimedB[0].Fence(), State: istore.StateSucceeded, Outcome: istore.OutcomeSucceeded, StartedAt: now, EndedAt: now}
		results := must[[]error](t)(e.store.Complete(ctx, []istore.Completion{late, on}))
		var lost *istore.LeaseLostError
		if !errors.Is(results[0], istore.ErrLeaseLost) || !errors.As(results[0], &lost) || lost.Fence.Owner != "worker-a" || results[1] != nil {
			t.Fatalf("results %v", results)
		}
		it := item(t, e.q, id)
		as := attempts(t, e.q, id)
		if it.State != record.StateSucceeded || it.Attempts != 2 || outcomes(as) != "1:abandoned 2:succeeded" || as[0].Instance != "worker-a" || as[1].Instance != "worker-b" {
			t.Fatalf("item %+v, rows %s", it, outcomes(as))
		}
		// A second completion of the same lease is rejected too.
		results = must[[]error](t)(e.store.Complete(ctx, []istore.Completion{on}))
		if !errors.Is(results[0], istore.ErrLeaseLost) {
			t.Fatalf("double completion: %v", results)
		}
	})
}

func TestHeartbeatKeepsLongItemLeased(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		release := make(chan struct{})
		started := make(chan struct{})
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			close(started)
			select {
			case <-release:
				return nil
			case <-ctx.Done(): // the test failed and is shutting the scheduler down
				return ctx.Err()
			}
		}})
		id := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: 1})).ID
		lease := time.Minute
		start(t, e.q, m, durable.SchedulerConfig{Lease: lease, HeartbeatInterval: 5 * time.Millisecond, SweepInterval: time.Hour})
		<-started
		first := item(t, e.q, id).LeaseUntil
		e.clock.Advance(45 * time.Second)
		eventually(t, 20*time.Second, "a heartbeat", func() bool { return item(t, e.q, id).LeaseUntil.After(first) })
		e.clock.Advance(45 * time.Second) // past the first lease, within the extended one
		if n := must[int](t)(e.store.Sweep(context.Background(), e.clock.Now())); n != 0 {
			t.Fatalf("a heartbeated item was swept")
		}
		close(release)
		waitState(t, e.q, id, record.StateSucceeded)
		if as := attempts(t, e.q, id); outcomes(as) != "1:succeeded" {
			t.Fatalf("rows %s", outcomes(as))
		}
	})
}

func TestShutdownInterruptsAndReleases(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		started := make(chan struct{}, 1)
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			started <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		}})
		var ids []record.ItemID
		for n := range 5 {
			ids = append(ids, must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: n})).ID)
		}
		s := must[*durable.Scheduler](t)(durable.NewScheduler(e.q, m, durable.SchedulerConfig{Workers: 1, BatchSize: 5, PollInterval: 5 * time.Millisecond}))
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		<-started
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // no patience at all: the running item is interrupted at once
		if err := s.Shutdown(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("shutdown: %v", err)
		}
		var interrupted, untouched int
		for _, id := range ids {
			it := item(t, e.q, id)
			if it.State != record.StatePending || it.LeaseOwner != "" {
				t.Fatalf("item %d after shutdown: %+v", id, it)
			}
			switch as := attempts(t, e.q, id); outcomes(as) {
			case "1:interrupted":
				interrupted++
			case "":
				if it.Attempts != 0 {
					t.Errorf("released item %d counts %d attempts", id, it.Attempts)
				}
				untouched++
			default:
				t.Errorf("item %d rows %s", id, outcomes(as))
			}
		}
		if interrupted != 1 || untouched != 4 {
			t.Fatalf("interrupted %d, released %d", interrupted, untouched)
		}
		if err := s.Start(); !errors.Is(err, durable.ErrStopped) {
			t.Fatalf("restart: %v", err)
		}
	})
}

func TestShutdownWaitsForRunningItems(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		started := make(chan struct{})
		release := make(chan struct{})
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			close(started)
			select {
			case <-release:
				return nil
			case <-ctx.Done(): // the test failed and is shutting the scheduler down
				return ctx.Err()
			}
		}})
		id := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: 1})).ID
		s := must[*durable.Scheduler](t)(durable.NewScheduler(e.q, m, durable.SchedulerConfig{PollInterval: 5 * time.Millisecond}))
		before := goleak.IgnoreCurrent()
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		<-started
		done := make(chan error)
		go func() { done <- s.Shutdown(context.Background()) }()
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		// Every goroutine the scheduler started has ended.
		goleak.VerifyNone(t, before)
		if it := item(t, e.q, id); it.State != record.StateSucceeded {
			t.Fatalf("item %+v", it)
		}
	})
}

func TestStats(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		st := stats(t, e.q)
		if st.OldestDue != 0 || st.Counts[record.StatePending] != 0 || len(st.Counts) != 5 {
			t.Fatalf("empty stats %+v", st)
		}
		must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 1}))
		e.clock.Advance(time.Minute)
		must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 2}))
		must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 3}, durable.WithDelay(time.Hour)))
		e.clock.Advance(30 * time.Second)
		st = stats(t, e.q)
		if st.Counts[record.StatePending] != 3 || st.OldestDue != 90*time.Second {
			t.Fatalf("stats %+v", st)
		}
		must[[]istore.Claimed](t)(e.store.Claim(ctx, "x", e.clock.Now(), time.Minute, 1))
		st = stats(t, e.q)
		if st.Counts[record.StatePending] != 2 || st.Counts[record.StateRunning] != 1 || st.OldestDue != 30*time.Second {
			t.Fatalf("stats after a claim %+v", st)
		}
	})
}

func TestDeferral(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		var failWith atomic.Pointer[error]
		failWith.Store(new(error))
		var calls atomic.Int64
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			calls.Add(1)
			if err := *failWith.Load(); err != nil {
				return err
			}
			return nil
		}}, func(m *mediator.Mediator) { m.Use(durable.NewDeferral(e.q, durable.DeferralConfig{})) })

		if _, err := mediator.Send(ctx, m, &Work{N: 1}); err != nil {
			t.Fatalf("success: %v", err)
		}
		failWith.Store(ptr(error(errPermanent)))
		if _, err := mediator.Send(ctx, m, &Work{N: 2}); !errors.Is(err, errPermanent) {
			t.Fatalf("non-retryable: %v", err)
		}
		failWith.Store(ptr(error(retryableErr{"busy"})))
		t0 := e.clock.Now()
		_, err := mediator.Send(ctx, m, &Work{N: 3})
		var deferred *durable.DeferredError
		if !errors.Is(err, durable.ErrDeferred) || !errors.As(err, &deferred) || deferred.Duplicate || deferred.Cause.Error() != "busy" {
			t.Fatalf("retryable: %v", err)
		}
		it := item(t, e.q, deferred.ItemID)
		if it.State != record.StatePending || !it.NextAt.Equal(t0.Add(time.Second)) || it.LastError != "busy" || it.Attempts != 0 || string(it.Payload) != `{"n":3}` {
			t.Fatalf("deferred item %+v", it)
		}
		failWith.Store(ptr(error(&breaker.OpenError{Key: "k", Remaining: 42 * time.Second})))
		_, err = mediator.Send(ctx, m, &Work{N: 4})
		if !errors.As(err, &deferred) {
			t.Fatalf("circuit open: %v", err)
		}
		if it := item(t, e.q, deferred.ItemID); !it.NextAt.Equal(t0.Add(probeDue(42 * time.Second))) {
			t.Fatalf("circuit-open item due %v", it.NextAt)
		}
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		failWith.Store(ptr(error(context.Canceled)))
		if _, err := mediator.Send(cancelled, m, &Work{N: 5}); !errors.Is(err, context.Canceled) || errors.Is(err, durable.ErrDeferred) {
			t.Fatalf("caller cancellation: %v", err)
		}
		// The scheduler's dispatches are never deferred again: a retryable failure is an attempt.
		failWith.Store(ptr(error(retryableErr{"still busy"})))
		total := func() int64 {
			var n int64
			for _, c := range stats(t, e.q).Counts {
				n += c
			}
			return n
		}
		before := total()
		e.clock.Advance(time.Minute)
		start(t, e.q, m)
		eventually(t, 20*time.Second, "scheduler attempts", func() bool { return item(t, e.q, deferred.ItemID).Attempts == 1 })
		if after := total(); after != before {
			t.Fatalf("items %d -> %d: a scheduled dispatch was deferred again", before, after)
		}
		failWith.Store(ptr(error(nil)))
		e.clock.Advance(time.Hour)
		waitState(t, e.q, deferred.ItemID, record.StateSucceeded)
	})
}

func TestDeferralDedupe(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		m := mediator.New(nil, mediator.Config{})
		mediator.HandleFunc(m, func(ctx context.Context, u *Unique) (mediator.Void, error) {
			return mediator.Void{}, retryableErr{"later"}
		})
		m.Use(durable.NewDeferral(e.q, durable.DeferralConfig{}))
		if err := m.Build(); err != nil {
			t.Fatal(err)
		}
		var d1, d2 *durable.DeferredError
		_, err1 := mediator.Send(context.Background(), m, &Unique{ID: "x"})
		_, err2 := mediator.Send(context.Background(), m, &Unique{ID: "x"})
		if !errors.As(err1, &d1) || !errors.As(err2, &d2) || d1.Duplicate || !d2.Duplicate || d1.ItemID != d2.ItemID {
			t.Fatalf("%v / %v", err1, err2)
		}
		chain := must[mediator.Chain](t)(mediator.Explain[*Unique](m))
		if chain[0].Name != "durable-deferral" || chain[0].Order != behaviors.DeferralOrder {
			t.Fatalf("chain %s", chain)
		}
	})
}

func TestSchedulerDispatchIsOneAttempt(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		var calls atomic.Int64
		var marked atomic.Bool
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			calls.Add(1)
			marked.Store(mediator.MarksOf(ctx, w).Has(mediator.SingleAttempt | mediator.Unattended | mediator.Stored))
			return retryableErr{"fails"}
		}}, func(m *mediator.Mediator) {
			m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 4, BaseDelay: time.Nanosecond}}))
		})
		id := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: 1})).ID
		start(t, e.q, m)
		eventually(t, 20*time.Second, "the first attempt", func() bool {
			return item(t, e.q, id).Attempts == 1 && item(t, e.q, id).State == record.StatePending
		})
		if calls.Load() != 1 || !marked.Load() {
			t.Fatalf("one scheduler dispatch made %d handler calls (marked %v)", calls.Load(), marked.Load())
		}
		// Outside the scheduler the same pipeline retries in process.
		calls.Store(0)
		_, _ = mediator.Send(context.Background(), m, &Work{N: 2})
		if calls.Load() != 4 {
			t.Fatalf("in-process retry made %d calls, want 4", calls.Load())
		}
	})
}

func ptr[T any](v T) *T { return &v }

// probeDue is when an item parked on a breaker that may probe in remaining is due, with the
// tests' Rand of 0.5: the parked items are spread over a tenth of the remaining time after it.
func probeDue(remaining time.Duration) time.Duration { return remaining + remaining/20 }

func TestTrippedBreakerRegistryMakesNoAttempt(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		reg := breaker.NewRegistry(breaker.Config{OpenDuration: 30 * time.Second})
		var calls atomic.Int64
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error { calls.Add(1); return nil }},
			func(m *mediator.Mediator) { m.Use(breaker.New(reg)) })
		key := behaviors.TypeKey(reflect.TypeFor[*Work]())
		if err := reg.Trip(key); err != nil {
			t.Fatal(err)
		}
		id := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: 1})).ID
		t0 := e.clock.Now()
		start(t, e.q, m, durable.SchedulerConfig{Breakers: reg})
		eventually(t, 20*time.Second, "the item to be put off", func() bool { return item(t, e.q, id).NextAt.After(t0) })
		it := item(t, e.q, id)
		if it.State != record.StatePending || it.Attempts != 0 || len(attempts(t, e.q, id)) != 0 || calls.Load() != 0 {
			t.Fatalf("with the breaker open: %+v, handler calls %d", it, calls.Load())
		}
		if wait := it.NextAt.Sub(t0); wait <= probeDue(29*time.Second) || wait > probeDue(30*time.Second) {
			t.Fatalf("put off by %s, want the breaker's remaining open time", wait)
		}
		if err := reg.Reset(key); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(30 * time.Second)
		waitState(t, e.q, id, record.StateSucceeded)
		if as := attempts(t, e.q, id); outcomes(as) != "1:succeeded" || calls.Load() != 1 {
			t.Fatalf("rows %s, calls %d", outcomes(as), calls.Load())
		}
	})
}

func TestConcurrentDedupeInsertsOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		q2 := b.queue(t, durable.Config{Clock: e.clock})
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			ids   = map[record.ItemID]int{}
			fresh atomic.Int64
		)
		for i := range 16 {
			wg.Go(func() {
				q := e.q
				if i%2 == 1 {
					q = q2
				}
				res, err := q.Enqueue(context.Background(), &Unique{ID: "same"})
				if err != nil {
					t.Error(err)
					return
				}
				if !res.Duplicate {
					fresh.Add(1)
				}
				mu.Lock()
				ids[res.ID]++
				mu.Unlock()
			})
		}
		wg.Wait()
		if fresh.Load() != 1 || len(ids) != 1 {
			t.Fatalf("%d inserts, ids %v", fresh.Load(), ids)
		}
	})
}

// The durable policy is the retry behavior's, with durable defaults (1 s doubling up to 1 h)
// and the one delay formula: never negative, never above MaxDelay, for any attempt number.
func TestPolicyDelay(t *testing.T) {
	off, on := behaviors.Off, behaviors.On
	cases := []struct {
		p    retry.Policy
		n    int
		r    float64
		want time.Duration
	}{
		{retry.Policy{Jitter: off}, 1, 0.5, time.Second},
		{retry.Policy{Jitter: off}, 0, 0.5, time.Second},
		{retry.Policy{Jitter: off}, 4, 0.5, 8 * time.Second},
		{retry.Policy{Jitter: off}, 13, 0.5, time.Hour},
		{retry.Policy{Jitter: off}, 1 << 62, 0.5, time.Hour},
		{retry.Policy{Jitter: off, Multiplier: 1e308}, 3, 0.5, time.Hour},
		{retry.Policy{Jitter: off, Multiplier: 0.5}, 5, 0.5, time.Second},                               // invalid (Validate), no growth
		{retry.Policy{Jitter: off, BaseDelay: time.Minute, MaxDelay: time.Second}, 1, 0.5, time.Second}, // MaxDelay caps
		{retry.Policy{Jitter: off, MaxDelay: time.Duration(1<<63 - 1)}, 1 << 40, 0.5, time.Duration(1<<63 - 1)},
		{retry.Policy{Jitter: on, MaxDelay: time.Duration(1<<63 - 1)}, 1 << 40, 0.999, time.Duration(1<<63 - 1)},
		{retry.Policy{Jitter: on}, 1, 0, 900 * time.Millisecond},
		{retry.Policy{}, 1, 2, time.Second}, // out-of-range r means no spread
	}
	for _, c := range cases {
		if got := durable.DurablePolicy(c.p).Delay(c.n, c.r); got != c.want {
			t.Errorf("%+v.Delay(%d, %v) = %v, want %v", c.p, c.n, c.r, got, c.want)
		}
	}
	// Jittered delays stay within ±10 % of the base.
	p := durable.DurablePolicy(retry.Policy{BaseDelay: 10 * time.Second})
	for i := range 1000 {
		r := float64(i) / 1000
		if d := p.Delay(1, r); d < 9*time.Second || d > 11*time.Second {
			t.Fatalf("Delay(1, %v) = %v", r, d)
		}
	}
}

func TestRegistry(t *testing.T) {
	r := sqliteBackend(t).bare(t, durable.Config{})
	if err := registerErr(t, func() error { return durable.Register[*Work](r, "w") }); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"same name":   registerErr(t, func() error { return durable.Register[*Keyed](r, "w") }),
		"same type":   registerErr(t, func() error { return durable.Register[*Work](r, "w2") }),
		"not pointer": registerErr(t, func() error { return durable.Register[Work](r, "w3") }),
		"empty name":  registerErr(t, func() error { return durable.Register[*Unique](r, "") }),
	} {
		if err == nil {
			t.Errorf("%s: registered", name)
		}
	}
	name, payload, err := durable.EncodeFor(r, &Work{N: 3})
	if err != nil || name != "w" || string(payload) != `{"n":3}` {
		t.Fatalf("encode: %q %s %v", name, payload, err)
	}
	v, err := durable.DecodeFor(r, "w", payload)
	if err != nil || v.(*Work).N != 3 {
		t.Fatalf("decode: %v %v", v, err)
	}
	if _, _, err := durable.EncodeFor(r, &Keyed{}); !errors.Is(err, durable.ErrUnknownRequest) {
		t.Fatalf("unregistered encode: %v", err)
	}
	if _, err := durable.DecodeFor(r, "nope", nil); !errors.Is(err, durable.ErrUnknownRequest) {
		t.Fatalf("unknown decode: %v", err)
	}
	// A field this version does not know (written by a newer one) is ignored.
	if v, err := durable.DecodeFor(r, "w", []byte(`{"n":1,"gone":true}`)); err != nil || v.(*Work).N != 1 {
		t.Fatalf("unknown field: %v %v", v, err)
	}
	if _, err := durable.DecodeFor(r, "w", []byte(`{"n":"one"}`)); !errors.Is(err, durable.ErrDecode) || !strings.Contains(err.Error(), `"w"`) {
		t.Fatalf("wrong type: %v", err)
	}
}

func TestEnqueueTxFollowsTheTransaction(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		tx, err := e.store.DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		rolledBack := must[durable.Enqueued](t)(e.q.EnqueueTx(ctx, tx, &Work{N: 1}))
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if _, err := e.q.Item(ctx, rolledBack.ID); !errors.Is(err, durable.ErrNotFound) {
			t.Fatalf("rolled-back item: %v", err)
		}
		tx, err = e.store.DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		committed := must[durable.Enqueued](t)(e.q.EnqueueTx(ctx, tx, &Work{N: 2}))
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if it := item(t, e.q, committed.ID); it.State != record.StatePending || string(it.Payload) != `{"n":2}` {
			t.Fatalf("committed item %+v", it)
		}
	})
}

// A worker that stalled past its lease, then the same instance took the item again (alone, as
// an item whose lease ran out): the stale worker's rejected completion must not make the
// instance forget the new claim, whose lease the heartbeats must keep extending.
func TestStaleWorkerDoesNotEndNewClaimOfSameInstance(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		var calls atomic.Int64
		staleStarted, staleRelease := make(chan struct{}), make(chan struct{})
		newStarted, newRelease := make(chan struct{}), make(chan struct{})
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			switch calls.Add(1) {
			case 1:
				close(staleStarted)
				<-staleRelease // stalls, ignoring its context
				return nil
			case 2:
				close(newStarted)
				select {
				case <-newRelease:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return errors.New("dispatched a third time")
		}})
		rejected := &logRecorder{}
		rejectedLogged := rejected.next("durable: completion rejected", 0)
		id := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 1})).ID
		lease := time.Minute
		start(t, e.q, m, durable.SchedulerConfig{InstanceID: "a", Workers: 2, Lease: lease,
			HeartbeatInterval: 5 * time.Millisecond, SweepInterval: time.Hour, Logger: rejected.logger()})
		var once sync.Once
		unblock := func() { once.Do(func() { close(newRelease) }) }
		t.Cleanup(unblock) // before the scheduler's shutdown if the test fails
		<-staleStarted
		// The lease is found expired (as after heartbeats that could not reach the database),
		// and the same instance claims the item again. A sweep skips a row a heartbeat has
		// locked at that moment (FOR UPDATE SKIP LOCKED, on PostgreSQL), as the next sweep
		// pass would then take it: sweep until it is swept, and never more than once.
		swept := 0
		eventually(t, 10*time.Second, "the sweep of the stalled item's lease", func() bool {
			swept += must[int](t)(e.store.Sweep(ctx, e.clock.Now().Add(time.Hour)))
			return swept > 0
		})
		if swept != 1 {
			t.Fatalf("swept %d", swept)
		}
		e.clock.Advance(time.Hour)
		// The item runs alone next: the instance claims it once the stale dispatch is done.
		close(staleRelease)
		<-rejectedLogged
		<-newStarted
		// The new claim is still in flight: its lease keeps being extended.
		e.clock.Advance(45 * time.Second)
		want := e.clock.Now().Add(lease)
		eventually(t, 10*time.Second, "a heartbeat of the new claim", func() bool {
			return !item(t, e.q, id).LeaseUntil.Before(want)
		})
		unblock()
		it := waitState(t, e.q, id, record.StateSucceeded)
		if as := attempts(t, e.q, id); it.Attempts != 2 || outcomes(as) != "1:abandoned 2:succeeded" || calls.Load() != 2 {
			t.Fatalf("item %+v rows %s calls %d", it, outcomes(as), calls.Load())
		}
	})
}

type Fragile struct {
	mediator.Command
	V string `json:"v"`
}

// panickyCodec is a codec whose decoder panics on a payload it does not expect, as some
// generated or hand-written decoders do.
type panickyCodec struct{}

func (panickyCodec) Marshal(v any) ([]byte, error) { return durable.JSONCodec{}.Marshal(v) }
func (panickyCodec) Unmarshal(data []byte, v any) error {
	if string(data) == "corrupt" {
		var m map[string]int
		m["boom"]++ // nil map write
	}
	return durable.JSONCodec{}.Unmarshal(data, v)
}

// A codec that panics on a corrupt payload dead-letters that item like any undecodable one; the
// scheduler keeps going.
func TestPanickingCodecDeadLettersItem(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		q := b.queue(t, durable.Config{Policy: fastPolicy, Clock: e.clock})
		durable.Register[*Fragile](q, "test.fragile", durable.WithCodec(panickyCodec{}))
		now := e.clock.Now()
		bad, _, err := e.store.Enqueue(ctx, istore.NewItem{Name: "test.fragile", Payload: []byte("corrupt"), NextAt: now, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		m := mediatorFor(t, handlers{}, func(m *mediator.Mediator) {
			mediator.HandleFunc(m, func(ctx context.Context, f *Fragile) (mediator.Void, error) { return mediator.Void{}, nil })
		})
		start(t, q, m, durable.SchedulerConfig{Workers: 1, BatchSize: 1})
		it := waitState(t, e.q, record.ItemID(bad), record.StateDead)
		if it.Attempts != 0 || len(attempts(t, e.q, record.ItemID(bad))) != 0 || it.LastError == "" {
			t.Fatalf("item %+v", it)
		}
		if _, err := durable.DecodeFor(q, "test.fragile", []byte("corrupt")); !errors.Is(err, durable.ErrDecode) {
			t.Fatalf("decode: %v", err)
		}
		good := must[durable.Enqueued](t)(q.Enqueue(ctx, &Fragile{V: "ok"})).ID
		waitState(t, e.q, good, record.StateSucceeded)
	})
}

// A store call that blocks (here the completion waits for a row or write lock another session
// holds, as it would behind a stuck database) must not keep Shutdown from returning long after
// its deadline: the completion is given up and the item's lease runs out instead.
func TestShutdownDoesNotHangOnBlockedStore(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		started, finish := make(chan struct{}), make(chan struct{})
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			close(started)
			<-finish
			return nil
		}})
		id := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 1})).ID
		s := must[*durable.Scheduler](t)(durable.NewScheduler(e.q, m, durable.SchedulerConfig{
			PollInterval: 5 * time.Millisecond, ShutdownGrace: 50 * time.Millisecond,
			Logger: zaptest.NewLogger(t),
		}))
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		<-started
		// Another session locks the item (PostgreSQL) or the database (SQLite).
		blocker := b.open(t)
		tx, err := blocker.DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		unlock := sync.OnceFunc(func() { _ = tx.Rollback() })
		t.Cleanup(unlock)
		q := "UPDATE switchboard_items SET updated_at = updated_at WHERE id = ?"
		if b.name == "postgres" {
			q = "SELECT id FROM switchboard_items WHERE id = $1 FOR UPDATE"
		}
		if _, err := tx.ExecContext(ctx, q, int64(id)); err != nil {
			t.Fatal(err)
		}
		close(finish) // the handler returns; its completion now waits for the lock
		sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- s.Shutdown(sctx) }()
		timer := time.NewTimer(5 * time.Second)
		defer timer.Stop()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("shutdown: %v", err)
			}
		case <-timer.C:
			unlock()
			<-done
			t.Fatal("Shutdown was still waiting for a blocked store call 5s after its deadline")
		}
		unlock()
		// The completion was abandoned: the item is still leased and will be swept, unless the
		// cancelled statement got through just before its cancellation did.
		if it := item(t, e.q, id); it.State != record.StateRunning && it.State != record.StateSucceeded {
			t.Fatalf("item %+v", it)
		}
	})
}

// An attempt interrupted by a shutdown is not a failure: it does not use up the item's
// attempts, so an item interrupted on its last allowed attempt is tried again, not
// dead-lettered unattempted.
func TestInterruptedLastAttemptIsTriedAgain(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		q := b.queue(t, durable.Config{Policy: retry.Policy{MaxAttempts: 2, Jitter: behaviors.Off}, Clock: e.clock})
		var calls atomic.Int64
		started := make(chan struct{}, 1)
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			switch calls.Add(1) {
			case 1:
				return retryableErr{"first try failed"}
			case 2:
				started <- struct{}{}
				<-ctx.Done() // the deploy's shutdown
				return ctx.Err()
			}
			return nil
		}})
		id := must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: 1})).ID
		s := must[*durable.Scheduler](t)(durable.NewScheduler(q, m, durable.SchedulerConfig{PollInterval: 5 * time.Millisecond}))
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, "the first failure", func() bool {
			it := item(t, e.q, id)
			return it.Attempts == 1 && it.State == record.StatePending
		})
		e.clock.Advance(time.Hour)
		<-started
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		if err := s.Shutdown(cancelled); !errors.Is(err, context.Canceled) {
			t.Fatalf("shutdown: %v", err)
		}
		start(t, q, m)
		it := waitState(t, e.q, id, record.StateSucceeded)
		if as := attempts(t, e.q, id); it.Attempts != 3 || outcomes(as) != "1:failed 2:interrupted 3:succeeded" || calls.Load() != 3 {
			t.Fatalf("item %+v rows %s calls %d", it, outcomes(as), calls.Load())
		}
	})
}

// A breaker key function that panics for some request (a type assertion written for one request
// type) must not crash the scheduler: the item is dispatched without the breaker check.
func TestPanickingBreakerKeyDoesNotStopScheduler(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		br := breaker.NewRegistry(breaker.Config{Key: func(req any) string {
			return fmt.Sprintf("endpoint-%d", req.(*Work).N) // panics for *Keyed
		}})
		keyed := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Keyed{Key: "k"})).ID
		work := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 1})).ID
		start(t, e.q, mediatorFor(t, handlers{}), durable.SchedulerConfig{Breakers: br})
		waitState(t, e.q, work, record.StateSucceeded)
		if it := waitState(t, e.q, keyed, record.StateSucceeded); it.Attempts != 1 {
			t.Fatalf("item %+v", it)
		}
	})
}

// A handler that, once its context is cancelled by a shutdown, returns an error of its own (not
// wrapping the context's) was interrupted, not failed: the item must not be dead-lettered or
// backed off because of a deploy.
func TestShutdownInterruptionWithHandlersOwnError(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		started := make(chan struct{}, 1)
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			started <- struct{}{}
			<-ctx.Done()
			return errors.New("upload aborted") // not retryable, does not wrap ctx.Err()
		}})
		id := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: 1})).ID
		s := must[*durable.Scheduler](t)(durable.NewScheduler(e.q, m, durable.SchedulerConfig{PollInterval: 5 * time.Millisecond}))
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		<-started
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := s.Shutdown(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("shutdown: %v", err)
		}
		it := item(t, e.q, id)
		if as := attempts(t, e.q, id); it.State != record.StatePending || !it.NextAt.Equal(e.clock.Now()) || outcomes(as) != "1:interrupted" {
			t.Fatalf("item %+v rows %s", it, outcomes(as))
		}
	})
}

// A caller that has gone away (its context cancelled) is not given a deferral, even when the
// handler's last error is a retryable one of its own rather than the context's: the caller
// abandoned the request, so nothing is persisted to run it later. The error is the handler's,
// still the caller's cancellation too, and says why it was not deferred.
func TestDeferralNeverDefersForGoneCaller(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		ctx, cancel := context.WithCancel(context.Background())
		m := mediatorFor(t, handlers{work: func(hctx context.Context, w *Work) error {
			cancel() // the caller gives up while the call is in flight
			return retryableErr{"upstream 503"}
		}}, func(m *mediator.Mediator) { m.Use(durable.NewDeferral(e.q, durable.DeferralConfig{})) })
		_, err := mediator.Send(ctx, m, &Work{N: 1})
		if errors.Is(err, durable.ErrDeferred) || !errors.As(err, new(retryableErr)) || !mediator.IsCallerCancellation(ctx, err) ||
			err.Error() != "upstream 503 (not deferred: the caller cancelled it before its in-process attempts ended)" {
			t.Fatalf("send: %v", err)
		}
		if st := stats(t, e.q); st.Counts[record.StatePending] != 0 {
			t.Fatalf("persisted for a caller that gave up: %+v", st.Counts)
		}
	})
}

// A heartbeat interval that is not shorter than the lease lets every long item's lease run out
// between heartbeats, so another instance runs it again while it still runs: refused up front.
func TestNewSchedulerRejectsHeartbeatNotUnderLease(t *testing.T) {
	e := newEnv(t, sqliteBackend(t))
	m := mediatorFor(t, handlers{})
	for _, cfg := range []durable.SchedulerConfig{
		{Lease: time.Second, HeartbeatInterval: time.Second},
		{Lease: time.Second, HeartbeatInterval: time.Minute},
		{HeartbeatInterval: time.Minute}, // default lease 30 s
	} {
		if _, err := durable.NewScheduler(e.q, m, cfg); err == nil {
			t.Errorf("lease %v, heartbeat %v: accepted", cfg.Lease, cfg.HeartbeatInterval)
		}
	}
	if _, err := durable.NewScheduler(e.q, m, durable.SchedulerConfig{Lease: time.Second, HeartbeatInterval: 500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
}

// TestStatsCountsALargeStateInFullEveryFewSeconds: a state with more items than the exact
// count's limit (a letter status with more letters) is counted in full, and that count is
// kept, with its age, until the refresh interval has passed; a state under the limit is
// counted by every call.
func TestStatsCountsALargeStateInFullEveryFewSeconds(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		durable.SetCountLimit(e.q, 3)
		letter := func() {
			must[istore.DeadLetterID](t)(e.store.InsertDeadLetter(ctx, istore.NewDeadLetter{Source: "batch", Name: "test.work", Payload: []byte(`{}`), Error: "boom", Now: e.clock.Now()}))
		}
		for i := range 5 {
			must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: i}))
			letter()
		}
		st := stats(t, e.q)
		if st.Counts[record.StatePending] != 5 || len(st.CountAge) != 1 || st.CountAge[record.StatePending] != 0 {
			t.Fatalf("5 pending over a limit of 3: %v aged %v, want 5 counted now", st.Counts, st.CountAge)
		}
		if st.DeadLetters[record.DeadLetterFailed] != 5 || len(st.LetterCountAge) != 1 || st.LetterCountAge[record.DeadLetterFailed] != 0 {
			t.Fatalf("5 failed letters over a limit of 3: %v aged %v, want 5 counted now", st.DeadLetters, st.LetterCountAge)
		}
		must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 5}))
		letter()
		must[[]istore.Claimed](t)(e.store.Claim(ctx, "x", e.clock.Now(), time.Minute, 2))
		e.clock.Advance(4 * time.Second)
		st = stats(t, e.q)
		if st.Counts[record.StatePending] != 5 || st.CountAge[record.StatePending] != 4*time.Second {
			t.Errorf("4 s later: pending %d aged %v, want the count kept (5), 4 s old", st.Counts[record.StatePending], st.CountAge[record.StatePending])
		}
		if st.Counts[record.StateRunning] != 2 {
			t.Errorf("running %d, want 2: a state under the limit is counted by every call", st.Counts[record.StateRunning])
		}
		if st.DeadLetters[record.DeadLetterFailed] != 5 || st.LetterCountAge[record.DeadLetterFailed] != 4*time.Second {
			t.Errorf("4 s later: failed letters %d aged %v, want the count kept (5), 4 s old", st.DeadLetters[record.DeadLetterFailed], st.LetterCountAge[record.DeadLetterFailed])
		}
		e.clock.Advance(10 * time.Second)
		st = stats(t, e.q)
		if st.Counts[record.StatePending] != 4 || st.CountAge[record.StatePending] != 0 {
			t.Errorf("14 s after the first count: pending %d aged %v, want 4 counted now", st.Counts[record.StatePending], st.CountAge[record.StatePending])
		}
		if st.DeadLetters[record.DeadLetterFailed] != 6 || st.LetterCountAge[record.DeadLetterFailed] != 0 {
			t.Errorf("14 s after the first count: failed letters %d aged %v, want 6 counted now", st.DeadLetters[record.DeadLetterFailed], st.LetterCountAge[record.DeadLetterFailed])
		}
		durable.SetCountLimit(e.q, 10)
		if st = stats(t, e.q); st.Counts[record.StatePending] != 4 || st.CountAge != nil || st.DeadLetters[record.DeadLetterFailed] != 6 || st.LetterCountAge != nil {
			t.Errorf("under the limit: pending %d aged %v, letters %v aged %v, want 4 and 6 counted by the call, no ages", st.Counts[record.StatePending], st.CountAge, st.DeadLetters, st.LetterCountAge)
		}
	})
}
