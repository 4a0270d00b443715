package durable_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/mediator"
)

// Export sends a tenant's record to its warehouse.
type Export struct {
	mediator.Command
	Tenant string `json:"tenant"`
	Urgent bool   `json:"urgent"`
}

// A tenant's bulk import does not hold up another tenant: the claim takes the due items of the
// fairness keys in turn. Here 100 items of tenant "bulk" are due before 2 of tenant "acme"; the
// first claim of four workers takes two of each. Within a key, priority goes first: the urgent
// item of "bulk", enqueued last, is in that first claim.
func ExampleWithFairness() {
	dir, _ := os.MkdirTemp("", "durable-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	q, _ := durable.Open(ctx, sqlite.Open(filepath.Join(dir, "queue.db")), durable.Config{Workers: 4})
	defer q.Close()
	durable.Register[*Export](q, "export", durable.WithFairness(func(e *Export) string { return e.Tenant }))

	started := make(chan *Export, 4)
	release := make(chan struct{})
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, e *Export) (mediator.Void, error) {
		select {
		case started <- e:
			<-release // hold the four workers until the first claim is read
		default:
		}
		return mediator.Void{}, nil
	})
	_ = m.Build()

	for range 100 {
		_, _ = q.Enqueue(ctx, &Export{Tenant: "bulk"})
	}
	_, _ = q.Enqueue(ctx, &Export{Tenant: "acme"})
	_, _ = q.Enqueue(ctx, &Export{Tenant: "acme"})
	_, _ = q.Enqueue(ctx, &Export{Tenant: "bulk", Urgent: true}, durable.WithPriority(9))
	_ = q.Start(m)
	defer func() { _ = q.Shutdown(ctx) }()

	var first []string
	for range 4 {
		e := <-started
		first = append(first, fmt.Sprintf("%s urgent=%v", e.Tenant, e.Urgent))
	}
	close(release)
	slices.Sort(first)
	for _, f := range first {
		fmt.Println(f)
	}
	// Output:
	// acme urgent=false
	// acme urgent=false
	// bulk urgent=false
	// bulk urgent=true
}

// The busiest keys of an instance's recent claims, and each one's share: here tenant "bulk"
// had three of the four items claimed.
func ExampleQueue_BusiestKeys() {
	dir, _ := os.MkdirTemp("", "durable-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	q, _ := durable.Open(ctx, sqlite.Open(filepath.Join(dir, "queue.db")), durable.Config{})
	defer q.Close()
	durable.Register[*Export](q, "export", durable.WithFairness(func(e *Export) string { return e.Tenant }))

	done := make(chan struct{}, 4)
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, e *Export) (mediator.Void, error) {
		done <- struct{}{}
		return mediator.Void{}, nil
	})
	_ = m.Build()
	for _, tenant := range []string{"bulk", "bulk", "acme", "bulk"} {
		_, _ = q.Enqueue(ctx, &Export{Tenant: tenant})
	}
	_ = q.Start(m)
	defer func() { _ = q.Shutdown(ctx) }()
	for range 4 {
		<-done
	}

	shares := q.BusiestKeys(1)
	for _, k := range shares.Keys {
		fmt.Printf("%s: %d of %d claims (%.0f%%)\n", k.Key, k.Claims, shares.Total, 100*k.Share)
	}
	fmt.Println("others:", shares.Others)
	// Output:
	// bulk: 3 of 4 claims (75%)
	// others: 1
}
