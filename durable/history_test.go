package durable_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/driver"
	"github.com/switchboard-go/switchboard/durable/record"
)

// A running scheduler writes each minute once it is over: its outcomes by how each claim
// settled, the fleet's gauges at the minute's end, and the breakers that were not closed
// during it, a breaker open for 300 ms included; a minute without a breaker's trouble lists
// none; Shutdown writes the minute in progress. The bubble's clock runs the minutes.
func TestHistoryBubbleMinutes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.db")
	synctest.Test(t, func(t *testing.T) {
		q := bubbleQueue(t, path, retry.Policy{MaxAttempts: 1})
		reg := breaker.NewRegistry(breaker.Config{})
		reg.Declare("pay")
		ran := make(chan struct{}, 4)
		s := bubbleScheduler(t, q, handlers{work: func(ctx context.Context, w *Work) error {
			ran <- struct{}{}
			if w.N < 0 {
				return errPermanent
			}
			return nil
		}}, durable.SchedulerConfig{PollInterval: time.Second, Breakers: reg})
		ctx := context.Background()
		start := time.Now().UTC().Truncate(time.Minute)
		for _, n := range []int{1, 2, 3, -1} {
			must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: n}))
		}
		s.Wake()
		for range 4 {
			<-ran
		}
		// Minute 1: the breaker of "pay" is open for 300 ms.
		time.Sleep(start.Add(time.Minute + 10*time.Second).Sub(time.Now()))
		if err := reg.Trip("pay"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		if err := reg.Reset("pay"); err != nil {
			t.Fatal(err)
		}
		// Into minute 3: minutes 0 to 2 are written.
		time.Sleep(start.Add(3*time.Minute + 5*time.Second).Sub(time.Now()))
		synctest.Wait()
		h, err := q.History(ctx, start)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != 3 {
			t.Fatalf("history of %d minutes, want 3 (0 to 2): %+v", len(h), h)
		}
		m0, m1, m2 := h[0], h[1], h[2]
		if !m0.Minute.Equal(start) || m0.Instances != 1 || m0.Outcomes[record.SettledSucceeded] != 3 || m0.Outcomes[record.SettledDead] != 1 {
			t.Fatalf("minute 0: %+v; want one instance, 3 succeeded and 1 dead", m0)
		}
		if m0.Items[record.StateSucceeded] != 3 || m0.DeadLetters[record.DeadLetterFailed] != 1 {
			t.Fatalf("minute 0's gauges: items %v, letters %v; want 3 succeeded, 1 letter failed", m0.Items, m0.DeadLetters)
		}
		if m1.Breakers["pay"] != breaker.StateOpen || len(m1.Outcomes) != 0 {
			t.Fatalf("minute 1: %+v; want pay open (300 ms of it), no outcomes", m1)
		}
		if len(m2.Breakers) != 0 {
			t.Fatalf("minute 2: breakers %v; want none (pay closed all minute)", m2.Breakers)
		}
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		h, err = q.History(ctx, start.Add(3*time.Minute))
		if err != nil || len(h) != 1 || h[0].Instances != 1 {
			t.Fatalf("after Shutdown, the minute in progress: %+v, %v; want it written", h, err)
		}
	})
}

// Two instances on one database write a row each for the minutes they run; History sums their
// outcomes per minute. The pruner deletes the minutes older than HistoryRetention.
func TestHistoryFleetSummedAndPruned(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		var ran atomic.Int32
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error { ran.Add(1); return nil }})
		qa := b.queue(t, durable.Config{HistoryRetention: time.Hour})
		qb := b.queue(t, durable.Config{HistoryRetention: time.Hour})
		since := time.Now().UTC().Truncate(time.Minute)
		old := since.Add(-2 * time.Hour)
		if err := durable.StoreOf(qa).WriteHistory(ctx, []driver.HistoryRow{{Minute: old, Instance: "gone", Outcomes: map[string]int64{"succeeded": 5}}}); err != nil {
			t.Fatal(err)
		}
		sa := start(t, qa, m, durable.SchedulerConfig{InstanceID: "a", HistoryRetention: time.Hour})
		sb := start(t, qb, m, durable.SchedulerConfig{InstanceID: "b", HistoryRetention: time.Hour})
		const n = 40
		for i := range n {
			must[durable.Enqueued](t)(qa.Enqueue(ctx, &Work{N: i}))
		}
		eventually(t, 30*time.Second, "every item run", func() bool { return ran.Load() == n })
		eventually(t, 30*time.Second, "every item succeeded", func() bool { return stats(t, qa).Counts[record.StateSucceeded] == n })
		sa.Prune()
		for _, s := range []*durable.Scheduler{sa, sb} {
			if err := s.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
		}
		h, err := qb.History(ctx, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		var succeeded int64
		instances := 0
		for _, mi := range h {
			if mi.Minute.Before(since) {
				t.Fatalf("minute %s is older than the retention allows: the prune left it", mi.Minute)
			}
			succeeded += mi.Outcomes[record.SettledSucceeded]
			instances = max(instances, mi.Instances)
		}
		if succeeded != n || instances != 2 {
			t.Fatalf("history: %d succeeded over the minutes, %d instances at most; want %d and 2: %+v", succeeded, instances, n, h)
		}
	})
}

// A queue whose driver keeps no history says so.
func TestHistoryWithoutCapability(t *testing.T) {
	_, err := (&durable.Queue{}).History(context.Background(), time.Time{})
	if !errors.Is(err, durable.ErrNoHistory) || !strings.Contains(err.Error(), "driver.HistoryStore") {
		t.Fatalf("History on a queue without a history: %v; want an error naming driver.HistoryStore", err)
	}
}
