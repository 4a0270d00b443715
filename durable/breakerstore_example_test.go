package durable_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/sqlite"
)

// Two instances on one database share their breakers: a trip by one is made once, the
// other's trip from the same state loses to it, and the other learns of it within its refresh
// interval. (A breaker.Registry makes these calls; here they are made by hand.)
func ExampleNewBreakerStore() {
	dir, _ := os.MkdirTemp("", "durable-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	path := filepath.Join(dir, "queue.db")
	qa, _ := durable.Open(ctx, sqlite.Open(path), durable.Config{}) // instance a
	defer qa.Close()
	qb, _ := durable.Open(ctx, sqlite.Open(path), durable.Config{}) // instance b
	defer qb.Close()

	cfg := durable.BreakerStoreConfig{RefreshInterval: 50 * time.Millisecond}
	a, _ := durable.NewBreakerStore(qa, "hosts", cfg)
	defer a.Close()
	b, _ := durable.NewBreakerStore(qb, "hosts", cfg)
	defer b.Close()
	seen := make(chan breaker.Shared, 1)
	stop := b.Subscribe(func(s breaker.Shared) { seen <- s })
	defer stop()

	trip := breaker.Transition{Key: "hooks.example:443", From: 0, To: breaker.StateOpen, Failures: 5, OpenFor: 30 * time.Second,
		Owner: "instance-a", Reason: breaker.ReasonFailureThreshold}
	s, applied, _ := a.Transition(ctx, trip)
	fmt.Println("a trips:", applied, s.State, "epoch", s.Epoch, "open for", s.OpenUntil.Sub(s.Now))

	trip.Owner = "instance-b"
	s, applied, _ = b.Transition(ctx, trip) // b counted its own failures meanwhile
	fmt.Println("b trips:", applied, s.State, "epoch", s.Epoch, "by", s.By)

	s = <-seen
	fmt.Println("b learns:", s.Key, s.State, "epoch", s.Epoch, "by", s.By)
	// Output:
	// a trips: true open epoch 1 open for 30s
	// b trips: false open epoch 1 by instance-a
	// b learns: hooks.example:443 open epoch 1 by instance-a
}
