package durable_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// opaqueSender hides every method of the sender it wraps but SendAny: a sender Start cannot
// ask which handlers it has.
type opaqueSender struct{ s mediator.Sender }

func (o opaqueSender) SendAny(ctx context.Context, req any) (any, error) {
	return o.s.SendAny(ctx, req)
}

// A nil *mediator.Mediator passed as the sender is refused by Start (and by Replay), where it
// used to be accepted and crash the process with a nil dereference on the first claimed item.
func TestStartRefusesTypedNilSender(t *testing.T) {
	e := newEnv(t, sqliteBackend(t))
	var m *mediator.Mediator
	err := e.q.Start(m)
	if err == nil {
		_ = e.q.Shutdown(context.Background())
		t.Fatal("Start accepted a nil *mediator.Mediator")
	}
	if !strings.Contains(err.Error(), "nil *mediator.Mediator") {
		t.Errorf("Start = %v, want it to name the nil *mediator.Mediator", err)
	}
	if _, err := durable.NewScheduler(e.q, m); err == nil {
		t.Error("NewScheduler accepted a nil *mediator.Mediator")
	}
	if _, err := e.q.Replay(context.Background(), m, 1, "ops"); err == nil || !strings.Contains(err.Error(), "nil *mediator.Mediator") {
		t.Errorf("Replay = %v, want a refusal naming the nil *mediator.Mediator", err)
	}
	if _, err := e.q.ReplayMany(context.Background(), m, []record.DeadLetterID{1}, "ops"); err == nil || !strings.Contains(err.Error(), "nil *mediator.Mediator") {
		t.Errorf("ReplayMany = %v, want a refusal naming the nil *mediator.Mediator", err)
	}
	// The refusal leaves the queue startable.
	if err := e.q.Start(mediatorFor(t, handlers{})); err != nil {
		t.Fatalf("Start after the refusal: %v", err)
	}
	if err := e.q.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A mediator that was never built is refused by Start, where every waiting item used to go dead
// on its first attempt ("Build has not run").
func TestStartRefusesUnbuiltMediator(t *testing.T) {
	e := newEnv(t, sqliteBackend(t))
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *Work) (mediator.Void, error) { return void, nil })
	err := e.q.Start(m)
	if err == nil {
		_ = e.q.Shutdown(context.Background())
		t.Fatal("Start accepted a mediator that was never built")
	}
	if !errors.Is(err, mediator.ErrNotBuilt) || !strings.Contains(err.Error(), "Build") {
		t.Errorf("Start = %v, want an error matching mediator.ErrNotBuilt that says to call Build", err)
	}
	// So is one without any registered type to check.
	q := sqliteBackend(t).bare(t, durable.Config{})
	if err := q.Start(mediator.New(nil, mediator.Config{})); !errors.Is(err, mediator.ErrNotBuilt) {
		_ = q.Shutdown(context.Background())
		t.Errorf("Start with no registered type = %v, want mediator.ErrNotBuilt", err)
	}
}

// Start names, in one error, every registered request type the mediator has no handler for,
// where it used to accept the mediator and turn the backlog of those types into dead letters.
func TestStartNamesEveryMissingHandler(t *testing.T) {
	e := newEnv(t, sqliteBackend(t))
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *Work) (mediator.Void, error) { return void, nil })
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	err := e.q.Start(m)
	if err == nil {
		_ = e.q.Shutdown(context.Background())
		t.Fatal("Start accepted a mediator without handlers for test.keyed and test.unique")
	}
	if !errors.Is(err, mediator.ErrNoHandler) {
		t.Errorf("Start = %v, want an error matching mediator.ErrNoHandler", err)
	}
	for _, want := range []string{`"test.keyed"`, "*durable_test.Keyed", `"test.unique"`, "*durable_test.Unique"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Start = %v, want it to name %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "test.work") {
		t.Errorf("Start = %v names test.work, which has a handler", err)
	}
	// A sender Start cannot ask is taken as it is.
	if err := e.q.Start(opaqueSender{m}); err != nil {
		t.Fatalf("Start with a sender it cannot ask: %v", err)
	}
	if err := e.q.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// An item whose type has no handler in the sender that claimed it waits, as an item of an
// unknown name does: no attempt, not dead, due again after Recheck, and run by a scheduler
// whose sender has the handler. It used to go dead on its first attempt.
func TestItemWithoutHandlerWaits(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		lines := &logRecorder{}
		partial := mediator.New(nil, mediator.Config{})
		mediator.HandleFunc(partial, func(context.Context, *Keyed) (mediator.Void, error) { return void, nil })
		if err := partial.Build(); err != nil {
			t.Fatal(err)
		}
		now := e.clock.Now()
		id := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 1})).ID
		first := start(t, e.q, opaqueSender{partial}, durable.SchedulerConfig{Workers: 1, Logger: lines.logger()})
		eventually(t, 20*time.Second, "the item to be put off", func() bool { return item(t, e.q, id).LastError != "" })
		if err := first.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		it := item(t, e.q, id)
		if it.State != record.StatePending || it.Attempts != 0 || len(attempts(t, e.q, id)) != 0 ||
			!it.NextAt.Equal(now.Add(time.Minute)) || !strings.Contains(it.LastError, "no handler") {
			t.Errorf("item without a handler: %+v, attempts %s", it, outcomes(attempts(t, e.q, id)))
		}
		if n := stats(t, e.q).DeadLetters[record.DeadLetterFailed]; n != 0 {
			t.Errorf("%d dead letters, want none", n)
		}
		if !lines.has("durable: no handler for the request in this instance; its items wait for an instance that has one") {
			t.Errorf("no warning about the missing handler:\n%s", lines.dump(0, now))
		}
		e.clock.Advance(time.Minute)
		start(t, e.q, mediatorFor(t, handlers{}), durable.SchedulerConfig{Workers: 1})
		done := waitState(t, e.q, id, record.StateSucceeded)
		if as := attempts(t, e.q, id); done.Attempts != 1 || outcomes(as) != "1:succeeded" {
			t.Errorf("after a sender with the handler took over: %+v, attempts %s", done, outcomes(as))
		}
	})
}

// A replay through a sender without a handler for the letter's request runs nothing and
// records nothing: the letter is freed, not given a failed replay, and a sender with the
// handler replays it at once.
func TestReplayWithoutHandlerIsNotAFailedReplay(t *testing.T) {
	e := newDLEnv(t, sqliteBackend(t), durable.Config{})
	ctx := context.Background()
	id := e.capture(t, "import", 1)[0]
	partial := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(partial, func(context.Context, *Keyed) (mediator.Void, error) { return void, nil })
	if err := partial.Build(); err != nil {
		t.Fatal(err)
	}
	res, err := e.q.Replay(ctx, partial, id, "ops")
	if res != "" || !errors.Is(err, mediator.ErrNoHandler) {
		t.Errorf("Replay without a handler = %q, %v; want no resolution and an error matching mediator.ErrNoHandler", res, err)
	}
	d, tl := e.letter(t, id)
	if d.Status != record.DeadLetterFailed || d.RetryCount != 0 || len(tl) != 0 {
		t.Errorf("after a replay without a handler: %s, retries %d, timeline %s; want it failed, untouched", d.Status, d.RetryCount, timeline(tl))
	}
	if res, err := e.q.Replay(ctx, e.m, id, "ops"); res != durable.Replayed || err != nil {
		t.Errorf("Replay with the handler = %q, %v; want replayed at once (the letter was freed)", res, err)
	}
}
