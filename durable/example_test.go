package durable_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/mediator"
)

type SendInvoice struct {
	mediator.Command
	Invoice string `json:"invoice"`
}

// unavailable is what a remote service says while it is down: retryable.
type unavailable struct{}

func (unavailable) Error() string   { return "invoice service unavailable" }
func (unavailable) StatusCode() int { return 503 }

// A request enqueued for later is dispatched by the scheduler through the mediator.
func Example() {
	dir, _ := os.MkdirTemp("", "durable-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	// 1. Open the queue: an embedded SQLite file, created and migrated on first use.
	q, err := durable.Open(ctx, sqlite.Open(filepath.Join(dir, "queue.db")), durable.Config{PollInterval: 10 * time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	// 2. Register the request types the queue stores, under stable names.
	durable.Register[*SendInvoice](q, "billing.send-invoice")

	sent := make(chan string)
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, r *SendInvoice) (mediator.Void, error) {
		d, _ := durable.FromContext(ctx, r)
		sent <- fmt.Sprintf("sent %s (item %d, attempt %d)", r.Invoice, d.ItemID, d.Attempt)
		return mediator.Void{}, nil
	})
	if err := m.Build(); err != nil {
		fmt.Println(err)
		return
	}

	res, _ := q.Enqueue(ctx, &SendInvoice{Invoice: "INV-1"})
	fmt.Println("enqueued item", res.ID)

	// 3. Run a scheduler in every instance: it dispatches the due items through the mediator.
	if err := q.Start(m); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(<-sent)
	_ = q.Shutdown(ctx)

	st, _ := q.Stats(ctx)
	fmt.Println("succeeded:", st.Counts[record.StateSucceeded])
	items, deadLetters, _ := q.Counts(ctx) // the same counts by name, as metrics.CollectQueue reads them
	fmt.Println(items, deadLetters)
	// Output:
	// enqueued item 1
	// sent INV-1 (item 1, attempt 1)
	// succeeded: 1
	// map[cancelled:0 dead:0 pending:0 running:0 succeeded:1] map[discarded:0 failed:0 replayed:0]
}

// The deferral behavior turns a retryable failure into a durable item and a *DeferredError;
// the scheduler retries the item later.
func ExampleNewDeferral() {
	dir, _ := os.MkdirTemp("", "durable-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	q, _ := durable.Open(ctx, sqlite.Open(filepath.Join(dir, "queue.db")), durable.Config{
		Policy:       retry.Policy{BaseDelay: 10 * time.Millisecond, Jitter: behaviors.Off},
		PollInterval: 10 * time.Millisecond,
	})
	defer q.Close()
	durable.Register[*SendInvoice](q, "billing.send-invoice")

	down := true
	sent := make(chan string)
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, r *SendInvoice) (mediator.Void, error) {
		if down {
			return mediator.Void{}, unavailable{}
		}
		sent <- "sent " + r.Invoice
		return mediator.Void{}, nil
	})
	m.Use(durable.NewDeferral(q, durable.DeferralConfig{}))
	if err := m.Build(); err != nil {
		fmt.Println(err)
		return
	}

	_, err := mediator.Send(ctx, m, &SendInvoice{Invoice: "INV-2"})
	var deferred *durable.DeferredError
	if errors.As(err, &deferred) {
		it, _ := q.Item(ctx, deferred.ItemID)
		fmt.Println("deferred:", errors.Is(err, durable.ErrDeferred), it.State, it.LastError)
	}

	down = false // the service is back before the scheduler starts
	if err := q.Start(m); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(<-sent)
	_ = q.Shutdown(ctx)
	as, _ := q.Attempts(ctx, deferred.ItemID)
	fmt.Println(len(as), "attempt:", as[0].Outcome)
	// Output:
	// deferred: true pending invoice service unavailable
	// sent INV-2
	// 1 attempt: succeeded
}
