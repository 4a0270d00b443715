package durable_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/driver"
	istore "github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
)

// parkItems stores n pending items of test.work parked on the breaker key, due in an hour (by
// e's clock, which the tests do not move: the scheduler never claims them).
func parkItems(t *testing.T, e *env, key string, n int) []record.ItemID {
	t.Helper()
	var ids []record.ItemID
	for range n {
		id, _, err := e.store.Enqueue(context.Background(), istore.NewItem{Name: "test.work", Payload: []byte(`{"n":0}`),
			NextAt: e.clock.Now().Add(time.Hour), Now: e.clock.Now(), ParkedKey: key})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, record.ItemID(id))
	}
	return ids
}

// waitItemAction polls action id until cond holds.
func waitItemAction(t *testing.T, q *durable.Queue, id record.BulkActionID, what string, cond func(a durable.ItemBulkAction) bool) durable.ItemBulkAction {
	t.Helper()
	var a durable.ItemBulkAction
	eventually(t, 60*time.Second, what, func() bool {
		var err error
		if a, err = q.ItemBulkAction(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		return cond(a)
	})
	return a
}

func itemActionFinished(a durable.ItemBulkAction) bool { return a.State.Finished() }

// A cancel by breaker key: the dry run counts and samples the pending items of the key and
// stores nothing; the action cancels exactly those items, skips the one a scheduler claimed
// meanwhile (its handler is not interrupted), leaves the items of other keys and the item of
// the key enqueued after it started untouched, and is audited with its filter and totals.
func TestItemBulkCancelByKey(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		e := newEnv(t, b)
		mail := parkItems(t, e, "breaker:mail", 5)
		sms := parkItems(t, e, "breaker:sms", 2)
		plain := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 1}, durable.WithDelay(time.Hour))).ID
		busy, _, err := e.store.Enqueue(ctx, istore.NewItem{Name: "test.work", Payload: []byte(`{"n":0}`), NextAt: e.clock.Now(), Now: e.clock.Now(),
			ParkedKey: "breaker:mail"})
		if err != nil {
			t.Fatal(err)
		}
		spec := durable.ItemBulkActionSpec{Kind: record.BulkCancelItems, Filter: durable.ItemFilter{Key: "breaker:mail"}, Reason: "mail is retired", Rate: 1000}

		dry, err := e.q.StartItemBulkAction(ctx, spec, "alice", durable.DryRun())
		if err != nil || dry.ID != 0 || dry.Matched != 6 || len(dry.Sample) != 6 {
			t.Fatalf("dry run: %+v, %v", dry, err)
		}
		for _, it := range dry.Sample {
			if it.ParkedKey != "breaker:mail" || it.State != record.StatePending {
				t.Fatalf("sample item %+v", it)
			}
		}
		if list, err := e.q.ItemBulkActions(ctx, 0, 0); err != nil || len(list) != 0 {
			t.Fatalf("a dry run stored %+v, %v", list, err)
		}

		a, err := e.q.StartItemBulkAction(ctx, spec, "alice")
		if err != nil || a.ID == 0 || a.State != record.BulkQueued || a.Matched != 6 {
			t.Fatalf("start: %+v, %v", a, err)
		}
		// Another instance claims the due one before the action reaches it; an item of the key
		// is enqueued after the action started.
		claimed := must[[]istore.Claimed](t)(e.store.Claim(ctx, "elsewhere", e.clock.Now(), time.Hour, 10))
		if len(claimed) != 1 || claimed[0].ItemRow.ID != busy {
			t.Fatalf("claimed %+v, want item %d", claimed, busy)
		}
		late := parkItems(t, e, "breaker:mail", 1)[0]

		start(t, e.q, mediatorFor(t, handlers{}), durable.SchedulerConfig{})
		a = waitItemAction(t, e.q, a.ID, "the cancel to finish", itemActionFinished)
		if a.State != record.BulkDone || a.Changed != 5 || a.Skipped != 1 || a.Cursor != mail[4] || a.Actor != "alice" || a.Filter.Key != "breaker:mail" {
			t.Fatalf("action %+v", a)
		}
		for _, id := range mail {
			if it := item(t, e.q, id); it.State != record.StateCancelled {
				t.Errorf("item %d of the key: %s", id, it.State)
			}
		}
		for _, id := range append(slices.Clone(sms), plain, late) {
			if it := item(t, e.q, id); it.State != record.StatePending {
				t.Errorf("item %d outside the action: %s", id, it.State)
			}
		}
		if it := item(t, e.q, record.ItemID(busy)); it.State != record.StateRunning {
			t.Errorf("the claimed item: %s", it.State)
		}
		audit := must[[]record.AuditEntry](t)(e.q.Audit(ctx, durable.AuditFilter{TargetKind: record.AuditTargetBulkAction, Target: fmt.Sprint(a.ID)}))
		var got []string
		for _, en := range audit {
			got = append(got, fmt.Sprintf("%s %s %s", en.Actor, en.Action, en.Detail))
		}
		want := []string{`alice end_bulk_action done; 5 of 6 matched items changed, 1 skipped`,
			`alice bulk_cancel filter {"key":"breaker:mail","parked":true}; 6 pending items; reason: mail is retired`}
		if !slices.Equal(got, want) {
			t.Fatalf("audit:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		// The listing of item actions has it; the one of letter actions does not.
		if list := must[[]durable.ItemBulkAction](t)(e.q.ItemBulkActions(ctx, 0, 0)); len(list) != 1 || list[0].ID != a.ID {
			t.Fatalf("item actions %+v", list)
		}
		if list := must[[]durable.BulkAction](t)(e.q.BulkActions(ctx, 0, 0)); len(list) != 0 {
			t.Fatalf("letter actions %+v", list)
		}
		if _, err := e.q.BulkAction(ctx, a.ID); !errors.Is(err, durable.ErrNotFound) {
			t.Fatalf("an item action read as a letter action: %v", err)
		}
	})
}

// A priority change by name gives the priority to the pending items of the name alone; a
// run-now makes them due and the scheduler runs them, skipping an item a pause of its name
// holds back (a run-now does not bypass a pause).
func TestItemBulkSetPriorityAndRunNow(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		e := newEnv(t, b)
		var works, keyed []record.ItemID
		for i := range 3 {
			works = append(works, must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: i}, durable.WithDelay(time.Hour))).ID)
			keyed = append(keyed, must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Keyed{Key: fmt.Sprint("k", i), Seq: i}, durable.WithDelay(time.Hour))).ID)
		}
		start(t, e.q, mediatorFor(t, handlers{}), durable.SchedulerConfig{})

		p, err := e.q.StartItemBulkAction(ctx, durable.ItemBulkActionSpec{Kind: record.BulkSetItemPriority, Filter: durable.ItemFilter{Name: "test.work"},
			Priority: 7, Rate: 1000}, "alice")
		if err != nil {
			t.Fatal(err)
		}
		p = waitItemAction(t, e.q, p.ID, "the priority change to finish", itemActionFinished)
		if p.State != record.BulkDone || p.Changed != 3 || p.Skipped != 0 || p.Priority != 7 {
			t.Fatalf("set priority: %+v", p)
		}
		for _, id := range works {
			if it := item(t, e.q, id); it.Priority != 7 || it.State != record.StatePending {
				t.Errorf("item %d: priority %d, %s", id, it.Priority, it.State)
			}
		}
		for _, id := range keyed {
			if it := item(t, e.q, id); it.Priority != 0 {
				t.Errorf("item %d of another name: priority %d", id, it.Priority)
			}
		}

		if _, err := e.q.Pause(ctx, durable.NameTarget("test.keyed"), "ops", durable.PauseReason("maintenance")); err != nil {
			t.Fatal(err)
		}
		r, err := e.q.StartItemBulkAction(ctx, durable.ItemBulkActionSpec{Kind: record.BulkRunItemsNow, Rate: 1000}, "bob")
		if err != nil || r.Matched != 6 {
			t.Fatalf("run now: %+v, %v", r, err)
		}
		r = waitItemAction(t, e.q, r.ID, "the run-now to finish", itemActionFinished)
		if r.State != record.BulkDone || r.Changed != 3 || r.Skipped != 3 {
			t.Fatalf("run now: %+v", r)
		}
		for _, id := range works {
			waitState(t, e.q, id, record.StateSucceeded)
		}
		for _, id := range keyed {
			if it := item(t, e.q, id); it.State != record.StatePending || !it.NextAt.After(e.clock.Now()) {
				t.Errorf("paused item %d: %s due %v", id, it.State, it.NextAt)
			}
		}
	})
}

// A bad spec is refused naming every problem, nothing is stored, and an identical unfinished
// action is refused naming it.
func TestItemBulkActionSpecInvalid(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, sqliteBackend(t))
	now := time.Now()
	_, err := e.q.StartItemBulkAction(ctx, durable.ItemBulkActionSpec{Kind: record.BulkCancelItems, Priority: 3,
		Filter: durable.ItemFilter{State: record.StateRunning, Limit: 5, From: now, To: now}, Rate: -1}, " ")
	for _, want := range []string{"actor is required", "Reason is required for a cancel", `Priority 3 is set with Kind "cancel"`,
		`Filter.State "running"`, "Filter.After and Filter.Limit", "Filter.From", "Rate -1"} {
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, durable.ErrInvalidBulkAction) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
	for kind, want := range map[record.BulkActionKind]string{"": "Kind is required", "replay": `Kind "replay" is not cancel, run_now or set_priority`} {
		if _, err := e.q.StartItemBulkAction(ctx, durable.ItemBulkActionSpec{Kind: kind}, "alice"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("kind %q: error %v", kind, err)
		}
	}
	for _, p := range []int{-1, durable.MaxPriority + 1} {
		_, err := e.q.StartItemBulkAction(ctx, durable.ItemBulkActionSpec{Kind: record.BulkSetItemPriority, Priority: p}, "alice")
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("Priority %d is out of range 0..9", p)) {
			t.Errorf("priority %d: error %v", p, err)
		}
	}
	if _, err := e.q.StartBulkAction(ctx, durable.BulkActionSpec{Kind: record.BulkCancelItems}, "alice"); err == nil || !strings.Contains(err.Error(), `Kind "cancel"`) {
		t.Errorf("an item kind on letters: %v", err)
	}
	if list := must[[]durable.ItemBulkAction](t)(e.q.ItemBulkActions(ctx, 0, 0)); len(list) != 0 {
		t.Fatalf("stored %+v", list)
	}

	spec := durable.ItemBulkActionSpec{Kind: record.BulkRunItemsNow, Filter: durable.ItemFilter{Name: "test.work"}}
	first := must[durable.ItemBulkAction](t)(e.q.StartItemBulkAction(ctx, spec, "alice"))
	_, err = e.q.StartItemBulkAction(ctx, spec, "bob")
	if active := (*driver.BulkActionActiveError)(nil); !errors.Is(err, durable.ErrBulkActionActive) || !errors.As(err, &active) || active.ID != int64(first.ID) {
		t.Fatalf("identical action: %v", err)
	}
	spec.Filter.Name = "test.keyed" // another filter is another action
	must[durable.ItemBulkAction](t)(e.q.StartItemBulkAction(ctx, spec, "bob"))

	for _, id := range []record.BulkActionID{4242} {
		if _, err := e.q.ItemBulkAction(ctx, id); !errors.Is(err, durable.ErrNotFound) {
			t.Errorf("unknown action: %v", err)
		}
		if _, err := e.q.CancelItemBulkAction(ctx, id, "alice", ""); !errors.Is(err, durable.ErrNotFound) {
			t.Errorf("cancel unknown action: %v", err)
		}
	}
	if _, err := e.q.CancelBulkAction(ctx, first.ID, "alice", ""); !errors.Is(err, durable.ErrNotFound) {
		t.Errorf("an item action cancelled as a letter action: %v", err)
	}
	c, err := e.q.CancelItemBulkAction(ctx, first.ID, "carol", "wrong filter")
	if err != nil || c.State != record.BulkCancelled {
		t.Fatalf("cancel: %+v, %v", c, err)
	}
	must[durable.ItemBulkAction](t)(e.q.StartItemBulkAction(ctx, durable.ItemBulkActionSpec{Kind: record.BulkRunItemsNow, Filter: durable.ItemFilter{Name: "test.work"}}, "bob"))
}

// The throttle, on the bubble's clock: at one item a second, the action changes one item at
// its start and one more each second; a cancel stops it there, and the items after stay
// pending.
func TestBubbleItemBulkThrottleAndCancel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := bubbleQueue(t, path, fastPolicy)
		var ids []record.ItemID
		for i := range 6 {
			ids = append(ids, must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: i}, durable.WithDelay(time.Hour))).ID)
		}
		s := bubbleScheduler(t, q, handlers{}, durable.SchedulerConfig{PollInterval: time.Second})
		a := must[durable.ItemBulkAction](t)(q.StartItemBulkAction(ctx, durable.ItemBulkActionSpec{Kind: record.BulkCancelItems, Reason: "drain", Rate: 1}, "alice"))
		time.Sleep(2500 * time.Millisecond)
		synctest.Wait()
		if got := must[durable.ItemBulkAction](t)(q.ItemBulkAction(ctx, a.ID)); got.Changed != 3 || got.State != record.BulkRunning || got.Cursor != ids[2] {
			t.Fatalf("after 2.5 s at one item a second: %+v", got)
		}
		c, err := q.CancelItemBulkAction(ctx, a.ID, "bob", "enough")
		if err != nil || c.State != record.BulkCancelled {
			t.Fatalf("cancel: %+v, %v", c, err)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		got := must[durable.ItemBulkAction](t)(q.ItemBulkAction(ctx, a.ID))
		if got.Changed != 3 || got.State != record.BulkCancelled {
			t.Fatalf("after the cancel: %+v", got)
		}
		for i, id := range ids {
			want := record.StatePending
			if i < 3 {
				want = record.StateCancelled
			}
			if it := item(t, q, id); it.State != want {
				t.Errorf("item %d: %s, want %s", i, it.State, want)
			}
		}
		entries := must[[]record.AuditEntry](t)(q.Audit(ctx, durable.AuditFilter{TargetKind: record.AuditTargetBulkAction}))
		if len(entries) == 0 || entries[0].Action != record.AuditCancelBulkAction || entries[0].Detail != "enough; 3 of 6 matched items changed, 0 skipped" {
			t.Fatalf("audit %+v", entries)
		}
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// A fleet of three schedulers on one database: the action is taken up by one at a time (the
// lease), every item is changed once, and its end is audited once.
func TestItemBulkFleetTakesItUpOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		clock := newFakeClock()
		var qs []*durable.Queue
		for i := range 3 {
			q := b.queue(t, durable.Config{Policy: fastPolicy, Clock: clock, InstanceID: fmt.Sprint("i", i)})
			start(t, q, mediatorFor(t, handlers{}), durable.SchedulerConfig{InstanceID: fmt.Sprint("i", i)})
			qs = append(qs, q)
		}
		var ids []record.ItemID
		for i := range 40 {
			ids = append(ids, must[durable.Enqueued](t)(qs[i%3].Enqueue(ctx, &Work{N: i}, durable.WithDelay(time.Hour))).ID)
		}
		a := must[durable.ItemBulkAction](t)(qs[1].StartItemBulkAction(ctx, durable.ItemBulkActionSpec{Kind: record.BulkSetItemPriority, Priority: 4,
			Rate: 100000}, "alice"))
		a = waitItemAction(t, qs[2], a.ID, "the fleet to finish the action", itemActionFinished)
		if a.State != record.BulkDone || a.Changed != 40 || a.Skipped != 0 || a.Cursor != ids[39] {
			t.Fatalf("action %+v", a)
		}
		for _, id := range ids {
			if it := item(t, qs[0], id); it.Priority != 4 {
				t.Errorf("item %d: priority %d", id, it.Priority)
			}
		}
		ends := 0
		for _, en := range must[[]record.AuditEntry](t)(qs[0].Audit(ctx, durable.AuditFilter{TargetKind: record.AuditTargetBulkAction})) {
			if en.Action == record.AuditEndBulkAction {
				ends++
			}
		}
		if ends != 1 {
			t.Fatalf("%d end entries", ends)
		}
	})
}

// An instance that took the action up and died after two items leaves it to the next once its
// lease runs out: the next goes on from the cursor, so no item is changed or counted twice.
func TestBubbleItemBulkTakenOverAfterACrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := bubbleQueue(t, path, fastPolicy)
		var ids []record.ItemID
		for i := range 5 {
			ids = append(ids, must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: i}, durable.WithDelay(time.Hour))).ID)
		}
		a := must[durable.ItemBulkAction](t)(q.StartItemBulkAction(ctx, durable.ItemBulkActionSpec{Kind: record.BulkCancelItems, Reason: "drain", Rate: 1000}, "alice"))
		st := durable.StoreOf(q)
		lease := 30 * time.Second
		row, found, err := st.ClaimBulkAction(ctx, "dead", time.Now(), time.Now().Add(lease))
		if err != nil || !found || row.ID != int64(a.ID) {
			t.Fatalf("claim: %+v %v %v", row, found, err)
		}
		change := istore.ItemBulkChange{Kind: record.BulkCancelItems}
		for i, from := range []record.ItemID{0, ids[0]} {
			if held, changed, err := st.StepItemBulkAction(ctx, row.ID, "dead", from, ids[i], change, time.Now()); err != nil || !held || !changed {
				t.Fatalf("dead instance's step %d: %v %v %v", i, held, changed, err)
			}
		}
		// Its cursor is ids[1]: a step from an older cursor, or by another owner, changes nothing.
		if held, _, err := st.StepItemBulkAction(ctx, row.ID, "dead", 0, ids[2], change, time.Now()); err != nil || held {
			t.Fatalf("a step from a stale cursor: held %v, %v", held, err)
		}
		if held, _, err := st.StepItemBulkAction(ctx, row.ID, "other", ids[1], ids[2], change, time.Now()); err != nil || held {
			t.Fatalf("a step by another owner: held %v, %v", held, err)
		}
		if it := item(t, q, ids[2]); it.State != record.StatePending {
			t.Fatalf("an item changed by a step that did not hold the action: %s", it.State)
		}
		died := time.Now()
		s := bubbleScheduler(t, q, handlers{}, durable.SchedulerConfig{InstanceID: "live", Lease: lease, PollInterval: time.Second})
		for {
			got := must[durable.ItemBulkAction](t)(q.ItemBulkAction(ctx, a.ID))
			if got.State.Finished() {
				if got.State != record.BulkDone || got.Changed != 5 || got.Skipped != 0 || time.Since(died) < lease {
					t.Fatalf("after the takeover (%v after the crash): %+v", time.Since(died), got)
				}
				break
			}
			time.Sleep(time.Second)
		}
		for _, id := range ids {
			if it := item(t, q, id); it.State != record.StateCancelled {
				t.Errorf("item %d: %s", id, it.State)
			}
		}
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
