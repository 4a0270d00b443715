package durable_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/durabletest"
	istore "github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
)

// The due runs of a schedule whose request name is paused, added at run time or declared in
// code, are skipped and logged as such, saying the name is paused; so is a run asked for now.
// Once the name is resumed, the schedule runs again.
func TestScheduleOfAPausedRequestNameSkipsItsRuns(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		clock := durabletest.NewManualClock(cronStart)
		op, calls := scheduleFleet(t, b, clock, func(q *durable.Queue) {
			durable.Schedule(q, "code", "@every 1m", func() *Tick { return &Tick{Schedule: "code"} })
		}, "a")
		must[record.Pause](t)(op.Pause(ctx, durable.NameTarget("tick"), "alice", durable.PauseReason("maintenance")))
		must[record.ScheduleInfo](t)(op.AddSchedule(ctx, durable.ScheduleSpec{Name: "added", Spec: "@every 1m", Request: "tick",
			Payload: []byte(`{"Schedule":"added"}`)}, "ops"))
		clock.Advance(time.Minute)
		for _, name := range []string{"added", "code"} {
			rs := waitRuns(t, op, name, 1)
			if rs[0].Outcome != record.OutcomeSkipped || !strings.Contains(rs[0].Error, `request name "tick" is paused by alice until resumed`) {
				t.Fatalf("%s: run %+v; want skipped, saying the request name is paused", name, rs[0])
			}
		}
		must[record.ScheduleInfo](t)(op.RunScheduleNow(ctx, "added", "bob"))
		rs := waitRuns(t, op, "added", 2)
		if rs[1].Outcome != record.OutcomeSkipped || rs[1].RunNowBy != "bob" || !strings.Contains(rs[1].Error, `request name "tick" is paused`) {
			t.Fatalf("run asked for now: %+v; want skipped, saying the request name is paused", rs[1])
		}
		if c := calls(); len(c) != 0 {
			t.Fatalf("calls %v while the request name was paused", c)
		}
		must[bool](t)(op.Resume(ctx, durable.NameTarget("tick"), "alice"))
		clock.Advance(time.Minute)
		if rs := waitRuns(t, op, "added", 3); rs[2].Outcome != record.OutcomeSucceeded {
			t.Fatalf("run after the resume: %+v", rs[2])
		}
		if rs := waitRuns(t, op, "code", 2); rs[1].Outcome != record.OutcomeSucceeded {
			t.Fatalf("run after the resume: %+v", rs[1])
		}
	})
}

// RunNow of an item that a pause holds back, of its name, of the key it is parked on or of
// its breaker key, changes nothing and says so (ItemPaused), and the audit log names the
// pause; an item of a key not paused is made due. Cancel is not held back.
func TestRunNowOfAnItemHeldByAPauseChangesNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		q := b.queue(t, durable.Config{})
		st := durable.StoreOf(q)
		now := time.Now()
		later := now.Add(time.Hour).Truncate(time.Microsecond) // as stored
		enqueue := func(it istore.NewItem) record.ItemID {
			t.Helper()
			it.Payload, it.Now = []byte(`{}`), now
			if it.NextAt.IsZero() {
				it.NextAt = later
			}
			id, _, err := st.Enqueue(ctx, it)
			if err != nil {
				t.Fatal(err)
			}
			return record.ItemID(id)
		}
		byName := enqueue(istore.NewItem{Name: "test.work"})
		parked := enqueue(istore.NewItem{Name: "test.keyed", ParkedKey: "smtp"})
		guarded := enqueue(istore.NewItem{Name: "test.keyed", GuardKey: "smtp"})
		free := enqueue(istore.NewItem{Name: "test.keyed", ParkedKey: "api"})
		must[record.Pause](t)(q.Pause(ctx, durable.NameTarget("test.work"), "alice", durable.PauseReason("deploy")))
		must[record.Pause](t)(q.Pause(ctx, durable.KeyTarget("smtp"), "carol", durable.PauseUntil(later)))
		for _, c := range []struct {
			id     record.ItemID
			detail string
		}{
			{byName, "held back by the pause of name test.work by alice until resumed"},
			{parked, "held back by the pause of breaker_key smtp by carol until " + later.UTC().Format(time.RFC3339Nano)},
			{guarded, "held back by the pause of breaker_key smtp by carol"},
		} {
			before := item(t, q, c.id)
			res, err := q.RunNow(ctx, c.id, "bob")
			if err != nil || res != durable.ItemPaused {
				t.Fatalf("RunNow of item %d: %s, %v; want %s", c.id, res, err, durable.ItemPaused)
			}
			if after := item(t, q, c.id); after.State != record.StatePending || !after.NextAt.Equal(before.NextAt) || after.ParkedKey != before.ParkedKey {
				t.Fatalf("item %d after RunNow: %+v; want it unchanged (%+v)", c.id, after, before)
			}
			e := must[[]record.AuditEntry](t)(q.Audit(ctx, durable.AuditFilter{Limit: 1}))[0]
			if e.Action != record.AuditRunNow || e.Actor != "bob" || e.Outcome != record.AuditNoChange || !strings.Contains(e.Detail, c.detail) {
				t.Fatalf("audit of the RunNow of item %d: %+v; want no_change, detail naming %q", c.id, e, c.detail)
			}
		}
		if res := must[durable.ItemResult](t)(q.RunNow(ctx, free, "bob")); res != durable.ItemDue {
			t.Fatalf("RunNow of an item of a key not paused: %s", res)
		}
		if it := item(t, q, free); it.ParkedKey != "" || it.NextAt.After(time.Now()) {
			t.Fatalf("item of a key not paused after RunNow: %+v; want due, not parked", it)
		}
		if res := must[durable.ItemResult](t)(q.Cancel(ctx, byName, "bob", "not needed")); res != durable.ItemCancelled {
			t.Fatalf("Cancel of a paused name's item: %s; want cancelled", res)
		}
	})
}

// Resume of a key that was not paused frees nothing: the items a breaker parked on the key
// keep waiting for it, and the audit log's "no change" is true. Resume of a paused key frees
// its parked items at once.
func TestResumeOfAKeyNotPausedFreesNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		q := b.queue(t, durable.Config{})
		now := time.Now()
		enqueue := func(key string) record.ItemID {
			t.Helper()
			id, _, err := durable.StoreOf(q).Enqueue(ctx, istore.NewItem{Name: "test.work", Payload: []byte(`{}`), NextAt: now.Add(time.Hour), Now: now, ParkedKey: key})
			if err != nil {
				t.Fatal(err)
			}
			return record.ItemID(id)
		}
		byBreaker, byPause := enqueue("api"), enqueue("smtp")
		before := item(t, q, byBreaker)
		if must[bool](t)(q.Resume(ctx, durable.KeyTarget("api"), "bob")) {
			t.Fatal("Resume of a key not paused reported a pause")
		}
		if it := item(t, q, byBreaker); it.ParkedKey != "api" || !it.NextAt.Equal(before.NextAt) {
			t.Fatalf("item a breaker parked, after the resume of its key not paused: %+v; want unchanged (%+v)", it, before)
		}
		if e := must[[]record.AuditEntry](t)(q.Audit(ctx, durable.AuditFilter{Limit: 1}))[0]; e.Outcome != record.AuditNoChange || e.Detail != "not paused" {
			t.Fatalf("audit of the resume: %+v", e)
		}
		must[record.Pause](t)(q.Pause(ctx, durable.KeyTarget("smtp"), "alice"))
		if !must[bool](t)(q.Resume(ctx, durable.KeyTarget("smtp"), "bob")) {
			t.Fatal("Resume of a paused key reported no pause")
		}
		if it := item(t, q, byPause); it.ParkedKey != "" || it.NextAt.After(time.Now()) {
			t.Fatalf("item parked on a resumed key: %+v; want due now, not parked", it)
		}
	})
}

// An item parked by a key's pause keeps the error of its last attempt: the pause is no
// attempt, and a deadline passing under the pause ends the item with that error.
func TestBubbleKeyPauseKeepsTheLastError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := bubbleQueue(t, path, fastPolicy)
		var settled settledLog
		s := bubbleScheduler(t, q, handlers{}, durable.SchedulerConfig{PollInterval: time.Second, OnSettled: []func(string, record.Settled){settled.on}})
		must[record.Pause](t)(q.Pause(ctx, durable.KeyTarget("host-a"), "alice"))
		now := time.Now()
		id, _, err := durable.StoreOf(q).Enqueue(ctx, istore.NewItem{Name: "test.work", Payload: []byte(`{}`), NextAt: now, Now: now,
			GuardKey: "host-a", LastError: "smtp 421 try later", Deadline: now.Add(30 * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		s.Wake()
		synctest.Wait()
		it := item(t, q, record.ItemID(id))
		if it.State != record.StatePending || it.ParkedKey != "host-a" || it.Attempts != 0 || it.LastError != "smtp 421 try later" {
			t.Fatalf("item parked by the pause: %+v; want parked on host-a, no attempt, its last error kept", it)
		}
		if !strings.Contains(settled.String(), "test.work:paused") {
			t.Fatalf("settled %q: want a paused outcome", settled.String())
		}
		time.Sleep(31 * time.Second)
		synctest.Wait()
		it = item(t, q, record.ItemID(id))
		if it.State != record.StateDead || !strings.Contains(it.LastError, "deadline passed") || !strings.Contains(it.LastError, "smtp 421 try later") {
			t.Fatalf("item whose deadline passed under the pause: %+v; want dead with its last error", it)
		}
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
