package drivertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/driver"
	"github.com/switchboard-go/switchboard/durable/record"
)

// testHistory: with driver.HistoryStore, two queues' schedulers each write their minutes, and
// Queue.History sums their outcomes per minute; a minute written again is replaced, the fleet's
// gauges are written once a minute, and PruneHistory deletes the minutes before its bound.
// Without it, Queue.History fails with durable.ErrNoHistory.
func testHistory(t *testing.T, open OpenFunc) {
	drv := open(t)
	ex := openExecutor(t, drv)
	hs, ok := ex.(driver.HistoryStore)
	a := openQueue(t, drv, durable.Config{InstanceID: "a"})
	ctx := context.Background()
	if !ok {
		if _, err := a.History(ctx, time.Time{}); !errors.Is(err, durable.ErrNoHistory) {
			t.Fatalf("History without HistoryStore: %v; want durable.ErrNoHistory", err)
		}
		return
	}
	b := openQueue(t, drv, durable.Config{InstanceID: "b"})
	since := time.Now().UTC().Truncate(time.Minute)
	start(t, a, sender(t, nil))
	start(t, b, sender(t, nil))
	const n = 20
	ids := make([]record.ItemID, n)
	for i := range n {
		ids[i] = enqueue(t, a, i).ID
	}
	for _, id := range ids {
		waitState(t, a, id, record.StateSucceeded)
	}
	for _, q := range []*durable.Queue{a, b} {
		if err := q.Shutdown(ctx); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	}
	minutes, err := a.History(ctx, since)
	if err != nil {
		t.Fatal(err)
	}
	var succeeded int64
	instances := 0
	for _, m := range minutes {
		succeeded += m.Outcomes[record.SettledSucceeded]
		instances = max(instances, m.Instances)
	}
	if succeeded != n || instances != 2 {
		t.Fatalf("History: %d succeeded, at most %d instances a minute; want %d and 2: %+v", succeeded, instances, n, minutes)
	}

	old := since.Add(-48 * time.Hour)
	row := driver.HistoryRow{Minute: old, Instance: "gone", Outcomes: map[string]int64{"dead": 2}, Breakers: map[string]driver.BreakerState{"k": driver.BreakerHalfOpen}}
	for range 2 { // written twice: replaced, not added to
		if err := hs.WriteHistory(ctx, []driver.HistoryRow{row}); err != nil {
			t.Fatal(err)
		}
	}
	gauges := func(context.Context) (driver.HistoryGauges, error) {
		return driver.HistoryGauges{Items: map[string]int64{"pending": 4}, DeadLetters: map[string]int64{"failed": 1}}, nil
	}
	for i, want := range []bool{true, false} {
		if wrote, err := hs.WriteHistoryGauges(ctx, old, gauges); err != nil || wrote != want {
			t.Fatalf("gauges of the minute, write %d: wrote %v, %v; want %v", i+1, wrote, err, want)
		}
	}
	minutes, err = a.History(ctx, old)
	if err != nil || len(minutes) == 0 {
		t.Fatalf("History since the old minute: %+v, %v", minutes, err)
	}
	m := minutes[0]
	if !m.Minute.Equal(old) || m.Instances != 1 || m.Outcomes[record.SettledDead] != 2 || m.Items[record.StatePending] != 4 ||
		m.DeadLetters[record.DeadLetterFailed] != 1 || m.Breakers["k"].String() != "half-open" {
		t.Fatalf("the old minute: %+v; want one instance's 2 dead, the gauges, k half-open", m)
	}
	if _, err := hs.PruneHistory(ctx, old.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	minutes, err = a.History(ctx, old)
	if err != nil || len(minutes) == 0 || minutes[0].Minute.Equal(old) {
		t.Fatalf("History after pruning the old minute: %+v, %v; want it gone, the recent ones kept", minutes, err)
	}
}
