package durable_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
	istore "github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// TestItemsPages: a listing pages through every item it selects once, oldest first, by cursor,
// with the filters of state, name, parked key and creation time applied.
func TestItemsPages(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		var works, parked, due []record.ItemID // due: the items not parked
		for i := range 12 {
			if i%3 == 0 {
				id, _, err := e.store.Enqueue(ctx, istore.NewItem{Name: "test.work", Payload: []byte(`{"n":0}`), NextAt: e.clock.Now().Add(time.Hour),
					Now: e.clock.Now(), ParkedKey: "breaker:mail"})
				if err != nil {
					t.Fatal(err)
				}
				parked = append(parked, record.ItemID(id))
			} else if i%3 == 1 {
				id := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: i})).ID
				works, due = append(works, id), append(due, id)
			} else {
				due = append(due, must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Keyed{Key: "k", Seq: i})).ID)
			}
			e.clock.Advance(time.Second)
		}
		all := func(f durable.ItemFilter) []record.ItemID {
			t.Helper()
			var ids []record.ItemID
			for {
				page := must[durable.ItemPage](t)(e.q.Items(ctx, f))
				if len(page.Items) > f.Limit && f.Limit > 0 {
					t.Fatalf("page of %d items, limit %d", len(page.Items), f.Limit)
				}
				for _, it := range page.Items {
					ids = append(ids, it.ID)
				}
				if page.Next == "" {
					return ids
				}
				f.After = page.Next
			}
		}
		// Pending items are listed in the order they run: the parked ones are due in an hour.
		if got, want := all(durable.ItemFilter{Limit: 5}), append(slices.Clone(due), parked...); !slices.Equal(got, want) {
			t.Errorf("pending: %v, want %v", got, want)
		}
		if got, want := all(durable.ItemFilter{Name: "test.work", Limit: 3}), append(slices.Clone(works), parked...); !slices.Equal(got, want) {
			t.Errorf("test.work: %v, want %v", got, want)
		}
		if got := all(durable.ItemFilter{State: record.StatePending, Parked: true, Limit: 1}); !slices.Equal(got, parked) {
			t.Errorf("parked: %v, want %v", got, parked)
		}
		t0 := item(t, e.q, parked[0]).NextAt
		if got := all(durable.ItemFilter{Key: "breaker:mail", From: t0.Add(time.Second), To: t0.Add(7 * time.Second)}); !slices.Equal(got, parked[1:3]) {
			t.Errorf("parked on breaker:mail due in [t0+1s, t0+7s): %v, want %v", got, parked[1:3])
		}
		if got := all(durable.ItemFilter{Key: "breaker:other"}); len(got) != 0 {
			t.Errorf("parked on another key: %v", got)
		}
		if got := all(durable.ItemFilter{State: record.StateCancelled}); len(got) != 0 {
			t.Errorf("cancelled: %v", got)
		}
		page := must[durable.ItemPage](t)(e.q.Items(ctx, durable.ItemFilter{Limit: 12}))
		if page.Next != "" || len(page.Items) != 12 || string(page.Items[0].Payload) != `{"n":1}` {
			t.Errorf("one full page: next %q, %d items", page.Next, len(page.Items))
		}
	})
}

// TestItemFilterRefusesBadInput: every problem of a filter is named.
func TestItemFilterRefusesBadInput(t *testing.T) {
	q := typesQueue(t)
	now := time.Now()
	_, err := q.Items(context.Background(), durable.ItemFilter{State: "paused", Limit: 501, After: "nope", From: now, To: now})
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{`State "paused"`, "Limit 501", `After "nope"`, "the range is empty"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	// A time the stored microseconds cannot hold matched nothing, silently.
	_, err = q.Items(context.Background(), durable.ItemFilter{To: time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err == nil || !strings.Contains(err.Error(), "To 300000-01-01T00:00:00Z is not between the years 1 and 9999") {
		t.Errorf("a To in the year 300000: %v", err)
	}
	_, err = q.Items(context.Background(), durable.ItemFilter{State: record.StateDead, Key: "k"})
	if err == nil || !strings.Contains(err.Error(), `Key is set with State "dead"`) {
		t.Errorf("key with dead: %v", err)
	}
}

// TestCancel: a pending or parked item is cancelled, kept, audited, and its dedupe key freed; a
// running item is not interrupted and the answer says so; a finished one is left as it is.
func TestCancel(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		first := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Unique{ID: "u1"}))
		if _, err := e.q.Cancel(ctx, first.ID, "", " "); err == nil || !strings.Contains(err.Error(), "actor is required") ||
			!strings.Contains(err.Error(), "reason is required") {
			t.Fatalf("cancel without actor and reason: %v", err)
		}
		if res := must[durable.ItemResult](t)(e.q.Cancel(ctx, first.ID, "ops", "sent by mistake")); res != durable.ItemCancelled {
			t.Fatalf("cancel pending: %q", res)
		}
		it := item(t, e.q, first.ID)
		if it.State != record.StateCancelled || it.Attempts != 0 || string(it.Payload) != `{"id":"u1"}` {
			t.Fatalf("cancelled item: %+v", it)
		}
		again := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Unique{ID: "u1"}))
		if again.Duplicate || again.ID == first.ID {
			t.Errorf("enqueue with the cancelled item's dedupe key: %+v, want a new item", again)
		}
		if res := must[durable.ItemResult](t)(e.q.Cancel(ctx, first.ID, "ops", "twice")); res != durable.ItemFinished {
			t.Errorf("cancel cancelled: %q", res)
		}
		if res := must[durable.ItemResult](t)(e.q.Cancel(ctx, 987654, "ops", "gone")); res != durable.ItemNotFound {
			t.Errorf("cancel unknown: %q", res)
		}
		parked, _, err := e.store.Enqueue(ctx, istore.NewItem{Name: "test.work", Payload: []byte(`{}`), NextAt: e.clock.Now().Add(time.Hour),
			Now: e.clock.Now(), ParkedKey: "breaker:mail"})
		if err != nil {
			t.Fatal(err)
		}
		if res := must[durable.ItemResult](t)(e.q.Cancel(ctx, record.ItemID(parked), "ops", "mail is retired")); res != durable.ItemCancelled {
			t.Errorf("cancel parked: %q", res)
		}
		if it := item(t, e.q, record.ItemID(parked)); it.State != record.StateCancelled || it.ParkedKey != "" {
			t.Errorf("cancelled parked item: %+v", it)
		}

		// A running item: the cancel answers that it runs; the handler finishes undisturbed.
		started, release := make(chan struct{}), make(chan struct{})
		var handlerErr error
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			close(started)
			<-release
			handlerErr = ctx.Err()
			return nil
		}})
		running := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 1}))
		start(t, e.q, m, durable.SchedulerConfig{PollInterval: time.Hour})
		<-started
		if res := must[durable.ItemResult](t)(e.q.Cancel(ctx, running.ID, "ops", "too late")); res != durable.ItemRunning {
			t.Errorf("cancel running: %q", res)
		}
		close(release)
		waitState(t, e.q, running.ID, record.StateSucceeded)
		if handlerErr != nil {
			t.Errorf("the running handler's context ended: %v", handlerErr)
		}
		if n := stats(t, e.q).Counts[record.StateCancelled]; n != 2 {
			t.Errorf("stats: %d cancelled, want 2", n)
		}
		log := must[[]record.AuditEntry](t)(e.q.Audit(ctx, durable.AuditFilter{TargetKind: record.AuditTargetItem}))
		var got []string
		for _, a := range log {
			got = append(got, string(a.Action)+" "+a.Target+" "+string(a.Outcome)+" "+a.Actor+": "+a.Detail)
		}
		want := []string{
			"cancel " + strconv.FormatInt(int64(running.ID), 10) + " no_change ops: the item is running; it was not interrupted; reason: too late",
			"cancel " + strconv.FormatInt(int64(parked), 10) + " done ops: reason: mail is retired",
			"cancel " + strconv.FormatInt(int64(first.ID), 10) + " no_change ops: the item had finished: cancelled; reason: twice",
			"cancel " + strconv.FormatInt(int64(first.ID), 10) + " done ops: reason: sent by mistake",
		}
		if !slices.Equal(got, want) {
			t.Errorf("audit:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// TestCancelRacesClaims: cancels racing claims of the same items; each item either ran (the
// claim won: the cancel says it runs or has finished) or never will (cancelled, no attempt).
func TestCancelRacesClaims(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		const n = 200
		ids := make([]record.ItemID, n)
		for i := range ids {
			ids[i] = must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: i})).ID
		}
		claimed := map[record.ItemID]bool{}
		results := make([]durable.ItemResult, n)
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				cs, err := e.store.Claim(ctx, "w1", e.clock.Now(), time.Hour, 7)
				if err != nil {
					t.Error(err)
					return
				}
				if len(cs) == 0 {
					return
				}
				for _, c := range cs {
					claimed[record.ItemID(c.ID)] = true
				}
			}
		})
		wg.Go(func() {
			for i, id := range ids {
				var err error
				if results[i], err = e.q.Cancel(ctx, id, "ops", "race"); err != nil {
					t.Error(err)
				}
			}
		})
		wg.Wait()
		for i, id := range ids {
			it := item(t, e.q, id)
			switch {
			case claimed[id] && (results[i] != durable.ItemRunning || it.State != record.StateRunning):
				t.Errorf("item %d claimed: cancel %q, state %s", id, results[i], it.State)
			case !claimed[id] && (results[i] != durable.ItemCancelled || it.State != record.StateCancelled || it.Attempts != 0):
				t.Errorf("item %d not claimed: cancel %q, state %s, %d attempts", id, results[i], it.State, it.Attempts)
			}
		}
	})
}

// TestRunNow: an item due in an hour, or parked, runs at once on the instance's scheduler
// (whose next poll is an hour away); a running one is left as it is.
func TestRunNow(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		m := mediatorFor(t, handlers{})
		claimed := make(chan struct{}, 100)
		start(t, e.q, m, durable.SchedulerConfig{PollInterval: time.Hour, OnClaim: []func(time.Duration, int, error){
			func(time.Duration, int, error) { claimed <- struct{}{} }}})
		<-claimed // its first look found nothing: the next poll is an hour away
		later := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 1}, durable.WithDelay(time.Hour)))
		if _, err := e.q.RunNow(ctx, later.ID, ""); err == nil || !strings.Contains(err.Error(), "actor is required") {
			t.Fatalf("run now without actor: %v", err)
		}
		if res := must[durable.ItemResult](t)(e.q.RunNow(ctx, later.ID, "ops")); res != durable.ItemDue {
			t.Fatalf("run now: %q", res)
		}
		waitState(t, e.q, later.ID, record.StateSucceeded)
		parked, _, err := e.store.Enqueue(ctx, istore.NewItem{Name: "test.work", Payload: []byte(`{}`), NextAt: e.clock.Now().Add(time.Hour),
			Now: e.clock.Now(), ParkedKey: "breaker:mail"})
		if err != nil {
			t.Fatal(err)
		}
		if res := must[durable.ItemResult](t)(e.q.RunNow(ctx, record.ItemID(parked), "ops")); res != durable.ItemDue {
			t.Fatalf("run now parked: %q", res)
		}
		waitState(t, e.q, record.ItemID(parked), record.StateSucceeded)
		if res := must[durable.ItemResult](t)(e.q.RunNow(ctx, later.ID, "ops")); res != durable.ItemFinished {
			t.Errorf("run now finished: %q", res)
		}
		if res := must[durable.ItemResult](t)(e.q.RunNow(ctx, 987654, "ops")); res != durable.ItemNotFound {
			t.Errorf("run now unknown: %q", res)
		}
		log := must[[]record.AuditEntry](t)(e.q.Audit(ctx, durable.AuditFilter{TargetKind: record.AuditTargetItem, Target: strconv.FormatInt(int64(later.ID), 10)}))
		if len(log) != 2 || log[1].Action != record.AuditRunNow || log[1].Outcome != record.AuditDone || log[0].Outcome != record.AuditNoChange ||
			log[0].Detail != "the item had finished: succeeded" {
			t.Errorf("audit: %+v", log)
		}
	})
}

// TestItemsCallerCancellation: a caller's cancelled context is returned as such, not as a
// result.
func TestItemsCallerCancellation(t *testing.T) {
	q := typesQueue(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	id := must[durable.Enqueued](t)(q.Enqueue(context.Background(), &Work{N: 1})).ID
	if res, err := q.Cancel(ctx, id, "ops", "x"); !errors.Is(err, context.Canceled) || res != "" {
		t.Errorf("cancel: %q, %v", res, err)
	}
	if _, err := q.Items(ctx, durable.ItemFilter{}); !errors.Is(err, context.Canceled) {
		t.Errorf("items: %v", err)
	}
	if it := item(t, q, id); it.State != record.StatePending {
		t.Errorf("item %s after the cancelled cancel", it.State)
	}
}

// TestRunNowParkedOnAnOpenBreaker: an item run now while the breaker it was parked on still
// refuses calls is turned away again, not attempted, and parked on that breaker again.
func TestRunNowParkedOnAnOpenBreaker(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		ctx := context.Background()
		reg := breaker.NewRegistry(breaker.Config{Key: func(any) string { return "k" }, Clock: e.clock})
		reg.Declare("k")
		if err := reg.Trip("k"); err != nil {
			t.Fatal(err)
		}
		m := mediatorFor(t, handlers{}, func(m *mediator.Mediator) { m.Use(breaker.New(reg)) })
		settled := make(chan string, 10)
		start(t, e.q, m, durable.SchedulerConfig{PollInterval: time.Hour, OnSettled: []func(string, record.Settled){
			func(_ string, outcome record.Settled) { settled <- string(outcome) }}})
		id := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: 1})).ID
		if o := <-settled; o != "refused" {
			t.Fatalf("first claim: %s", o)
		}
		if it := item(t, e.q, id); it.ParkedKey != "k" || it.State != record.StatePending {
			t.Fatalf("after the refusal: %+v", it)
		}
		if res := must[durable.ItemResult](t)(e.q.RunNow(ctx, id, "ops")); res != durable.ItemDue {
			t.Fatalf("run now: %q", res)
		}
		if o := <-settled; o != "refused" {
			t.Fatalf("claim after run now: %s", o)
		}
		it := item(t, e.q, id)
		if it.ParkedKey != "k" || it.State != record.StatePending || it.Attempts != 0 || !it.NextAt.After(e.clock.Now()) {
			t.Errorf("after run now against the open breaker: %+v", it)
		}
	})
}

// TestItemCursorOfAnotherListing: a cursor is a position in its own listing's order; given to
// another listing it is refused, not read as a position in that one's.
func TestItemCursorOfAnotherListing(t *testing.T) {
	e := newEnv(t, sqliteBackend(t))
	ctx := context.Background()
	for i := range 3 {
		must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: i}))
	}
	page := must[durable.ItemPage](t)(e.q.Items(ctx, durable.ItemFilter{Limit: 1}))
	if page.Next == "" {
		t.Fatal("no next page")
	}
	if next := must[durable.ItemPage](t)(e.q.Items(ctx, durable.ItemFilter{Limit: 1, After: page.Next})); len(next.Items) != 1 {
		t.Fatalf("the pending listing's own cursor: %+v", next)
	}
	for _, f := range []durable.ItemFilter{{State: record.StateSucceeded, After: page.Next}, {Parked: true, After: page.Next}} {
		_, err := e.q.Items(ctx, f)
		if !errors.Is(err, durable.ErrBadCursor) || !strings.Contains(err.Error(), "a cursor of the pending items' listing") {
			t.Errorf("%+v: %v, want ErrBadCursor naming the listing", f, err)
		}
	}
}
