package durable_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/bulkhead"
	"github.com/switchboard-go/switchboard/behaviors/fallback"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/behaviors/timeout"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// statusError is an HTTP-like error with a status code and an optional Retry-After hint.
type statusError struct {
	code  int
	after time.Duration
}

func (e statusError) Error() string             { return fmt.Sprintf("status %d", e.code) }
func (e statusError) StatusCode() int           { return e.code }
func (e statusError) RetryAfter() time.Duration { return e.after }

var void = mediator.Void{}

// A fallback and an exception handler answer a caller that waits, never the scheduler: the
// attempt row records the handler's own failure. They used to turn the failed attempt into
// "succeeded" and the item was done.
func TestSchedulerAttemptIsNotAnsweredByFallback(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			return statusError{code: 503}
		}}, func(m *mediator.Mediator) {
			m.Use(fallback.NewFor(func(context.Context, *Work, error) (mediator.Void, error) { return void, nil }, fallback.Config{}))
			mediator.HandleException(m, func(context.Context, *Work, error) (mediator.Void, bool) { return void, true })
		})
		// A caller that waits gets the degraded answer.
		if _, err := mediator.Send(context.Background(), m, &Work{N: 0}); err != nil {
			t.Fatalf("in-process: %v", err)
		}
		id := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: 1})).ID
		start(t, e.q, m)
		eventually(t, 20*time.Second, "the first attempt", func() bool { return len(attempts(t, e.q, id)) == 1 })
		it := item(t, e.q, id)
		if as := attempts(t, e.q, id); outcomes(as) != "1:failed" || as[0].Error != "status 503" || it.State != record.StatePending {
			t.Fatalf("item %+v, rows %s", it, outcomes(as))
		}
	})
}

// nestedEnv is an env whose registry holds the outer and the deferred inner request types.
func nestedEnv(t *testing.T, b backend) *env {
	return newEnvWith(t, b, func(q *durable.Queue) {
		durable.Register[*Outer](q, "test.outer")
		durable.Register[*InnerDeferred](q, "test.inner-deferred")
	})
}

type Outer struct {
	mediator.Command
	N int `json:"n"`
}

type InnerRetried struct {
	mediator.Command
	N int `json:"n"`
}

type InnerDeferred struct {
	mediator.Command
	N int `json:"n"`
}

// A durable handler's own sends run under their own policies: what the scheduler says about
// its dispatch (one attempt, already stored, unattended) binds to that dispatch alone. The
// inner request retried in process used to get one call, failing the outer attempt, and the
// inner request meant to be deferred was never deferred.
func TestNestedSendsRunUnderTheirOwnPolicies(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := nestedEnv(t, b)
		clock, q := e.clock, e.q
		var retriedCalls, deferredCalls atomic.Int64
		var innerErr atomic.Value
		deferredUp := atomic.Bool{}
		m := mediator.New(nil, mediator.Config{})
		mediator.HandleFunc(m, func(ctx context.Context, o *Outer) (mediator.Void, error) {
			if _, err := mediator.Send(ctx, m, &InnerRetried{N: o.N}); err != nil {
				return void, fmt.Errorf("inner retried: %w", err)
			}
			_, err := mediator.Send(ctx, m, &InnerDeferred{N: o.N})
			innerErr.Store(fmt.Sprint(err))
			if err != nil && !errors.Is(err, durable.ErrDeferred) {
				return void, fmt.Errorf("inner deferred: %w", err)
			}
			return void, nil // deferred is accepted: the inner work happens later
		})
		mediator.HandleFunc(m, func(ctx context.Context, r *InnerRetried) (mediator.Void, error) {
			if retriedCalls.Add(1) < 3 {
				return void, statusError{code: 503}
			}
			return void, nil
		})
		mediator.HandleFunc(m, func(ctx context.Context, r *InnerDeferred) (mediator.Void, error) {
			deferredCalls.Add(1)
			if !deferredUp.Load() {
				return void, statusError{code: 503}
			}
			return void, nil
		})
		m.Use(durable.NewDeferral(q, durable.DeferralConfig{}))
		m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 5, BaseDelay: time.Millisecond}}))
		if err := m.Build(); err != nil {
			t.Fatal(err)
		}
		outer := must[durable.Enqueued](t)(q.Enqueue(context.Background(), &Outer{N: 7})).ID
		start(t, q, m)
		waitState(t, q, outer, record.StateSucceeded)
		if as := attempts(t, q, outer); outcomes(as) != "1:succeeded" {
			t.Fatalf("outer rows %s", outcomes(as))
		}
		if retriedCalls.Load() != 3 || deferredCalls.Load() != 5 {
			t.Fatalf("inner calls: retried %d (want 3: its policy in full), deferred %d (want 5)", retriedCalls.Load(), deferredCalls.Load())
		}
		if s := innerErr.Load().(string); !strings.Contains(s, "deferred as item") {
			t.Fatalf("inner deferred: %s", s)
		}
		items := must[[]record.Item](t)(q.List(context.Background(), durable.Filter{Name: "test.inner-deferred"}))
		if len(items) != 1 || items[0].State != record.StatePending || items[0].Attempts != 0 {
			t.Fatalf("inner deferred items %+v", items)
		}
		// The inner item runs later as its own stored work.
		deferredUp.Store(true)
		clock.Advance(time.Minute)
		waitState(t, q, items[0].ID, record.StateSucceeded)
		if as := attempts(t, q, items[0].ID); outcomes(as) != "1:succeeded" {
			t.Fatalf("inner rows %s", outcomes(as))
		}
	})
}

// A full bulkhead turns the dispatch away before the handler runs: no attempt, and the item
// is due again shortly. It used to be dead-lettered with a failed attempt row.
func TestFullBulkheadIsNoAttempt(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		hold, held := make(chan struct{}), make(chan struct{})
		var refused atomic.Int64
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			if w.N == 99 {
				close(held)
				<-hold
			}
			return nil
		}}, func(m *mediator.Mediator) {
			m.Use(mediator.BehaviorFunc(func(ctx context.Context, req any, next mediator.Next) (any, error) {
				resp, err := next(ctx, req)
				if errors.Is(err, bulkhead.ErrFull) {
					refused.Add(1)
				}
				return resp, err
			}), mediator.WithOrder(behaviors.BulkheadOrder-1))
			m.Use(bulkhead.New(bulkhead.Config{Limit: 1}))
		})
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = mediator.Send(context.Background(), m, &Work{N: 99}) // holds the only slot
		}()
		<-held
		id := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: 1})).ID
		start(t, e.q, m)
		eventually(t, 20*time.Second, "a refusal", func() bool { return refused.Load() > 0 && item(t, e.q, id).State == record.StatePending })
		if it := item(t, e.q, id); it.Attempts != 0 || len(attempts(t, e.q, id)) != 0 {
			t.Fatalf("after the refusal: %+v rows %s", it, outcomes(attempts(t, e.q, id)))
		}
		close(hold)
		<-done
		e.clock.Advance(time.Minute)
		waitState(t, e.q, id, record.StateSucceeded)
		if as := attempts(t, e.q, id); outcomes(as) != "1:succeeded" {
			t.Fatalf("rows %s", outcomes(as))
		}
	})
}

var errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

// Durable work retries timeouts and transport errors by default: the queue exists for the
// dependency that is down or hung. A timeout used to dead-letter the item on its first
// attempt, and "connection refused" was neither retried nor deferred.
func TestDurableWorkRetriesTimeoutsAndTransportErrors(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		var calls sync.Map // item N → calls
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			v, _ := calls.LoadOrStore(w.N, new(atomic.Int64))
			n := v.(*atomic.Int64).Add(1)
			if w.N >= 100 { // in-process sends: always failing
				if w.N == 100 {
					<-ctx.Done()
					return ctx.Err()
				}
				return errRefused
			}
			if n > 1 {
				return nil
			}
			if w.N == 1 {
				<-ctx.Done() // hangs until the timeout behavior gives up
				return ctx.Err()
			}
			return fmt.Errorf("post: %w", errRefused)
		}}, func(m *mediator.Mediator) {
			m.Use(durable.NewDeferral(e.q, durable.DeferralConfig{}))
			m.Use(timeout.New(timeout.Config{Duration: 50 * time.Millisecond}))
		})
		// In process, the deferral takes them for later.
		for _, n := range []int{100, 101} {
			_, err := mediator.Send(context.Background(), m, &Work{N: n})
			if !errors.Is(err, durable.ErrDeferred) {
				t.Fatalf("work %d: %v, want deferred", n, err)
			}
		}
		hung := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: 1})).ID
		refused := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: 2})).ID
		start(t, e.q, m)
		for _, id := range []record.ItemID{hung, refused} {
			eventually(t, 20*time.Second, "the first attempt", func() bool { return len(attempts(t, e.q, id)) == 1 })
			if it := item(t, e.q, id); it.State != record.StatePending {
				t.Fatalf("item %d after one failure: %+v", id, it)
			}
		}
		e.clock.Advance(time.Minute)
		for _, id := range []record.ItemID{hung, refused} {
			waitState(t, e.q, id, record.StateSucceeded)
			if as := attempts(t, e.q, id); outcomes(as) != "1:failed 2:succeeded" {
				t.Fatalf("item %d rows %s", id, outcomes(as))
			}
		}
		if as := attempts(t, e.q, hung); !strings.Contains(as[0].Error, "timeout") {
			t.Fatalf("hung item's first error %q", as[0].Error)
		}
	})
}

// The classification a user configures on the retry behavior is the one the deferral and the
// scheduler use; they used to hard-code the default status codes.
func TestWidenedStatusCodesReachDeferralAndScheduler(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		var calls atomic.Int64
		m := mediatorFor(t, handlers{
			work: func(ctx context.Context, w *Work) error {
				if calls.Add(1) == 1 || w.N == 1 {
					return statusError{code: 500}
				}
				return nil
			},
			keyed: func(ctx context.Context, k *Keyed) error { return statusError{code: 503} },
		}, func(m *mediator.Mediator) {
			m.Use(durable.NewDeferral(e.q, durable.DeferralConfig{}))
			m.Use(retry.New(retry.Config{Policy: retry.Policy{RetryableStatusCodes: []int{500}}}),
				mediator.ForRequest[*Work]())
			m.Use(retry.New(retry.Config{Policy: retry.Policy{RetryableStatusCodes: []int{}}}),
				mediator.ForRequest[*Keyed]())
		})
		if _, err := mediator.Send(context.Background(), m, &Work{N: 1}); !errors.Is(err, durable.ErrDeferred) {
			t.Fatalf("500 with 500 retryable: %v, want deferred", err)
		}
		if _, err := mediator.Send(context.Background(), m, &Keyed{Key: "k"}); !errors.Is(err, statusError{code: 503}) || errors.Is(err, durable.ErrDeferred) {
			t.Fatalf("503 with no status retryable: %v, want the error itself", err)
		}
		calls.Store(0)
		widened := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: 2})).ID
		narrowed := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Keyed{Key: "n", Seq: 1})).ID
		start(t, e.q, m)
		eventually(t, 20*time.Second, "the first attempt", func() bool { return len(attempts(t, e.q, widened)) == 1 })
		if it := item(t, e.q, widened); it.State != record.StatePending {
			t.Fatalf("a 500 the policy retries was not retried: %+v", it)
		}
		it := waitState(t, e.q, narrowed, record.StateDead)
		if as := attempts(t, e.q, narrowed); outcomes(as) != "1:failed" || it.LastError != "status 503" {
			t.Fatalf("narrowed: %+v rows %s", it, outcomes(as))
		}
		e.clock.Advance(time.Minute)
		waitState(t, e.q, widened, record.StateSucceeded)
	})
}

// Registering a request type after the mediator was built panics: Build already decided
// which types the deferral applies to, and the type used to be silently never deferred.
func TestRegisterAfterBuildIsRefused(t *testing.T) {
	e := newEnv(t, sqliteBackend(t))
	mediatorFor(t, handlers{}, func(m *mediator.Mediator) { m.Use(durable.NewDeferral(e.q, durable.DeferralConfig{})) })
	err := registerErr(t, func() error { return durable.Register[*Outer](e.q, "test.late") })
	if err == nil || !strings.Contains(err.Error(), "the queue is in use") || !strings.Contains(err.Error(), "before Build") {
		t.Fatalf("late Register: %v", err)
	}
	// Without a deferral built over it, a queue stays open to registrations.
	r := sqliteBackend(t).bare(t, durable.Config{})
	mediatorFor(t, handlers{})
	if err := registerErr(t, func() error { return durable.Register[*Outer](r, "test.outer") }); err != nil {
		t.Fatal(err)
	}
}

// A second registration of a type or a name says so, also when its options are wrong too:
// the option's mistake alone would send the user fixing an option of a call that cannot work.
func TestRegisterTwiceSaysSoBesideABadOption(t *testing.T) {
	r := sqliteBackend(t).bare(t, durable.Config{})
	if err := registerErr(t, func() error { return durable.Register[*Outer](r, "test.outer") }); err != nil {
		t.Fatal(err)
	}
	bad := durable.WithPolicy(retry.Policy{MaxAttempts: -1})
	for _, c := range []struct {
		name     string
		register func() error
		want     string
	}{
		{"the type again", func() error { return durable.Register[*Outer](r, "test.other", bad) }, `already registered as "test.outer"`},
		{"the name again", func() error { return durable.Register[*InnerRetried](r, "test.outer", bad) }, `name "test.outer" is already used by`},
	} {
		err := registerErr(t, c.register)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "WithPolicy") {
			t.Errorf("%s with a bad option: %v, want it to say %q and name WithPolicy's mistake", c.name, err, c.want)
		}
	}
}

// A server's Retry-After hint is honoured end to end: the deferral schedules the item no
// earlier than the hint, and so does the scheduler after a failed attempt.
func TestRetryAfterHintSchedulesTheItem(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		var calls atomic.Int64
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			switch calls.Add(1) {
			case 1:
				return statusError{code: 503, after: 2 * time.Minute}
			case 2:
				return statusError{code: 503, after: 90 * time.Second}
			}
			return nil
		}}, func(m *mediator.Mediator) {
			m.Use(durable.NewDeferral(e.q, durable.DeferralConfig{}))
			m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3, MaxDelay: 30 * time.Second}}))
		})
		t0 := e.clock.Now()
		_, err := mediator.Send(context.Background(), m, &Work{N: 1})
		var d *durable.DeferredError
		var re *retry.ExhaustedError
		if !errors.As(err, &d) || !errors.As(d.Cause, &re) || re.Hint != 2*time.Minute || calls.Load() != 1 {
			t.Fatalf("%v after %d calls", err, calls.Load())
		}
		if it := item(t, e.q, d.ItemID); !it.NextAt.Equal(t0.Add(2 * time.Minute)) {
			t.Fatalf("deferred item due %v, want the hint (2m) after %v", it.NextAt, t0)
		}
		start(t, e.q, m)
		e.clock.Advance(2 * time.Minute)
		eventually(t, 20*time.Second, "the first attempt", func() bool { return len(attempts(t, e.q, d.ItemID)) == 1 })
		if it := item(t, e.q, d.ItemID); !it.NextAt.Equal(t0.Add(2*time.Minute + 90*time.Second)) {
			t.Fatalf("after a hinted failure due %v, want the hint (90s), more than the backoff (1s)", it.NextAt)
		}
		e.clock.Advance(90 * time.Second)
		waitState(t, e.q, d.ItemID, record.StateSucceeded)
	})
}

// Every Shutdown call waits for the same stop: concurrent calls used to return at once while
// handlers still ran, all but the first.
func TestConcurrentShutdownsAllWait(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := bubbleQueue(t, path, fastPolicy)
		release := make(chan struct{})
		var running atomic.Int64
		s := bubbleScheduler(t, q, handlers{work: func(ctx context.Context, w *Work) error {
			running.Add(1)
			<-release
			return nil
		}}, durable.SchedulerConfig{Workers: 4, PollInterval: time.Second})
		var ids []record.ItemID
		for n := range 4 {
			ids = append(ids, must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: n})).ID)
		}
		s.Wake()
		for running.Load() < 4 {
			time.Sleep(time.Millisecond)
		}
		var returned atomic.Int64
		errs := make(chan error, 8)
		for range 8 {
			go func() {
				err := s.Shutdown(ctx)
				returned.Add(1)
				errs <- err
			}()
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := returned.Load(); n != 0 {
			t.Fatalf("%d Shutdown calls returned while 4 handlers still ran", n)
		}
		close(release)
		for range 8 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range ids {
			if it := item(t, q, id); it.State != record.StateSucceeded {
				t.Fatalf("item %+v", it)
			}
		}
		// A later call returns the same outcome, and Start is refused.
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); !errors.Is(err, durable.ErrStopped) {
			t.Fatalf("Start after Shutdown: %v", err)
		}
	})
}

// The scheduler's Start/Shutdown state machine.
func TestSchedulerStartShutdownStates(t *testing.T) {
	e := newEnv(t, sqliteBackend(t))
	m := mediatorFor(t, handlers{})
	s := must[*durable.Scheduler](t)(durable.NewScheduler(e.q, m, durable.SchedulerConfig{PollInterval: time.Millisecond}))
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); !errors.Is(err, durable.ErrStarted) || errors.Is(err, durable.ErrStopped) {
		t.Fatalf("second Start: %v", err)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Shutdown before Start stops it without running it.
	s2 := must[*durable.Scheduler](t)(durable.NewScheduler(e.q, m))
	if err := s2.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s2.Start(); !errors.Is(err, durable.ErrStopped) {
		t.Fatalf("Start after Shutdown: %v", err)
	}
}

// Shutdown returns when the store was closed under it: its outcome writes fail, the grace ends
// and it says so. It used to wait forever, logging "sql: database is closed" every 5 s.
func TestShutdownReturnsAfterStoreClosed(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		started, release := make(chan struct{}), make(chan struct{})
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			close(started)
			<-release
			return nil
		}})
		id := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: 1})).ID
		s := must[*durable.Scheduler](t)(durable.NewScheduler(e.q, m, durable.SchedulerConfig{
			PollInterval: 5 * time.Millisecond, ShutdownGrace: 200 * time.Millisecond,
			Logger: zaptest.NewLogger(t),
		}))
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		<-started
		done := make(chan error, 1)
		go func() { done <- s.Shutdown(context.Background()) }()
		if err := e.q.Close(); err != nil {
			t.Fatal(err)
		}
		close(release)
		timer := time.NewTimer(10 * time.Second)
		defer timer.Stop()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "could not record the outcomes of 1 items") ||
				!strings.Contains(err.Error(), "closed") {
				t.Fatalf("shutdown: %v", err)
			}
		case <-timer.C:
			t.Fatal("Shutdown did not return 10s after the store closed")
		}
		_ = id
	})
}

// Handlers that ignore cancellation do not make Shutdown spend its grace waiting "for the
// database", nor charge items that never started: only items for free workers are claimed, the
// grace runs for the handlers, and the message names them. It used to claim every item of a
// batch and blame the database.
func TestShutdownGraceNamesHandlersThatIgnoreCancellation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := bubbleQueue(t, path, fastPolicy)
		lines := &logRecorder{}
		var running atomic.Int64
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			running.Add(1)
			time.Sleep(4 * time.Second) // ignores ctx
			return nil
		}})
		s := must[*durable.Scheduler](t)(durable.NewScheduler(q, m, durable.SchedulerConfig{Workers: 4, PollInterval: time.Second,
			ShutdownGrace: 2 * time.Second, Logger: lines.logger()}))
		var ids []record.ItemID
		for n := range 20 {
			ids = append(ids, must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: n})).ID)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		for running.Load() < 4 {
			time.Sleep(time.Millisecond)
		}
		begin := time.Now()
		sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		err := s.Shutdown(sctx)
		if took := time.Since(begin); took != 2300*time.Millisecond {
			t.Errorf("Shutdown took %v, want the deadline plus the grace (2.3s)", took)
		}
		if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "gave up on 4 handlers") ||
			strings.Contains(err.Error(), "could not record") {
			t.Fatalf("shutdown: %v", err)
		}
		if lines.has("durable: shutdown gave up waiting for the database") || !lines.has("durable: shutdown gave up on handlers that ignore cancellation") {
			t.Fatalf("log:\n%s", lines.dump(0, begin))
		}
		st := stats(t, q)
		if st.Counts[record.StateRunning] != 4 || st.Counts[record.StatePending] != 16 {
			t.Fatalf("after shutdown %+v: only the 4 started items may be held", st.Counts)
		}
		for _, id := range ids {
			if it := item(t, q, id); it.State == record.StatePending && (it.Attempts != 0 || len(attempts(t, q, id)) != 0) {
				t.Fatalf("an item that never started was charged: %+v", it)
			}
		}
		time.Sleep(5 * time.Second) // the abandoned handlers end inside the bubble
		synctest.Wait()
	})
}

// An item put off by a breaker that opened for a very long time (a manual trip) waits until
// the breaker may let a probe through, not the queue's Recheck, and the breaker's Reset frees
// it at once. (It once stayed put off a century after Reset; then it came back every Recheck,
// into the open breaker.)
func TestBreakerResetFreesParkedItem(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		reg := breaker.NewRegistry(breaker.Config{Key: func(any) string { return "k" }, OpenDuration: 100 * 365 * 24 * time.Hour, Clock: e.clock})
		if _, err := reg.Gate("k"); err != nil {
			t.Fatal(err)
		}
		if err := reg.Trip("k"); err != nil {
			t.Fatal(err)
		}
		var calls atomic.Int64
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error { calls.Add(1); return nil }})
		id := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: 1})).ID
		t0 := e.clock.Now()
		start(t, e.q, m, durable.SchedulerConfig{Breakers: reg})
		eventually(t, 20*time.Second, "the item to be parked", func() bool { return item(t, e.q, id).ParkedKey == "k" })
		if it := item(t, e.q, id); !it.NextAt.Equal(t0.Add(probeDue(100*365*24*time.Hour))) || it.Attempts != 0 {
			t.Fatalf("parked item %+v, want due when the breaker may probe", it)
		}
		if err := reg.Reset("k"); err != nil {
			t.Fatal(err)
		}
		waitState(t, e.q, id, record.StateSucceeded) // the clock does not move: Reset freed it
		if as := attempts(t, e.q, id); outcomes(as) != "1:succeeded" || calls.Load() != 1 {
			t.Fatalf("rows %s, %d calls", outcomes(as), calls.Load())
		}
	})
}

// Scheduler durations are validated: none may be negative or derive to zero. Lease 1ns used to
// pass and make Start panic in NewTicker. They are Config's, so Config.Validate and Open report
// them, naming each field, and nothing is opened.
func TestSchedulerConfigIsValidated(t *testing.T) {
	b := sqliteBackend(t)
	for name, c := range map[string]struct {
		cfg  durable.Config
		want string
	}{
		"tiny lease":       {durable.Config{Lease: time.Nanosecond}, "Lease 1ns is too short"},
		"negative workers": {durable.Config{Workers: -1}, "Workers -1 is negative"},
		"negative poll":    {durable.Config{PollInterval: -time.Second}, "PollInterval -1s is negative"},
		"heartbeat":        {durable.Config{Lease: time.Second, HeartbeatInterval: time.Second}, "HeartbeatInterval (1s) must be shorter than Lease (1s)"},
		"store timeout":    {durable.Config{Lease: time.Second, StoreTimeout: 2 * time.Second}, "StoreTimeout (2s) must be shorter than Lease (1s)"},
		"schedule lease":   {durable.Config{Lease: time.Minute, ScheduleLease: time.Second}, "HeartbeatInterval (20s) must be shorter than ScheduleLease (1s)"},
		"negative sched":   {durable.Config{ScheduleLease: -time.Second}, "ScheduleLease -1s is negative"},
	} {
		if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate = %v; want an error containing %q", name, err, c.want)
		}
		if q, err := durable.Open(context.Background(), b.driver(), c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			if q != nil {
				_ = q.Close()
			}
			t.Errorf("%s: Open = %v; want an error containing %q", name, err, c.want)
		}
	}
	// Every problem is reported at once.
	err := durable.Config{Workers: -1, BatchSize: -2, PollInterval: -time.Second}.Validate()
	for _, want := range []string{"Workers -1", "BatchSize -2", "PollInterval -1s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v; want it to name %s", err, want)
		}
	}
	e := newEnv(t, b)
	m := mediatorFor(t, handlers{})
	if err := e.q.Start(m); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := e.q.Start(m); !errors.Is(err, durable.ErrStarted) {
		t.Errorf("second Start = %v, want ErrStarted", err)
	}
	if err := e.q.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.q.Start(m); !errors.Is(err, durable.ErrStopped) {
		t.Errorf("Start after Shutdown = %v, want ErrStopped", err)
	}
}

type Blob struct {
	mediator.Command
	Data string `json:"data"`
}

// A claim loads no more payloads than it has free workers: eight large items with one worker
// keep about one payload in memory while a handler runs (the decoded request, and on
// PostgreSQL the driver's read buffer, which pgx keeps on the connection rounded up to a power
// of two). A claim used to load its whole batch.
func TestLargePayloadsAreLoadedPerDispatch(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		const size, items = 12 << 20, 8
		q := b.bare(t, durable.Config{Policy: fastPolicy, MaxPayloadBytes: 2 * size}) // above the default limit
		durable.Register[*Blob](q, "test.blob")
		for n := range items {
			blob := &Blob{Data: strings.Repeat(string(rune('a'+n)), size)}
			must[durable.Enqueued](t)(q.Enqueue(context.Background(), blob))
		}
		runtime.GC()
		runtime.GC()
		var base runtime.MemStats
		runtime.ReadMemStats(&base)
		var peak atomic.Uint64
		var seen atomic.Int64
		m := mediator.New(nil, mediator.Config{})
		mediator.HandleFunc(m, func(ctx context.Context, b *Blob) (mediator.Void, error) {
			// Twice: buffers a driver returned to a sync.Pool survive one collection.
			runtime.GC()
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if live := ms.HeapAlloc; live > peak.Load() {
				peak.Store(live)
			}
			if len(b.Data) != size {
				return void, errors.New("short blob")
			}
			seen.Add(1)
			return void, nil
		})
		if err := m.Build(); err != nil {
			t.Fatal(err)
		}
		start(t, q, m, durable.SchedulerConfig{Workers: 1})
		eventually(t, 60*time.Second, "every blob", func() bool { return stats(t, q).Counts[record.StateSucceeded] == items })
		grew := int64(peak.Load()) - int64(base.HeapAlloc)
		t.Logf("live heap during a dispatch: +%.1f MiB over the start, payload %d MiB", float64(grew)/(1<<20), size>>20)
		limit := int64(3 * size)
		if b.name == "postgres" {
			// pgx reads a row into a buffer rounded up to a power of two and keeps it on the
			// connection until its next read: the driver's, not the queue's. The claim, the
			// completion and the heartbeats take whichever pooled connection is free, and
			// database/sql keeps two idle ones, so two of them may hold a payload's buffer
			// (which two varies with timing: seen +32 and +44 MiB on one machine, +56 on a
			// loaded one).
			limit += 2 * 16 << 20
		}
		if grew > limit {
			t.Fatalf("live heap grew by %d bytes during a dispatch, more than %d (3 payloads of %d)", grew, limit, size)
		}
	})
}

// A handler that returns the refusal its own outbound request met (the breaker of the endpoint
// it calls) did not reach the endpoint: no attempt is charged, and the item is parked on that
// breaker's key until it may let a probe through. It used to be an attempt, retried with the
// item's backoff whatever the breaker's open time.
func TestInnerRefusalParksOnItsKey(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		reg := breaker.NewRegistry(breaker.Config{Key: func(req any) string {
			if _, ok := req.(*InnerRetried); ok {
				return "inner"
			}
			return "outer"
		}, OpenDuration: 40 * time.Second, Clock: e.clock})
		var m *mediator.Mediator
		m = mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			_, err := mediator.Send(ctx, m, &InnerRetried{N: w.N})
			return err
		}}, func(m *mediator.Mediator) {
			mediator.HandleFunc(m, func(context.Context, *InnerRetried) (mediator.Void, error) { return void, nil })
			m.Use(breaker.New(reg))
		})
		if _, err := reg.Gate("inner"); err != nil {
			t.Fatal(err)
		}
		if err := reg.Trip("inner"); err != nil {
			t.Fatal(err)
		}
		t0 := e.clock.Now()
		id := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: 1})).ID
		start(t, e.q, m)
		eventually(t, 20*time.Second, "the refusal", func() bool { return item(t, e.q, id).ParkedKey == "inner" })
		it := item(t, e.q, id)
		if as := attempts(t, e.q, id); len(as) != 0 || it.Attempts != 0 || !strings.Contains(it.LastError, `circuit open for "inner"`) ||
			it.State != record.StatePending || !it.NextAt.Equal(t0.Add(probeDue(40*time.Second))) {
			t.Fatalf("item %+v rows %s", it, outcomes(as))
		}
		e.clock.Advance(probeDue(40 * time.Second))
		waitState(t, e.q, id, record.StateSucceeded)
		if as := attempts(t, e.q, id); outcomes(as) != "1:succeeded" {
			t.Fatalf("rows %s", outcomes(as))
		}
	})
}

// The deferral keeps a Retry-After hint (and a tripped breaker's open time) that the retry
// behavior's RetryError wraps: it used to see the RetryError's own zero hint and schedule the
// item after the first backoff, straight into the refusal or the server's "not yet".
func TestDeferralKeepsHintBehindRetryError(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		reg := breaker.NewRegistry(breaker.Config{FailureThreshold: 2, OpenDuration: 20 * time.Second, Clock: e.clock})
		var workCalls atomic.Int64
		m := mediatorFor(t, handlers{
			work: func(ctx context.Context, w *Work) error {
				if workCalls.Add(1) == 1 {
					return statusError{code: 503}
				}
				return statusError{code: 503, after: 3 * time.Second} // the last attempt's answer
			},
			keyed: func(ctx context.Context, k *Keyed) error { return statusError{code: 503} },
		}, func(m *mediator.Mediator) {
			m.Use(durable.NewDeferral(e.q, durable.DeferralConfig{}))
			m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 2, BaseDelay: time.Millisecond,
				MaxDelay: 10 * time.Second}, Clock: behaviors.SystemClock}))
			m.Use(breaker.New(reg), mediator.ForRequest[*Keyed]())
		})
		t0 := e.clock.Now()
		for _, c := range []struct {
			req  any
			want time.Duration
		}{{&Work{N: 1}, 3 * time.Second}, {&Keyed{Key: "k"}, 20 * time.Second}} {
			_, err := m.SendAny(context.Background(), c.req)
			var d *durable.DeferredError
			var re *retry.ExhaustedError
			if !errors.As(err, &d) || !errors.As(d.Cause, &re) || re.Attempts != 2 || re.Hint != 0 {
				t.Fatalf("%T: %v", c.req, err)
			}
			if it := item(t, e.q, d.ItemID); !it.NextAt.Equal(t0.Add(c.want)) {
				t.Errorf("%T deferred, due %v after, want %v", c.req, it.NextAt.Sub(t0), c.want)
			}
		}
	})
}

// A request deferred because its breaker was open waits on that breaker: due within Recheck,
// and freed when the breaker closes. It used to wait out the whole open time whatever
// happened to the breaker.
func TestDeferralParksOnTheOpenBreaker(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		reg := breaker.NewRegistry(breaker.Config{Key: func(any) string { return "pay" }, OpenDuration: time.Hour, Clock: e.clock})
		var calls atomic.Int64
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error { calls.Add(1); return nil }},
			func(m *mediator.Mediator) {
				m.Use(durable.NewDeferral(e.q, durable.DeferralConfig{}))
				m.Use(breaker.New(reg))
			})
		if _, err := reg.Gate("pay"); err != nil {
			t.Fatal(err)
		}
		if err := reg.Trip("pay"); err != nil {
			t.Fatal(err)
		}
		t0 := e.clock.Now()
		_, err := mediator.Send(context.Background(), m, &Work{N: 1})
		var d *durable.DeferredError
		if !errors.As(err, &d) {
			t.Fatal(err)
		}
		if it := item(t, e.q, d.ItemID); it.ParkedKey != "pay" || !it.NextAt.Equal(t0.Add(probeDue(time.Hour))) {
			t.Fatalf("deferred item %+v: want parked on pay, due when it may probe", it)
		}
		start(t, e.q, m, durable.SchedulerConfig{Breakers: reg})
		if err := reg.Reset("pay"); err != nil {
			t.Fatal(err)
		}
		waitState(t, e.q, d.ItemID, record.StateSucceeded) // the clock does not move
		if calls.Load() != 1 {
			t.Fatalf("%d calls", calls.Load())
		}
	})
}

// A failed Build leaves the registry open: only a Build that succeeded decided which types the
// deferral applies to. Register used to be refused after a failed Build, and the second Build
// then never deferred the type.
func TestRegisterAfterFailedBuild(t *testing.T) {
	e := newEnv(t, sqliteBackend(t))
	m := mediator.New(nil, mediator.Config{})
	m.Use(durable.NewDeferral(e.q, durable.DeferralConfig{}))
	mediator.Declare[*Outer](m) // no handler yet: Build fails
	if err := m.Build(); err == nil {
		t.Fatal("Build succeeded without a handler")
	}
	if err := registerErr(t, func() error { return durable.Register[*Outer](e.q, "test.outer") }); err != nil {
		t.Fatalf("Register after a failed Build: %v", err)
	}
	mediator.HandleFunc(m, func(context.Context, *Outer) (mediator.Void, error) { return void, statusError{code: 503} })
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	if _, err := mediator.Send(context.Background(), m, &Outer{N: 1}); !errors.Is(err, durable.ErrDeferred) {
		t.Fatalf("not deferred: %v", err)
	}
	if err := registerErr(t, func() error { return durable.Register[*InnerRetried](e.q, "test.inner") }); err == nil || !strings.Contains(err.Error(), "the queue is in use") {
		t.Fatalf("Register after a successful Build: %v", err)
	}
}

// A nil *breaker.Registry in Breakers is no breaker check: the scheduler starts and runs items.
// (Breakers used to be an interface, where a typed nil made Start panic and left a Shutdown
// that never returned.)
func TestSchedulerTakesNilBreakers(t *testing.T) {
	e := newEnv(t, sqliteBackend(t))
	m := mediatorFor(t, handlers{})
	var reg *breaker.Registry
	id := must[durable.Enqueued](t)(e.q.Enqueue(context.Background(), &Work{N: 1})).ID
	start(t, e.q, m, durable.SchedulerConfig{Breakers: reg})
	waitState(t, e.q, id, record.StateSucceeded)
}

type Limited struct {
	mediator.Command
	N int `json:"n"`
}

// Back-pressure a handler meets (a request it sends is refused by a full bulkhead) and inner
// work it had deferred are tried again later, not dead-lettered: the item's work can succeed
// then. Both used to make the item dead after one attempt. The refusal is not an attempt (the
// call it refused did not happen); the inner deferral is.
func TestHandlerMeetingBackPressureIsTriedAgain(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := nestedEnv(t, b)
		clock, q := e.clock, e.q
		hold, held := make(chan struct{}), make(chan struct{})
		var holdOnce sync.Once
		var innerUp atomic.Bool
		m := mediator.New(nil, mediator.Config{})
		mediator.HandleFunc(m, func(ctx context.Context, o *Outer) (mediator.Void, error) {
			if o.N == 1 {
				_, err := mediator.Send(ctx, m, &Limited{N: 1})
				return void, err
			}
			_, err := mediator.Send(ctx, m, &InnerDeferred{N: 2})
			return void, err
		})
		mediator.HandleFunc(m, func(ctx context.Context, l *Limited) (mediator.Void, error) {
			if l.N == 99 {
				holdOnce.Do(func() { close(held) })
				<-hold
			}
			return void, nil
		})
		mediator.HandleFunc(m, func(ctx context.Context, r *InnerDeferred) (mediator.Void, error) {
			if !innerUp.Load() {
				return void, statusError{code: 503}
			}
			return void, nil
		})
		m.Use(durable.NewDeferral(q, durable.DeferralConfig{}))
		m.Use(bulkhead.New(bulkhead.Config{Limit: 1}), mediator.ForRequest[*Limited]())
		if err := m.Build(); err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = mediator.Send(context.Background(), m, &Limited{N: 99}) }()
		<-held
		bulk := must[durable.Enqueued](t)(q.Enqueue(context.Background(), &Outer{N: 1})).ID
		deferred := must[durable.Enqueued](t)(q.Enqueue(context.Background(), &Outer{N: 2})).ID
		start(t, q, m)
		eventually(t, 20*time.Second, "the refusal", func() bool { return item(t, q, bulk).LastError != "" })
		if it := item(t, q, bulk); it.State != record.StatePending || it.Attempts != 0 || len(attempts(t, q, bulk)) != 0 {
			t.Fatalf("item after meeting back-pressure: %+v rows %s", it, outcomes(attempts(t, q, bulk)))
		}
		eventually(t, 20*time.Second, "the first attempt", func() bool { return len(attempts(t, q, deferred)) == 1 })
		if it := item(t, q, deferred); it.State != record.StatePending {
			t.Fatalf("item after its inner work was deferred: %+v rows %s", it, outcomes(attempts(t, q, deferred)))
		}
		close(hold)
		innerUp.Store(true)
		clock.Advance(time.Minute)
		for id, want := range map[record.ItemID]string{bulk: "1:succeeded", deferred: "1:failed 2:succeeded"} {
			waitState(t, q, id, record.StateSucceeded)
			if as := attempts(t, q, id); outcomes(as) != want {
				t.Fatalf("item %d rows %s, want %s", id, outcomes(as), want)
			}
		}
	})
}

// A scheduler that stopped removes its listener from the breaker registry, so a long-lived
// registry does not keep every stopped scheduler alive.
func TestStoppedSchedulerIsCollected(t *testing.T) {
	e := newEnv(t, sqliteBackend(t))
	reg := breaker.NewRegistry(breaker.Config{})
	m := mediatorFor(t, handlers{})
	collected := make(chan struct{})
	func() {
		s := must[*durable.Scheduler](t)(durable.NewScheduler(e.q, m, durable.SchedulerConfig{Breakers: reg, PollInterval: time.Millisecond}))
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		if err := s.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		runtime.AddCleanup(s, func(ch chan struct{}) { close(ch) }, collected)
	}()
	for range 50 {
		runtime.GC()
		select {
		case <-collected:
			runtime.KeepAlive(reg)
			return
		default:
		}
	}
	t.Fatal("a stopped scheduler is still reachable (from its breaker registry's listeners)")
}
