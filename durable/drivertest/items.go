package drivertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/driver"
	"github.com/switchboard-go/switchboard/durable/record"
)

// testEnqueueDispatch: an enqueued item is claimed, run once with its dispatch information on
// the context, and recorded as succeeded with one attempt row and no lease left.
func testEnqueueDispatch(t *testing.T, open OpenFunc) {
	e := newEnv(t, open)
	var got sync.Map
	var ids []record.ItemID
	for n := range 3 {
		ids = append(ids, enqueue(t, e.q, n).ID)
	}
	start(t, e.q, sender(t, func(ctx context.Context, w *work) error {
		d, ok := durable.FromContext(ctx, w)
		if !ok {
			return errors.New("no dispatch information on the context")
		}
		got.Store(w.N, d)
		return nil
	}))
	for n, id := range ids {
		it := waitState(t, e.q, id, record.StateSucceeded)
		if it.Attempts != 1 || it.LeaseOwner != "" {
			t.Errorf("item %d: attempts %d, lease owner %q; want 1 and none", id, it.Attempts, it.LeaseOwner)
		}
		as := must[[]record.Attempt](t)(e.q.Attempts(context.Background(), id))
		if len(as) != 1 || as[0].Outcome != record.OutcomeSucceeded || as[0].Number != 1 {
			t.Errorf("item %d attempts %+v; want one that succeeded", id, as)
		}
		d, _ := got.Load(n)
		if d == nil || d.(durable.Dispatch).ItemID != id || d.(durable.Dispatch).Attempt != 1 {
			t.Errorf("dispatch information %+v for item %d", d, id)
		}
	}
}

// testRetryBackoff: a failed attempt makes the item pending again at exactly the policy's
// next time (the executor stores and compares times to the microsecond), with its error,
// until an attempt succeeds; each attempt has its row.
func testRetryBackoff(t *testing.T, open OpenFunc) {
	e := newEnv(t, open)
	id := enqueue(t, e.q, 1).ID
	start(t, e.q, sender(t, func(ctx context.Context, w *work) error {
		if d, _ := durable.FromContext(ctx, w); d.Attempt <= 2 {
			return retryable{fmt.Sprintf("attempt %d failed", d.Attempt)}
		}
		return nil
	}))
	t0 := e.clock.Now()
	eventually(t, 20*time.Second, "the first failure", func() bool {
		it := item(t, e.q, id)
		return it.Attempts == 1 && it.State == record.StatePending
	})
	if it := item(t, e.q, id); !it.NextAt.Equal(t0.Add(time.Second)) || it.LastError != "attempt 1 failed" {
		t.Fatalf("after attempt 1: next %v (want %v), last error %q", it.NextAt, t0.Add(time.Second), it.LastError)
	}
	e.clock.Advance(time.Second)
	eventually(t, 20*time.Second, "the second failure", func() bool {
		it := item(t, e.q, id)
		return it.Attempts == 2 && it.State == record.StatePending
	})
	if it := item(t, e.q, id); !it.NextAt.Equal(t0.Add(3 * time.Second)) {
		t.Fatalf("after attempt 2: next %v, want %v", it.NextAt, t0.Add(3*time.Second))
	}
	e.clock.Advance(2 * time.Second)
	it := waitState(t, e.q, id, record.StateSucceeded)
	as := must[[]record.Attempt](t)(e.q.Attempts(context.Background(), id))
	if it.Attempts != 3 || outcomes(as) != "1:failed 2:failed 3:succeeded" || as[0].Error != "attempt 1 failed" {
		t.Fatalf("attempts %d, rows %s (first error %q)", it.Attempts, outcomes(as), as[0].Error)
	}
}

// testMaxAttempts: an item that fails every attempt is dead after the policy's attempts, and
// its dead letter (payload, error, source, cause) is stored; Stats counts it.
func testMaxAttempts(t *testing.T, open OpenFunc) {
	e := newEnv(t, open)
	id := enqueue(t, e.q, 7).ID
	start(t, e.q, sender(t, func(context.Context, *work) error { return retryable{"down"} }))
	for n := 1; n < policy.MaxAttempts; n++ {
		eventually(t, 20*time.Second, fmt.Sprintf("attempt %d", n), func() bool {
			it := item(t, e.q, id)
			return it.Attempts == n && it.State == record.StatePending
		})
		e.clock.Advance(time.Hour)
	}
	it := waitState(t, e.q, id, record.StateDead)
	if it.Attempts != policy.MaxAttempts || it.LastError != "down" || string(it.Payload) != `{"n":7}` {
		t.Fatalf("dead item %+v", it)
	}
	var letters []record.DeadLetter
	eventually(t, 20*time.Second, "the dead letter", func() bool {
		var err error
		var lp durable.DeadLetterPage
		lp, err = e.q.DeadLetters(context.Background(), durable.DeadLetterFilter{})
		letters = lp.Letters
		if err != nil {
			t.Fatal(err)
		}
		return len(letters) == 1
	})
	if l := letters[0]; l.ItemID != id || l.Source != workName || l.Error != "down" || string(l.Payload) != `{"n":7}` || l.Status != record.DeadLetterFailed ||
		l.Cause != record.DeadAttemptsSpent {
		t.Fatalf("dead letter %+v", l)
	}
	st := must[durable.Stats](t)(e.q.Stats(context.Background()))
	if st.Counts[record.StateDead] != 1 || st.DeadLetters[record.DeadLetterFailed] != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// testDedupe: an enqueue with the dedupe key or the token of an item inserts nothing and
// reports that item, also when many race; ItemByToken finds it.
func testDedupe(t *testing.T, open OpenFunc) {
	e := newEnv(t, open)
	ctx := context.Background()
	first := enqueue(t, e.q, 1, durable.WithDedupeKey("k"))
	var wg sync.WaitGroup
	results := make([]durable.Enqueued, 8)
	errs := make([]error, 8)
	for i := range results {
		wg.Go(func() { results[i], errs[i] = e.q.Enqueue(ctx, &work{N: 2}, durable.WithDedupeKey("k")) })
	}
	wg.Wait()
	for i, r := range results {
		if errs[i] != nil || r.ID != first.ID || !r.Duplicate {
			t.Fatalf("concurrent enqueue %d with the key: %+v, %v; want a duplicate of %d", i, r, errs[i], first.ID)
		}
	}
	tok := enqueue(t, e.q, 3, durable.WithToken("tok-1"))
	again := enqueue(t, e.q, 4, durable.WithToken("tok-1"))
	if !again.Duplicate || again.ID != tok.ID {
		t.Fatalf("enqueue with a taken token: %+v; want a duplicate of %d", again, tok.ID)
	}
	if it := must[record.Item](t)(e.q.ItemByToken(ctx, "tok-1")); it.ID != tok.ID || string(it.Payload) != `{"n":3}` {
		t.Fatalf("ItemByToken: %+v", it)
	}
	if n := len(must[durable.ItemPage](t)(e.q.Items(ctx, durable.ItemFilter{State: record.StatePending})).Items); n != 2 {
		t.Fatalf("%d items stored; want 2", n)
	}
}

// testOrdering: the items of one ordering key run one at a time, in enqueue order, even with
// several workers; a failing one holds back the later ones until it succeeds.
func testOrdering(t *testing.T, open OpenFunc) {
	c := newClock()
	q := openQueue(t, open(t), durable.Config{Clock: c, Workers: 4})
	var ids []record.ItemID
	for n := range 5 {
		ids = append(ids, enqueue(t, q, n, durable.WithOrderingKey("order")).ID)
	}
	var mu sync.Mutex
	var ran []int
	running := 0
	failed := false
	start(t, q, sender(t, func(ctx context.Context, w *work) error {
		mu.Lock()
		running++
		overlap := running > 1
		mu.Unlock()
		defer func() { mu.Lock(); running--; mu.Unlock() }()
		if overlap {
			return errors.New("two items of one ordering key ran at once")
		}
		mu.Lock()
		defer mu.Unlock()
		if w.N == 1 && !failed {
			failed = true
			return retryable{"once"}
		}
		ran = append(ran, w.N)
		return nil
	}))
	waitState(t, q, ids[0], record.StateSucceeded)
	// Pending again after one attempt: the failure is written (a claim counts the attempt
	// before it runs), so its retry time is of the clock before the advance below.
	eventually(t, 20*time.Second, "item 1's failure", func() bool {
		it := item(t, q, ids[1])
		return it.Attempts == 1 && it.State == record.StatePending
	})
	for _, id := range ids[2:] {
		if it := item(t, q, id); it.State != record.StatePending || it.Attempts != 0 {
			t.Fatalf("item %d ran (%s, %d attempts) while an earlier item of its key waited", id, it.State, it.Attempts)
		}
	}
	c.Advance(time.Hour)
	waitState(t, q, ids[4], record.StateSucceeded)
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(ran, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("ran %v; want 0 1 2 3 4", ran)
	}
}

// testStats: Stats counts items per state and how long the oldest due item waited.
func testStats(t *testing.T, open OpenFunc) {
	e := newEnv(t, open)
	ctx := context.Background()
	enqueue(t, e.q, 1)
	enqueue(t, e.q, 2, durable.WithDelay(time.Hour))
	e.clock.Advance(30 * time.Second)
	st := must[durable.Stats](t)(e.q.Stats(ctx))
	if st.Counts[record.StatePending] != 2 || st.Counts[record.StateRunning] != 0 || st.OldestDue != 30*time.Second {
		t.Fatalf("stats %+v; want 2 pending, the oldest due 30s ago", st)
	}
	counts, letters := must2(t)(e.q.Counts(ctx))
	if counts[string(record.StatePending)] != 2 || letters == nil {
		t.Fatalf("counts %v, letters %v", counts, letters)
	}
}

func must2(t *testing.T) func(a, b map[string]int64, err error) (map[string]int64, map[string]int64) {
	return func(a, b map[string]int64, err error) (map[string]int64, map[string]int64) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a, b
	}
}

// testCancelRunNow: Cancel ends a pending item and RunNow makes a delayed one due now, each
// recorded in the audit log; a finished item is left as it is.
func testCancelRunNow(t *testing.T, open OpenFunc) {
	e := newEnv(t, open)
	ctx := context.Background()
	a := enqueue(t, e.q, 1, durable.WithDelay(time.Hour)).ID
	b := enqueue(t, e.q, 2, durable.WithDelay(time.Hour)).ID
	if r := must[durable.ItemResult](t)(e.q.Cancel(ctx, a, "op", "not needed")); r != durable.ItemCancelled {
		t.Fatalf("Cancel: %s", r)
	}
	if it := item(t, e.q, a); it.State != record.StateCancelled {
		t.Fatalf("cancelled item is %s", it.State)
	}
	if r := must[durable.ItemResult](t)(e.q.Cancel(ctx, a, "op", "again")); r != durable.ItemFinished {
		t.Fatalf("Cancel of a cancelled item: %s; want %s", r, durable.ItemFinished)
	}
	if r := must[durable.ItemResult](t)(e.q.RunNow(ctx, b, "op")); r != durable.ItemDue {
		t.Fatalf("RunNow: %s", r)
	}
	if it := item(t, e.q, b); !it.NextAt.Equal(e.clock.Now()) {
		t.Fatalf("RunNow: next %v; want %v", it.NextAt, e.clock.Now())
	}
	if r := must[durable.ItemResult](t)(e.q.Cancel(ctx, 1<<40, "op", "x")); r != durable.ItemNotFound {
		t.Fatalf("Cancel of no item: %s", r)
	}
	entries := must[[]record.AuditEntry](t)(e.q.Audit(ctx, durable.AuditFilter{}))
	if len(entries) < 2 {
		t.Fatalf("audit log %+v; want the cancel and the run-now", entries)
	}
}

// testFleet: two queues on one database share the work: every item runs once.
func testFleet(t *testing.T, open OpenFunc) {
	drv := open(t)
	a := openQueue(t, drv, durable.Config{InstanceID: "a", Workers: 2, BatchSize: 3})
	b := openQueue(t, drv, durable.Config{InstanceID: "b", Workers: 2, BatchSize: 3})
	const n = 40
	var mu sync.Mutex
	runs := map[int]int{}
	handler := func(ctx context.Context, w *work) error {
		mu.Lock()
		runs[w.N]++
		mu.Unlock()
		return nil
	}
	start(t, a, sender(t, handler))
	start(t, b, sender(t, handler))
	var ids []record.ItemID
	for i := range n {
		q := a
		if i%2 == 1 {
			q = b
		}
		ids = append(ids, enqueue(t, q, i).ID)
	}
	for _, id := range ids {
		waitState(t, a, id, record.StateSucceeded)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		if runs[i] != 1 {
			t.Fatalf("item %d ran %d times; want once", i, runs[i])
		}
	}
}

// testStatsLimit: the Executor's Stats counts each state up to its limit and names the states
// over it (ItemStats.Over), CountStates counts them in full, and a limit below one is refused;
// DeadLetterCounts and CountLetterStatuses do the same for the letters, and DeadLetters
// counts its total up to its CountLimit.
func testStatsLimit(t *testing.T, open OpenFunc) {
	ex := openExecutor(t, open(t))
	ctx := context.Background()
	now := time.Now()
	for range 4 {
		if _, _, err := ex.Enqueue(ctx, driver.NewItem{Name: workName, Payload: []byte(`{}`), NextAt: now, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := ex.Stats(ctx, now, 2)
	if err != nil || st.Counts[record.StatePending] != 3 || !st.Over[record.StatePending] || st.Over[record.StateRunning] || len(st.Counts) != 5 {
		t.Fatalf("Stats(limit 2) with 4 pending: %v over %v, %v; want 3 (the limit plus one), pending over, every state counted", st.Counts, st.Over, err)
	}
	if st, err := ex.Stats(ctx, now, 4); err != nil || st.Counts[record.StatePending] != 4 || len(st.Over) != 0 {
		t.Fatalf("Stats(limit 4) with 4 pending: %v over %v, %v; want 4, none over", st.Counts, st.Over, err)
	}
	full, err := ex.CountStates(ctx, []record.ItemState{record.StatePending, record.StateSucceeded})
	if err != nil || full[record.StatePending] != 4 || full[record.StateSucceeded] != 0 || len(full) != 2 {
		t.Fatalf("CountStates: %v, %v; want 4 pending and 0 succeeded", full, err)
	}
	if _, err := ex.Stats(ctx, now, 0); err == nil {
		t.Fatal("Stats(limit 0) was not refused")
	}
	for range 3 {
		if _, err := ex.InsertDeadLetter(ctx, driver.NewDeadLetter{Source: "batch", Name: workName, Payload: []byte(`{}`), Error: "boom", Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	letters, over, err := ex.DeadLetterCounts(ctx, 2)
	if err != nil || letters[record.DeadLetterFailed] != 3 || !over[record.DeadLetterFailed] || len(over) != 1 || len(letters) != 3 {
		t.Fatalf("DeadLetterCounts(limit 2) with 3 failed: %v over %v, %v; want 3, failed over, every status counted", letters, over, err)
	}
	if full, err := ex.CountLetterStatuses(ctx, []record.DeadLetterStatus{record.DeadLetterFailed}); err != nil || full[record.DeadLetterFailed] != 3 {
		t.Fatalf("CountLetterStatuses: %v, %v; want 3 failed", full, err)
	}
	for _, c := range []struct{ countLimit, want int }{{2, 3}, {3, 3}, {0, 3}, {1, 2}} {
		rows, total, err := ex.DeadLetters(ctx, driver.DeadLetterQuery{Status: record.DeadLetterFailed, Limit: 1, CountLimit: c.countLimit})
		if err != nil || len(rows) != 1 || total != c.want {
			t.Fatalf("DeadLetters(CountLimit %d) of 3 failed letters: %d rows, total %d, %v; want 1 row, total %d (CountLimit+1 when more match, all of them for 0)",
				c.countLimit, len(rows), total, err, c.want)
		}
	}
}
