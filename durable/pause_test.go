package durable_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// settledLog records the scheduler's OnSettled calls.
type settledLog struct {
	mu  sync.Mutex
	got []string
}

func (l *settledLog) on(name string, outcome record.Settled) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, name+":"+string(outcome))
}

func (l *settledLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.got, " ")
}

// A paused request name's items are never claimed while the others drain; the mediator's
// Send still runs them in process; Resume lets them run at once, without waiting a poll.
func TestBubblePausedNameNotClaimed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := bubbleQueue(t, path, fastPolicy)
		var mu sync.Mutex
		ran := map[string]int{}
		count := func(kind string) int { mu.Lock(); defer mu.Unlock(); return ran[kind] }
		h := handlers{
			work:  func(ctx context.Context, w *Work) error { mu.Lock(); ran["work"]++; mu.Unlock(); return nil },
			keyed: func(ctx context.Context, k *Keyed) error { mu.Lock(); ran["keyed"]++; mu.Unlock(); return nil },
		}
		p := must[record.Pause](t)(q.Pause(ctx, durable.NameTarget("test.work"), "alice", durable.PauseReason("bad deploy")))
		if p.Kind != record.PauseName || p.Target != "test.work" || p.Actor != "alice" || p.Reason != "bad deploy" || !p.Until.IsZero() || p.Expired {
			t.Fatalf("pause: %+v", p)
		}
		var works []record.ItemID
		for i := range 3 {
			works = append(works, must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: i})).ID)
			must[durable.Enqueued](t)(q.Enqueue(ctx, &Keyed{Key: "k", Seq: i}))
		}
		s := bubbleScheduler(t, q, h, durable.SchedulerConfig{PollInterval: time.Hour})
		s.Wake()
		time.Sleep(time.Minute) // virtual: the scheduler has long been idle
		synctest.Wait()
		if count("keyed") != 3 || count("work") != 0 {
			t.Fatalf("ran %v: want the 3 keyed items and none of the paused name's", ran)
		}
		for _, id := range works {
			if it := item(t, q, id); it.State != record.StatePending || it.Attempts != 0 {
				t.Fatalf("paused item %d: %+v; want pending and never attempted", id, it)
			}
		}
		// In process, a paused name is not refused.
		m := mediatorFor(t, h)
		if _, err := m.SendAny(ctx, &Work{N: 9}); err != nil || count("work") != 1 {
			t.Fatalf("in-process send while paused: %v, ran %v", err, ran)
		}
		resumed := must[bool](t)(q.Resume(ctx, durable.NameTarget("test.work"), "bob"))
		if !resumed {
			t.Fatal("Resume reported nothing paused")
		}
		synctest.Wait() // no poll passes: the resume woke the scheduler
		if count("work") != 4 {
			t.Fatalf("after resume ran %v: want the 3 paused items run at once", ran)
		}
		if again := must[bool](t)(q.Resume(ctx, durable.NameTarget("test.work"), "bob")); again {
			t.Fatal("a second Resume reported a pause")
		}
		entries := must[[]record.AuditEntry](t)(q.Audit(ctx, durable.AuditFilter{TargetKind: record.AuditTargetName, Target: "test.work"}))
		var got []string
		for _, e := range entries {
			got = append(got, string(e.Action)+" "+e.Actor+" "+string(e.Outcome)+" "+e.Detail)
		}
		want := []string{"resume bob no_change not paused", "resume bob done paused by alice until resumed", "pause alice done until resumed; reason: bad deploy"}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("audit:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// A pause with an end time ends by itself: its items run at the first poll after it, and the
// pause reads as expired; a resume of it changes nothing.
func TestBubbleTimedPauseEnds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := bubbleQueue(t, path, fastPolicy)
		begin := time.Now()
		ranAt := make(chan time.Duration, 1)
		s := bubbleScheduler(t, q, handlers{work: func(ctx context.Context, w *Work) error { ranAt <- time.Since(begin); return nil }},
			durable.SchedulerConfig{PollInterval: time.Second})
		must[record.Pause](t)(q.Pause(ctx, durable.NameTarget("test.work"), "alice", durable.PauseUntil(begin.Add(10*time.Second))))
		must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: 1}))
		s.Wake()
		at := <-ranAt
		if at < 10*time.Second || at > 11*time.Second {
			t.Fatalf("ran at %v: want at the first poll after the pause's end at 10s", at)
		}
		ps := must[[]record.Pause](t)(q.Pauses(ctx))
		if len(ps) != 1 || !ps[0].Expired {
			t.Fatalf("pauses after the end: %+v; want one, expired", ps)
		}
		if must[bool](t)(q.Resume(ctx, durable.NameTarget("test.work"), "bob")) {
			t.Fatal("Resume of an expired pause reported a pause")
		}
		e := must[[]record.AuditEntry](t)(q.Audit(ctx, durable.AuditFilter{Limit: 1}))[0]
		if e.Action != record.AuditResume || e.Outcome != record.AuditNoChange || !strings.HasPrefix(e.Detail, "its pause had ended at ") {
			t.Fatalf("audit of the resume: %+v", e)
		}
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// A paused breaker key's items are claimed, parked on the key with no attempt counted, and
// settle as "paused"; the other keys' items run; Resume frees them at once.
func TestBubbleKeyPauseParksUncharged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := bubbleQueue(t, path, fastPolicy)
		var mu sync.Mutex
		var ran []int
		var settled settledLog
		s := bubbleScheduler(t, q, handlers{work: func(ctx context.Context, w *Work) error { mu.Lock(); ran = append(ran, w.N); mu.Unlock(); return nil }},
			durable.SchedulerConfig{PollInterval: time.Hour, OnSettled: []func(string, record.Settled){settled.on}})
		must[record.Pause](t)(q.Pause(ctx, durable.KeyTarget("host-a"), "alice"))
		held := must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: 1}, durable.WithBreakerKey("host-a"))).ID
		must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: 2}, durable.WithBreakerKey("host-b")))
		s.Wake()
		synctest.Wait()
		mu.Lock()
		got := append([]int(nil), ran...)
		mu.Unlock()
		if len(got) != 1 || got[0] != 2 {
			t.Fatalf("ran %v: want only the item of the key not paused", got)
		}
		it := item(t, q, held)
		if it.State != record.StatePending || it.Attempts != 0 || it.ParkedKey != "host-a" || it.LastError != "" {
			t.Fatalf("item of the paused key: %+v; want pending, parked on host-a, no attempt", it)
		}
		if len(attempts(t, q, held)) != 0 {
			t.Fatal("an attempt was recorded for the paused key's item")
		}
		if !strings.Contains(settled.String(), "test.work:paused") {
			t.Fatalf("settled %q: want a paused outcome", settled.String())
		}
		if !must[bool](t)(q.Resume(ctx, durable.KeyTarget("host-a"), "bob")) {
			t.Fatal("Resume reported nothing paused")
		}
		synctest.Wait()
		if it := item(t, q, held); it.State != record.StateSucceeded || it.Attempts != 1 {
			t.Fatalf("after resume: %+v; want run at once, one attempt", it)
		}
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// Another instance learns of a key's pause at its next look (PollInterval), and of its resume
// too: the items it parked then run.
func TestBubbleKeyPauseReachesOtherInstance(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		operator := bubbleQueue(t, path, fastPolicy) // the instance the operator acts through
		worker := bubbleQueue(t, path, fastPolicy)
		ran := make(chan int, 10)
		s := bubbleScheduler(t, worker, handlers{work: func(ctx context.Context, w *Work) error { ran <- w.N; return nil }},
			durable.SchedulerConfig{PollInterval: time.Second})
		time.Sleep(time.Second) // let the worker look at the pauses once (there are none)
		must[record.Pause](t)(operator.Pause(ctx, durable.KeyTarget("host-a"), "alice"))
		time.Sleep(1500 * time.Millisecond) // the worker's next look
		held := must[durable.Enqueued](t)(operator.Enqueue(ctx, &Work{N: 1}, durable.WithBreakerKey("host-a"))).ID
		must[durable.Enqueued](t)(operator.Enqueue(ctx, &Work{N: 2}, durable.WithBreakerKey("host-b")))
		if n := <-ran; n != 2 {
			t.Fatalf("ran item %d first: want the other key's item", n)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if it := item(t, operator, held); it.State != record.StatePending || it.Attempts != 0 || it.ParkedKey != "host-a" {
			t.Fatalf("item of the paused key on the other instance: %+v", it)
		}
		begin := time.Now()
		must[bool](t)(operator.Resume(ctx, durable.KeyTarget("host-a"), "bob"))
		if n := <-ran; n != 1 {
			t.Fatalf("ran item %d: want the resumed key's", n)
		}
		if took := time.Since(begin); took > 2*time.Second {
			t.Fatalf("the other instance ran the resumed key's item %v after the resume: want within two polls", took)
		}
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// Pause and Resume refuse bad input before anything is stored, naming each problem.
func TestPauseRefusesBadInput(t *testing.T) {
	q := typesQueue(t)
	ctx := context.Background()
	_, err := q.Pause(ctx, durable.PauseTarget{Kind: "queue", Target: " "}, "", durable.PauseUntil(time.Now().Add(-time.Minute)))
	for _, want := range []string{`Kind "queue"`, "Target is empty", "actor is required", "PauseUntil"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Pause error %v: want it to name %s", err, want)
		}
	}
	if _, err := q.Pause(ctx, durable.KeyTarget(strings.Repeat("k", 100000)), "ops"); err == nil ||
		!strings.Contains(err.Error(), "Target is 100000 bytes, more than 1024") {
		t.Fatalf("a pause of a 100,000-byte key: %v", err)
	}
	if _, err := q.Resume(ctx, durable.PauseTarget{Kind: record.PauseName}, "ops"); err == nil || !strings.Contains(err.Error(), "Target is empty") {
		t.Fatalf("Resume error %v", err)
	}
	if ps := must[[]record.Pause](t)(q.Pauses(ctx)); len(ps) != 0 {
		t.Fatalf("a refused pause was stored: %+v", ps)
	}
	if es := must[[]record.AuditEntry](t)(q.Audit(ctx, durable.AuditFilter{})); len(es) != 0 {
		t.Fatalf("a refused pause was audited: %+v", es)
	}
}

// A key computed by SchedulerConfig.Breakers' key function at claim time is paused too; the
// breaker behavior in the pipeline does not refuse an in-process call of a paused key.
func TestBubbleKeyPauseOfAKeyFunction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := bubbleQueue(t, path, fastPolicy)
		reg := breaker.NewRegistry(breaker.Config{Key: func(req any) string {
			if k, ok := req.(*Keyed); ok {
				return "host-" + k.Key
			}
			return "other"
		}})
		ran := make(chan string, 4)
		h := handlers{keyed: func(ctx context.Context, k *Keyed) error { ran <- k.Key; return nil }}
		s := bubbleScheduler(t, q, h, durable.SchedulerConfig{PollInterval: time.Hour, Breakers: reg})
		must[record.Pause](t)(q.Pause(ctx, durable.KeyTarget("host-a"), "alice"))
		held := must[durable.Enqueued](t)(q.Enqueue(ctx, &Keyed{Key: "a"})).ID
		must[durable.Enqueued](t)(q.Enqueue(ctx, &Keyed{Key: "b"}))
		s.Wake()
		if k := <-ran; k != "b" {
			t.Fatalf("ran %q: want the key not paused", k)
		}
		synctest.Wait()
		if it := item(t, q, held); it.State != record.StatePending || it.Attempts != 0 || it.ParkedKey != "host-a" {
			t.Fatalf("item of the paused key: %+v", it)
		}
		m := mediatorFor(t, h, func(m *mediator.Mediator) { m.Use(breaker.New(reg)) })
		if _, err := m.SendAny(ctx, &Keyed{Key: "a"}); err != nil {
			t.Fatalf("in-process call of a paused key: %v", err)
		}
		if k := <-ran; k != "a" {
			t.Fatalf("in process ran %q", k)
		}
		must[bool](t)(q.Resume(ctx, durable.KeyTarget("host-a"), "bob"))
		if k := <-ran; k != "a" {
			t.Fatalf("after resume ran %q", k)
		}
		synctest.Wait()
		if it := item(t, q, held); it.State != record.StateSucceeded || it.Attempts != 1 {
			t.Fatalf("after resume: %+v", it)
		}
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
