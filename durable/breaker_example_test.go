package durable_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/httpcall"
	"github.com/switchboard-go/switchboard/mediator"
)

// Notify posts a notification to a subscriber's URL.
type Notify struct {
	mediator.Command
	URL string `json:"url"`
}

// Items whose handler calls a remote host wait on that host's breaker: the registration names
// the registry and maps the request to the key the pipeline's per-host breaker uses. While the
// breaker is open the item is parked on the key, and no attempt is charged; the breaker's reset
// (or its closing after a probe) frees it at once.
func ExampleWithBreaker() {
	dir, _ := os.MkdirTemp("", "durable-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	settled := make(chan record.Settled, 10)
	q, _ := durable.Open(ctx, sqlite.Open(filepath.Join(dir, "queue.db")), durable.Config{
		OnSettled: []func(string, record.Settled){func(_ string, outcome record.Settled) { settled <- outcome }},
	})
	defer q.Close()

	hosts := breaker.NewRegistry(breaker.Config{Key: httpcall.Authority}) // one breaker per host
	durable.Register[*Notify](q, "notify", durable.WithBreaker(hosts, func(n *Notify) string { return httpcall.AuthorityOf(n.URL) }))
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, n *Notify) (mediator.Void, error) {
		fmt.Println("posted to", n.URL)
		return mediator.Void{}, nil
	})
	_ = m.Build()

	key := httpcall.AuthorityOf("https://hooks.example/orders")
	hosts.Declare(key)
	_ = hosts.Trip(key) // the host is down
	res, _ := q.Enqueue(ctx, &Notify{URL: "https://hooks.example/orders"})
	_ = q.Start(m)
	defer func() { _ = q.Shutdown(ctx) }()

	fmt.Println(<-settled) // held back by the open breaker
	it, _ := q.Item(ctx, res.ID)
	fmt.Println(it.State, "on", it.ParkedKey, "attempts:", it.Attempts)

	_ = hosts.Reset(key) // the host is back
	fmt.Println(<-settled)
	it, _ = q.Item(ctx, res.ID)
	fmt.Println(it.State, "attempts:", it.Attempts)
	// Output:
	// refused
	// pending on https://hooks.example:443 attempts: 0
	// posted to https://hooks.example/orders
	// succeeded
	// succeeded attempts: 1
}
