package drivertest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

// testPause: items of a paused request name are not claimed while the scheduler claims
// round after round; Resume lets them run. Pauses lists the pause while it holds.
func testPause(t *testing.T, open OpenFunc) {
	var rounds atomic.Int64
	q := openQueue(t, open(t), durable.Config{OnClaim: []func(time.Duration, int, error){func(time.Duration, int, error) { rounds.Add(1) }}})
	ctx := context.Background()
	if _, err := q.Pause(ctx, durable.NameTarget(workName), "op", durable.PauseReason("drill")); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if ps := must[[]record.Pause](t)(q.Pauses(ctx)); len(ps) != 1 {
		t.Fatalf("Pauses: %+v; want the one set", ps)
	}
	id := enqueue(t, q, 1).ID
	start(t, q, sender(t, nil))
	from := rounds.Load()
	eventually(t, 20*time.Second, "three claim rounds", func() bool { return rounds.Load() >= from+3 })
	if it := item(t, q, id); it.State != record.StatePending || it.Attempts != 0 {
		t.Fatalf("an item of a paused name: %s after %d attempts; want pending, none", it.State, it.Attempts)
	}
	if ok := must[bool](t)(q.Resume(ctx, durable.NameTarget(workName), "op")); !ok {
		t.Fatal("Resume found no pause")
	}
	waitState(t, q, id, record.StateSucceeded)
}

// testLimit: with a concurrency limit of 1 on a breaker key, the items of the key run one at
// a time across the queue's workers (the others are parked, not attempted, and run as the
// slot frees); the limit is listed while it is set.
func testLimit(t *testing.T, open OpenFunc) {
	var limited atomic.Int64
	q := openQueue(t, open(t), durable.Config{Workers: 4, OnSettled: []func(string, record.Settled){func(_ string, s record.Settled) {
		if s == record.SettledLimited {
			limited.Add(1)
		}
	}}})
	ctx := context.Background()
	if _, err := q.SetConcurrencyLimit(ctx, "slot", 1, "op"); err != nil {
		t.Fatalf("SetConcurrencyLimit: %v", err)
	}
	if ls := must[[]record.ConcurrencyLimit](t)(q.ConcurrencyLimits(ctx)); len(ls) != 1 || ls[0].Key != "slot" {
		t.Fatalf("ConcurrencyLimits: %+v", ls)
	}
	var ids []record.ItemID
	for n := range 3 {
		ids = append(ids, enqueue(t, q, n, durable.WithBreakerKey("slot")).ID)
	}
	release := make(chan struct{})
	var mu sync.Mutex
	running, most := 0, 0
	start(t, q, sender(t, func(ctx context.Context, w *work) error {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		defer func() { mu.Lock(); running--; mu.Unlock() }()
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}))
	eventually(t, 20*time.Second, "an item held back by the limit", func() bool { return limited.Load() > 0 })
	close(release)
	for _, id := range ids {
		it := waitState(t, q, id, record.StateSucceeded)
		if it.Attempts != 1 {
			t.Errorf("item %d: %d attempts; a limited item is not charged one", id, it.Attempts)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most != 1 {
		t.Fatalf("%d items of a key limited to 1 ran at once", most)
	}
}

// testDeadLetters: the letters of dead items are listed; a replay that succeeds makes its
// letter replayed, a discard makes the other discarded, each with its timeline; the counts
// follow.
func testDeadLetters(t *testing.T, open OpenFunc) {
	q := openQueue(t, open(t), durable.Config{})
	ctx := context.Background()
	a := enqueue(t, q, 1).ID
	b := enqueue(t, q, 2).ID
	start(t, q, sender(t, func(context.Context, *work) error { return errors.New("permanent") }))
	waitState(t, q, a, record.StateDead)
	waitState(t, q, b, record.StateDead)
	var letters []record.DeadLetter
	eventually(t, 20*time.Second, "two dead letters", func() bool {
		var err error
		var lp durable.DeadLetterPage
		lp, err = q.DeadLetters(ctx, durable.DeadLetterFilter{})
		letters = lp.Letters
		if err != nil {
			t.Fatal(err)
		}
		return len(letters) == 2
	})
	byItem := map[record.ItemID]record.DeadLetter{}
	for _, l := range letters {
		byItem[l.ItemID] = l
	}
	la, lb := byItem[a], byItem[b]
	if la.ID == 0 || lb.ID == 0 || la.Error != "permanent" || la.Cause != record.DeadPermanent || lb.Cause != record.DeadPermanent {
		t.Fatalf("letters %+v", letters)
	}
	if r := must[durable.Resolution](t)(q.Replay(ctx, sender(t, nil), la.ID, "op")); r != durable.Replayed {
		t.Fatalf("Replay: %s", r)
	}
	if r := must[durable.Resolution](t)(q.Discard(ctx, lb.ID, "op", "obsolete")); r != durable.Discarded {
		t.Fatalf("Discard: %s", r)
	}
	if _, err := q.Discard(ctx, lb.ID, "op", "again"); !errors.Is(err, durable.ErrConflict) {
		t.Fatalf("Discard of a discarded letter: %v; want ErrConflict", err)
	}
	got, timeline, err := q.DeadLetter(ctx, la.ID)
	if err != nil || got.Status != record.DeadLetterReplayed || got.RetryCount != 1 || len(timeline) == 0 {
		t.Fatalf("replayed letter %+v (%d timeline entries), %v", got, len(timeline), err)
	}
	if got, _, err := q.DeadLetter(ctx, lb.ID); err != nil || got.Status != record.DeadLetterDiscarded {
		t.Fatalf("discarded letter %+v, %v", got, err)
	}
	st := must[durable.Stats](t)(q.Stats(ctx))
	if st.DeadLetters[record.DeadLetterFailed] != 0 || st.DeadLetters[record.DeadLetterReplayed] != 1 || st.DeadLetters[record.DeadLetterDiscarded] != 1 {
		t.Fatalf("dead letter counts %v", st.DeadLetters)
	}
}

// testSchedules: a schedule added at run time is listed; a run asked for now runs its request
// once and is logged with who asked; a removed schedule is listed as removed, by whom.
func testSchedules(t *testing.T, open OpenFunc) {
	q := openQueue(t, open(t), durable.Config{})
	ctx := context.Background()
	if _, err := q.AddSchedule(ctx, durable.ScheduleSpec{Name: "nightly", Spec: "0 3 * * *", Request: workName, Payload: []byte(`{"n":9}`)}, "op"); err != nil {
		t.Fatalf("AddSchedule: %v", err)
	}
	if ss := must[[]record.ScheduleInfo](t)(q.Schedules(ctx)); len(ss) != 1 || ss[0].Name != "nightly" || ss[0].NextRun.IsZero() {
		t.Fatalf("Schedules: %+v", ss)
	}
	var ran atomic.Int64
	start(t, q, sender(t, func(ctx context.Context, w *work) error {
		if w.N == 9 {
			ran.Add(1)
		}
		return nil
	}))
	if _, err := q.RunScheduleNow(ctx, "nightly", "op"); err != nil {
		t.Fatalf("RunScheduleNow: %v", err)
	}
	var runs []record.ScheduleRun
	eventually(t, 20*time.Second, "the run asked for", func() bool {
		runs = must[[]record.ScheduleRun](t)(q.ScheduleRuns(ctx, "nightly", 10))
		return len(runs) == 1 && !runs[0].EndedAt.IsZero()
	})
	if runs[0].RunNowBy != "op" || runs[0].Outcome != record.OutcomeSucceeded {
		t.Fatalf("run %+v", runs[0])
	}
	eventually(t, 20*time.Second, "the run's request to run", func() bool { return ran.Load() == 1 })
	if _, err := q.RemoveSchedule(ctx, "nightly", "op"); err != nil {
		t.Fatalf("RemoveSchedule: %v", err)
	}
	if ss := must[[]record.ScheduleInfo](t)(q.Schedules(ctx)); len(ss) != 1 || ss[0].RemovedAt.IsZero() || ss[0].RemovedBy != "op" {
		t.Fatalf("Schedules after RemoveSchedule: %+v; want it removed by op", ss)
	}
}
