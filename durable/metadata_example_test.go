package durable_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/mediator"
)

// TenantKey is the application's context key for the tenant a request acts for.
var TenantKey = mediator.NewContextKey[string]("tenant")

// A value of the enqueuing caller's context travels with the item, as its metadata, to the
// context of the item's dispatch.
func ExampleCarry() {
	dir, _ := os.MkdirTemp("", "durable-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	q, err := durable.Open(ctx, sqlite.Open(filepath.Join(dir, "queue.db")), durable.Config{
		Propagators:  []durable.Propagator{durable.Carry(TenantKey)},
		PollInterval: 10 * time.Millisecond, Workers: 1,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	durable.Register[*SendInvoice](q, "billing.send-invoice")

	sent := make(chan string)
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, r *SendInvoice) (mediator.Void, error) {
		tenant, ok := TenantKey.Get(ctx)
		sent <- fmt.Sprintf("sent %s for tenant %q (%v)", r.Invoice, tenant, ok)
		return mediator.Void{}, nil
	})
	if err := m.Build(); err != nil {
		fmt.Println(err)
		return
	}

	res, _ := q.Enqueue(TenantKey.With(ctx, "acme"), &SendInvoice{Invoice: "INV-1"})
	it, _ := q.Item(ctx, res.ID)
	fmt.Println("metadata:", it.Metadata)
	_, _ = q.Enqueue(ctx, &SendInvoice{Invoice: "INV-2"}) // no tenant: none at dispatch either

	if err := q.Start(m); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(<-sent)
	fmt.Println(<-sent)
	_ = q.Shutdown(ctx)
	// Output:
	// metadata: map[tenant:"acme"]
	// sent INV-1 for tenant "acme" (true)
	// sent INV-2 for tenant "" (false)
}
