package drivertest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/ratelimit"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/driver"
	"github.com/switchboard-go/switchboard/durable/record"
)

// capabilities opens drv's executor to see which optional interfaces it implements.
func capabilities(t *testing.T, drv driver.Driver) (n driver.Notifier, notifies bool, fleet bool) {
	t.Helper()
	ex := openExecutor(t, drv)
	n, ok := ex.(driver.Notifier)
	_, fleet = ex.(driver.FleetStores)
	return n, ok && n.Notifies(), fleet
}

// testNotifier (driver.Notifier whose Notifies is true; skipped otherwise): an item enqueued
// on one queue wakes the scheduler of another queue on the same database, one that would
// not poll for an hour, at once.
func testNotifier(t *testing.T, open OpenFunc) {
	drv := open(t)
	if _, notifies, _ := capabilities(t, drv); !notifies {
		t.Skip("the executor does not notify (no driver.Notifier, or Notifies is false): schedulers poll")
	}
	enq := openQueue(t, drv, durable.Config{InstanceID: "enqueuer"})
	worker := openQueue(t, drv, durable.Config{InstanceID: "worker", PollInterval: time.Hour})
	start(t, worker, sender(t, nil))
	// The worker's listening connection may start after an enqueue: enqueue until one runs.
	deadline := time.Now().Add(20 * time.Second)
	for {
		id := enqueue(t, enq, 1).ID
		wait := time.Now().Add(200 * time.Millisecond)
		for time.Now().Before(wait) {
			if it := item(t, enq, id); it.State == record.StateSucceeded {
				return
			}
			<-time.After(2 * time.Millisecond) // polling the database, where no channel can signal
		}
		if time.Now().After(deadline) {
			t.Fatal("no item enqueued on another queue ran: the notifications do not wake the scheduler")
		}
	}
}

// testFleetStores: with driver.FleetStores, two queues' breaker stores decide a transition
// once (the second, from the same epoch, loses and reads the winner's state), load the open
// breaker, and a rate-limit store leases a burst's permits and then none; without it,
// NewBreakerStore and NewRateLimitStore fail naming driver.FleetStores.
func testFleetStores(t *testing.T, open OpenFunc) {
	drv := open(t)
	_, _, fleet := capabilities(t, drv)
	a := openQueue(t, drv, durable.Config{InstanceID: "a"})
	if !fleet {
		if _, err := durable.NewBreakerStore(a, "reg", durable.BreakerStoreConfig{}); err == nil || !strings.Contains(err.Error(), "driver.FleetStores") {
			t.Fatalf("NewBreakerStore without FleetStores: %v; want an error naming driver.FleetStores", err)
		}
		if _, err := durable.NewRateLimitStore(a, durable.RateLimitStoreConfig{}); err == nil || !strings.Contains(err.Error(), "driver.FleetStores") {
			t.Fatalf("NewRateLimitStore without FleetStores: %v; want an error naming driver.FleetStores", err)
		}
		return
	}
	b := openQueue(t, drv, durable.Config{InstanceID: "b"})
	ctx := context.Background()
	// The contract, not the latency: a first call dials a connection, which on a loaded
	// machine running the suite's subtests in parallel took longer than the default 250 ms.
	stores := durable.BreakerStoreConfig{Timeout: 10 * time.Second}
	sa, err := durable.NewBreakerStore(a, "reg", stores)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sa.Close() })
	sb, err := durable.NewBreakerStore(b, "reg", stores)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	trip := breaker.Transition{Key: "k", From: 0, To: breaker.StateOpen, Failures: 3, OpenFor: time.Minute, Owner: "a"}
	got, applied, err := sa.Transition(ctx, trip)
	if err != nil || !applied || got.State != breaker.StateOpen || got.Epoch != 1 || !got.OpenUntil.After(got.OpenedAt) {
		t.Fatalf("first trip: %+v applied %v, %v", got, applied, err)
	}
	trip.Owner = "b"
	got, applied, err = sb.Transition(ctx, trip)
	if err != nil || applied || got.State != breaker.StateOpen || got.Epoch != 1 || got.By != "a" {
		t.Fatalf("second trip from the same epoch: %+v applied %v, %v; want a's state, not applied", got, applied, err)
	}
	loaded, err := sb.Load(ctx)
	if err != nil || len(loaded) != 1 || loaded[0].Key != "k" || loaded[0].State != breaker.StateOpen {
		t.Fatalf("Load: %+v, %v", loaded, err)
	}
	rl, err := durable.NewRateLimitStore(a, durable.RateLimitStoreConfig{Name: "rl", LeasePeriod: time.Hour, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	req := ratelimit.LeaseRequest{Key: "k", Interval: 24 * time.Hour, Burst: 2, Permits: 2}
	l, err := rl.Lease(ctx, req)
	if err != nil || l.Permits != 2 {
		t.Fatalf("lease of the burst: %+v, %v", l, err)
	}
	req.Permits = 1
	l, err = rl.Lease(ctx, req)
	if err != nil || l.Permits != 0 || l.Next.IsZero() {
		t.Fatalf("lease past the burst, the next permit a day away: %+v, %v; want none, and the next free permit", l, err)
	}
}
