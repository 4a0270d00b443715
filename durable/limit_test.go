package durable_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

// SetConcurrencyLimit, ConcurrencyLimits and RemoveConcurrencyLimit, each audited in the same
// transaction, a replaced limit naming the one it replaced and a removal of nothing recorded
// as no change.
func TestConcurrencyLimitSetListRemoveAudited(t *testing.T) {
	ctx := context.Background()
	q := typesQueue(t)
	l := must[record.ConcurrencyLimit](t)(q.SetConcurrencyLimit(ctx, "api.example.com", 3, "alice", durable.LimitReason("their quota")))
	if l.Key != "api.example.com" || l.Max != 3 || l.Actor != "alice" || l.Reason != "their quota" || l.CreatedAt.IsZero() {
		t.Fatalf("set: %+v", l)
	}
	must[record.ConcurrencyLimit](t)(q.SetConcurrencyLimit(ctx, "api.example.com", 5, "bob"))
	must[record.ConcurrencyLimit](t)(q.SetConcurrencyLimit(ctx, "a-first", 1, "bob"))
	ls := must[[]record.ConcurrencyLimit](t)(q.ConcurrencyLimits(ctx))
	if len(ls) != 2 || ls[0].Key != "a-first" || ls[1].Key != "api.example.com" || ls[1].Max != 5 || ls[1].Actor != "bob" || ls[1].Reason != "" || ls[1].InUse != 0 {
		t.Fatalf("limits: %+v", ls)
	}
	if !must[bool](t)(q.RemoveConcurrencyLimit(ctx, "api.example.com", "carol")) {
		t.Fatal("RemoveConcurrencyLimit reported no limit")
	}
	if must[bool](t)(q.RemoveConcurrencyLimit(ctx, "api.example.com", "carol")) {
		t.Fatal("a second RemoveConcurrencyLimit reported a limit")
	}
	if ls := must[[]record.ConcurrencyLimit](t)(q.ConcurrencyLimits(ctx)); len(ls) != 1 || ls[0].Key != "a-first" {
		t.Fatalf("limits after the removal: %+v", ls)
	}
	entries := must[[]record.AuditEntry](t)(q.Audit(ctx, durable.AuditFilter{TargetKind: record.AuditTargetBreakerKey, Target: "api.example.com"}))
	var got []string
	for _, e := range entries {
		got = append(got, string(e.Action)+" "+e.Actor+" "+string(e.Outcome)+" "+e.Detail)
	}
	want := []string{
		"remove_concurrency_limit carol no_change not limited",
		"remove_concurrency_limit carol done was at most 5 running, set by bob",
		"set_concurrency_limit bob done at most 5 running; replaces the limit of 3 set by alice",
		"set_concurrency_limit alice done at most 3 running; reason: their quota",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("audit:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Bad input is refused with every problem named, and nothing is stored or audited.
func TestConcurrencyLimitRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	q := typesQueue(t)
	_, err := q.SetConcurrencyLimit(ctx, " ", 0, "")
	for _, want := range []string{"SetConcurrencyLimit", "key is empty", "n 0 is outside [1, 1000000]", "actor is required"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("SetConcurrencyLimit(blank, 0, no actor): %v; want it to say %q", err, want)
		}
	}
	_, err = q.SetConcurrencyLimit(ctx, strings.Repeat("k", 1025), 2_000_000, "ops")
	for _, want := range []string{"key is 1025 bytes, more than 1024", "n 2000000 is outside"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("SetConcurrencyLimit(long key, 2e6): %v; want it to say %q", err, want)
		}
	}
	if _, err := q.SetConcurrencyLimit(ctx, "k", -1, "ops"); err == nil || !strings.Contains(err.Error(), "n -1 is outside") {
		t.Fatalf("SetConcurrencyLimit(k, -1): %v", err)
	}
	// A key no item can have, and a reason too long to show, are refused cleanly, as
	// Enqueue refuses such keys (regression: the database's error, or a 20 KB reason stored).
	for _, bad := range []struct {
		key, reason, want string
	}{
		{"a\x00b", "", `the breaker key "a\x00b" holds a NUL byte`},
		{"a\xffb", "", `the breaker key "a\xffb" is not valid UTF-8`},
		{"k", strings.Repeat("r", 1025), "reason is 1025 bytes, more than 1024"},
	} {
		if _, err := q.SetConcurrencyLimit(ctx, bad.key, 1, "ops", durable.LimitReason(bad.reason)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("SetConcurrencyLimit(%q, reason of %d bytes): %v; want it to say %s", bad.key, len(bad.reason), err, bad.want)
		}
	}
	if _, err := q.RemoveConcurrencyLimit(ctx, "a\x00b", "ops"); err == nil || !strings.Contains(err.Error(), "holds a NUL byte") {
		t.Fatalf("RemoveConcurrencyLimit(NUL key): %v", err)
	}
	if _, err := q.Pause(ctx, durable.PauseTarget{Kind: record.PauseBreakerKey, Target: "k"}, "ops", durable.PauseReason(strings.Repeat("r", 1025))); err == nil || !strings.Contains(err.Error(), "reason is 1025 bytes, more than 1024") {
		t.Fatalf("Pause with a reason of 1025 bytes: %v", err)
	}
	if _, err := q.RemoveConcurrencyLimit(ctx, "", ""); err == nil || !strings.Contains(err.Error(), "key is empty") || !strings.Contains(err.Error(), "actor is required") {
		t.Fatalf("RemoveConcurrencyLimit(blank, no actor): %v", err)
	}
	if ls := must[[]record.ConcurrencyLimit](t)(q.ConcurrencyLimits(ctx)); len(ls) != 0 {
		t.Fatalf("limits after refusals: %+v", ls)
	}
	if es := must[[]record.AuditEntry](t)(q.Audit(ctx, durable.AuditFilter{})); len(es) != 0 {
		t.Fatalf("audit after refusals: %+v", es)
	}
}

// A limit of 2 on a key: with four workers and five items of the key (WithBreakerKey), two
// run at once and no more; the others are held back with no attempt ("concurrency_limited"), and each slot
// freed wakes a held item at once, without a poll or a Recheck passing. An item of another key
// is not held back. Every item succeeds at its first attempt.
func TestBubbleConcurrencyLimitHoldsBackAndWakes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := bubbleQueue(t, path, fastPolicy)
		must[record.ConcurrencyLimit](t)(q.SetConcurrencyLimit(ctx, "k", 2, "ops"))
		var (
			mu             sync.Mutex
			running, most  int
			otherRan       bool
			release        = make(chan struct{})
			settled        settledLog
			limitedEnqueue []record.ItemID
		)
		h := handlers{work: func(ctx context.Context, w *Work) error {
			if w.N >= 100 {
				mu.Lock()
				otherRan = true
				mu.Unlock()
				return nil
			}
			mu.Lock()
			running++
			most = max(most, running)
			mu.Unlock()
			<-release
			mu.Lock()
			running--
			mu.Unlock()
			return nil
		}}
		for i := range 5 {
			limitedEnqueue = append(limitedEnqueue, must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: i}, durable.WithBreakerKey("k"))).ID)
		}
		other := must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: 100}, durable.WithBreakerKey("other"))).ID
		s := bubbleScheduler(t, q, h, durable.SchedulerConfig{Workers: 4, PollInterval: time.Hour, OnSettled: []func(string, record.Settled){settled.on}})
		s.Wake()
		time.Sleep(10 * time.Millisecond) // virtual: the claim loop's gathering of outcomes is over
		synctest.Wait()
		mu.Lock()
		r, ran := running, otherRan
		mu.Unlock()
		if r != 2 || !ran {
			t.Fatalf("running %d of the limited key (want 2), the other key's item ran: %v; settled %s", r, ran, settled.String())
		}
		if n := strings.Count(settled.String(), "test.work:concurrency_limited"); n != 3 {
			t.Fatalf("settled %s; want the 3 items beyond the limit held back", settled.String())
		}
		if ls := must[[]record.ConcurrencyLimit](t)(q.ConcurrencyLimits(ctx)); len(ls) != 1 || ls[0].InUse != 2 {
			t.Fatalf("limits while 2 run: %+v", ls)
		}
		for _, id := range limitedEnqueue {
			if it := item(t, q, id); it.State == record.StatePending && (it.Attempts != 0 || it.ParkedKey != "k") {
				t.Fatalf("held-back item %d: %+v; want parked on the key, no attempt", id, it)
			}
		}
		// Each release lets one running item end; its slot wakes a held item at once.
		begin := time.Now()
		for i := range 5 {
			release <- struct{}{}
			time.Sleep(10 * time.Millisecond) // virtual, as above
			synctest.Wait()
			mu.Lock()
			r := running
			mu.Unlock()
			if want := min(2, 4-i); r != want {
				t.Fatalf("after %d items ended, %d run; want %d", i+1, r, want)
			}
		}
		if waited := time.Since(begin); waited >= time.Second {
			t.Fatalf("the held items waited %v of virtual time: a freed slot should wake them at once", waited)
		}
		for _, id := range append(limitedEnqueue, other) {
			it := item(t, q, id)
			if it.State != record.StateSucceeded || outcomes(attempts(t, q, id)) != "1:succeeded" {
				t.Fatalf("item %d: %s %s; want succeeded at its first attempt", id, it.State, outcomes(attempts(t, q, id)))
			}
		}
		if most != 2 {
			t.Fatalf("at most %d of the limited key ran at once, want 2", most)
		}
		if ls := must[[]record.ConcurrencyLimit](t)(q.ConcurrencyLimits(ctx)); len(ls) != 1 || ls[0].InUse != 0 {
			t.Fatalf("limits after the run: %+v", ls)
		}
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// The key a breaker's key function gives is limited too, and a limit set while the scheduler
// runs holds from the next item on; its removal frees the held items at once.
func TestBubbleConcurrencyLimitOfAKeyFunction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := bubbleQueue(t, path, fastPolicy)
		reg := breaker.NewRegistry(breaker.Config{Key: func(req any) string {
			if w, ok := req.(*Work); ok {
				return fmt.Sprint("tenant-", w.N%2)
			}
			return ""
		}})
		var (
			mu      sync.Mutex
			running int
			release = make(chan struct{})
		)
		h := handlers{work: func(ctx context.Context, w *Work) error {
			mu.Lock()
			running++
			mu.Unlock()
			<-release
			return nil
		}}
		s := bubbleScheduler(t, q, h, durable.SchedulerConfig{Workers: 4, PollInterval: time.Hour, Breakers: reg})
		must[record.ConcurrencyLimit](t)(q.SetConcurrencyLimit(ctx, "tenant-1", 1, "ops"))
		var ids []record.ItemID
		for i := range 3 {
			ids = append(ids, must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: 2*i + 1})).ID)
		}
		s.Wake()
		time.Sleep(10 * time.Millisecond) // virtual: the claim loop's gathering of outcomes is over
		synctest.Wait()
		mu.Lock()
		r := running
		mu.Unlock()
		if r != 1 {
			t.Fatalf("%d items of the key function's limited key run at once, want 1", r)
		}
		if !must[bool](t)(q.RemoveConcurrencyLimit(ctx, "tenant-1", "ops")) {
			t.Fatal("no limit removed")
		}
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		mu.Lock()
		r = running
		mu.Unlock()
		if r != 3 {
			t.Fatalf("%d items run after the limit's removal, want all 3 at once", r)
		}
		close(release)
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		for _, id := range ids {
			if outcomes(attempts(t, q, id)) != "1:succeeded" {
				t.Fatalf("item %d: %s", id, outcomes(attempts(t, q, id)))
			}
		}
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
