package durable_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
	istore "github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// untouchedLetters counts the letters of ids still failed with no retry and no timeline entry.
func untouchedLetters(t *testing.T, q *durable.Queue, ids []record.DeadLetterID) int {
	t.Helper()
	n := 0
	for _, id := range ids {
		d, tl, err := q.DeadLetter(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if d.Status == record.DeadLetterFailed && d.RetryCount == 0 && len(tl) == 0 {
			n++
		}
	}
	return n
}

// pausedReplay starts a replay of ids with target paused and returns the action once it waits
// on the pause, having checked that it touched no letter; then, when the test checks the paused
// action, it resumes target and waits for the action to finish, done, every letter replayed.
func pausedReplay(t *testing.T, e *bulkEnv, ids []record.DeadLetterID, target durable.PauseTarget, check func(a durable.BulkAction), opts ...durable.BulkActionOption) {
	t.Helper()
	ctx := context.Background()
	a, err := e.q.StartBulkAction(ctx, durable.BulkActionSpec{Kind: record.BulkReplay, Rate: 1000}, "bob", opts...)
	if err != nil {
		t.Fatal(err)
	}
	a = e.waitActionFor(t, 20*time.Second, a.ID, "the action to wait on the pause of "+target.String(), func(a durable.BulkAction) bool {
		return a.State == record.BulkPaused || finished(a)
	})
	check(a)
	if n := untouchedLetters(t, e.q, ids); n != len(ids) || len(e.ran()) != 0 {
		t.Fatalf("while %s is paused: %d of %d letters untouched, handler runs %v", target, n, len(ids), e.ran())
	}
	if _, err := e.q.Resume(ctx, target, "alice"); err != nil {
		t.Fatal(err)
	}
	a = e.waitAction(t, a.ID, "the action to finish", finished)
	if a.State != record.BulkDone || a.Totals.Replayed != int64(len(ids)) || a.Error != "" || a.WaitingKey != "" {
		t.Fatalf("after the resume: %+v", a)
	}
}

// A bulk replay of letters whose request name is paused waits, showing the pause, and
// touches no letter; it goes on once the name is resumed.
func TestBulkReplayWaitsWhileNamePaused(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newBulkEnv(t, b, durable.Config{})
		ids := e.capture(t, "orders", "boom", 3)
		target := durable.NameTarget("test.work")
		if _, err := e.q.Pause(context.Background(), target, "alice", durable.PauseReason("endpoint migration")); err != nil {
			t.Fatal(err)
		}
		start(t, e.q, e.m, durable.SchedulerConfig{})
		pausedReplay(t, e, ids, target, func(a durable.BulkAction) {
			if a.State != record.BulkPaused || !strings.Contains(a.Error, `"test.work"`) || !strings.Contains(a.Error, "endpoint migration") {
				t.Fatalf("with test.work paused the action is %s (%q), totals %+v", a.State, a.Error, a.Totals)
			}
		})
	})
}

// A bulk replay whose letters' breaker key is paused waits on the key, even right after the
// breaker was reset for it (reset-and-replay), and touches no letter until the key is resumed:
// whether the scheduler knows the letters' key (SchedulerConfig.Breakers) or only the action
// does (the key it reset; the breaker is in the pipeline alone). The pause was made before the
// scheduler started: its first replay already honours it.
func TestBulkReplayWaitsWhileKeyPaused(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		for _, guarded := range []bool{true, false} {
			t.Run(fmt.Sprintf("scheduler knows the key %v", guarded), func(t *testing.T) {
				reg := breaker.NewRegistry(breaker.Config{FailureThreshold: 100})
				e := newBulkEnv(t, b, durable.Config{}, func(m *mediator.Mediator) { m.Use(breaker.New(reg)) })
				ids := e.capture(t, "orders", "boom", 3)
				key := reg.KeyOf(&Work{})
				target := durable.KeyTarget(key)
				if _, err := e.q.Pause(context.Background(), target, "alice"); err != nil {
					t.Fatal(err)
				}
				cfg := durable.SchedulerConfig{}
				if guarded {
					cfg.Breakers = reg
				}
				start(t, e.q, e.m, cfg)
				pausedReplay(t, e, ids, target, func(a durable.BulkAction) {
					if a.State != record.BulkPaused || a.WaitingKey != key || !strings.Contains(a.Error, "paused") {
						t.Fatalf("with key %q paused the action is %s (key %q, %q), totals %+v", key, a.State, a.WaitingKey, a.Error, a.Totals)
					}
				}, durable.ResetBreakerFirst(reg, key))
			})
		}
	})
}

// Shutdown returns within its context's end plus ShutdownGrace while a bulk replay's handler
// ignores cancellation, and says it gave up on that replay.
func TestShutdownGivesUpOnBulkReplayIgnoringCancel(t *testing.T) {
	ctx := context.Background()
	e := newBulkEnv(t, sqliteBackend(t), durable.Config{})
	e.capture(t, "orders", "boom", 1)
	release := make(chan struct{})
	returned := make(chan struct{})
	started := make(chan struct{}, 1)
	e.handle(func(context.Context, *Work) error {
		defer close(returned)
		started <- struct{}{}
		<-release // ignores cancellation
		return nil
	})
	if _, err := e.q.StartBulkAction(ctx, durable.BulkActionSpec{Kind: record.BulkReplay, Rate: 1000}, "alice"); err != nil {
		t.Fatal(err)
	}
	s, err := durable.NewScheduler(e.q, e.m, durable.SchedulerConfig{PollInterval: 5 * time.Millisecond, ShutdownGrace: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	<-started
	sctx, cancel := context.WithCancel(ctx)
	cancel()
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(sctx) }()
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		close(release)
		<-done
		t.Fatal("Shutdown with an ended context and a 200ms grace had not returned after 20s: it waits for a bulk replay whose handler ignores cancellation")
	}
	close(release)
	<-returned
	if err == nil || !strings.Contains(err.Error(), "gave up on 1 bulk action replay") {
		t.Fatalf("Shutdown = %v, want it to name the bulk replay it gave up on", err)
	}
}

// An instance that cannot run a letter's request (a rolling deploy: it lacks the handler)
// hands the action back instead of failing it; an instance that can run it finishes it.
func TestBulkReplayHandedBackByInstanceWithoutHandler(t *testing.T) {
	ctx := context.Background()
	e := newBulkEnv(t, sqliteBackend(t), durable.Config{Recheck: 50 * time.Millisecond})
	e.capture(t, "orders", "boom", 3)
	old := mediator.New(nil, mediator.Config{}) // no handler for Work
	mediator.HandleFunc(old, func(context.Context, *Keyed) (mediator.Void, error) { return mediator.Void{}, nil })
	if err := old.Build(); err != nil {
		t.Fatal(err)
	}
	s1 := start(t, e.q, old, durable.SchedulerConfig{})
	a, err := e.q.StartBulkAction(ctx, durable.BulkActionSpec{Kind: record.BulkReplay, Rate: 1000}, "alice")
	if err != nil {
		t.Fatal(err)
	}
	a = e.waitActionFor(t, 20*time.Second, a.ID, "the action to be handed back", func(a durable.BulkAction) bool {
		return a.State == record.BulkWaiting && strings.Contains(a.Error, "cannot run") || finished(a)
	})
	if a.State != record.BulkWaiting || !strings.Contains(a.Error, `"test.work"`) {
		t.Fatalf("an instance without the handler left the action %s: %q", a.State, a.Error)
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s1.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	start(t, e.q, e.m, durable.SchedulerConfig{})
	a = e.waitAction(t, a.ID, "the action to finish", finished)
	if a.State != record.BulkDone || a.Totals.Replayed != 3 || a.Error != "" {
		t.Fatalf("on an instance with the handler: %+v", a)
	}
}

// A failed action counts none of the letters it never reached as skipped.
func TestBulkActionFailedCountsNoSkipped(t *testing.T) {
	ctx := context.Background()
	e := newBulkEnv(t, sqliteBackend(t), durable.Config{})
	e.capture(t, "orders", "boom", 5)
	now := time.Now()
	id, err := durable.StoreOf(e.q).InsertBulkAction(ctx, istore.BulkActionRow{Kind: string(record.BulkReplay), Filter: "{not json", Actor: "alice",
		State: istore.BulkQueued, Rate: 1000, InFlight: 1, MaxLetter: 1 << 40, Matched: 5, CreatedAt: now},
		istore.AuditRow{At: now, Actor: "alice", Action: string(record.AuditBulkReplay), TargetKind: string(record.AuditTargetBulkAction), Outcome: record.AuditDone})
	if err != nil {
		t.Fatal(err)
	}
	start(t, e.q, e.m, durable.SchedulerConfig{})
	a := e.waitAction(t, record.BulkActionID(id), "the action to end", finished)
	if a.State != record.BulkFailed || a.Totals.Skipped != 0 || a.Totals.Settled() != 0 {
		t.Fatalf("failed action: state %s, totals %+v (settled %d of %d)", a.State, a.Totals, a.Totals.Settled(), a.Matched)
	}
}

// limiterRefusal is the refusal of a rate limiter of key "api", as behaviors/ratelimit's.
type limiterRefusal struct{ req any }

func (e *limiterRefusal) Error() string             { return "rate limited" }
func (e *limiterRefusal) RetryAfter() time.Duration { return 20 * time.Millisecond }
func (e *limiterRefusal) Refusal() behaviors.RefusalInfo {
	return behaviors.RefusalInfo{By: "ratelimit", Key: "api", Request: e.req}
}

// A bulk replay a rate limiter (a refusal not of a breaker) refuses waits, showing what refused
// it, not a breaker with an empty key; it goes on when the limiter lets it through.
// (Regression: it showed paused_on_breaker, `the breaker of "" refuses calls`.)
func TestBulkReplayRefusedByALimiterSaysSo(t *testing.T) {
	var refusing atomic.Bool
	e := newBulkEnv(t, sqliteBackend(t), durable.Config{}, func(m *mediator.Mediator) {
		m.Use(mediator.BehaviorFunc(func(ctx context.Context, req any, next mediator.Next) (any, error) {
			if refusing.Load() {
				return nil, &limiterRefusal{req: req}
			}
			return next(ctx, req)
		}), mediator.WithOrder(behaviors.BulkheadOrder))
	})
	ids := e.capture(t, "orders", "boom", 3)
	refusing.Store(true)
	start(t, e.q, e.m, durable.SchedulerConfig{})
	a, err := e.q.StartBulkAction(context.Background(), durable.BulkActionSpec{Kind: record.BulkReplay, Rate: 1000}, "bob")
	if err != nil {
		t.Fatal(err)
	}
	a = e.waitActionFor(t, 20*time.Second, a.ID, "the action to wait on the limiter", func(a durable.BulkAction) bool {
		return a.Error != "" || finished(a)
	})
	if a.State != record.BulkWaiting || a.WaitingKey != "api" || strings.Contains(a.Error, "breaker") || !strings.Contains(a.Error, `"ratelimit"`) {
		t.Fatalf("refused by a rate limiter the action is %s (key %q, %q); want waiting on the limiter's key, named", a.State, a.WaitingKey, a.Error)
	}
	refusing.Store(false)
	a = e.waitAction(t, a.ID, "the action to finish", finished)
	if a.State != record.BulkDone || a.Totals.Replayed != int64(len(ids)) || a.Error != "" {
		t.Fatalf("after the limiter let them through: %+v", a)
	}
}
