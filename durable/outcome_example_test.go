package durable_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/sqlite"
)

// A request given the same token every time it is enqueued (here the invoice number) is
// stored once, however often it is enqueued again: after an unknown outcome, after a crash.
func ExampleWithToken() {
	dir, _ := os.MkdirTemp("", "durable-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	q, _ := durable.Open(ctx, sqlite.Open(filepath.Join(dir, "queue.db")), durable.Config{})
	defer q.Close()
	durable.Register[*SendInvoice](q, "billing.send-invoice")

	req := &SendInvoice{Invoice: "INV-7"}
	res, err := q.Enqueue(ctx, req, durable.WithToken("invoice:INV-7"))
	if unknown, ok := errors.AsType[*durable.OutcomeUnknownError](err); ok {
		// Sent, but the answer was lost: enqueueing under the token again stores it once.
		res, err = q.Enqueue(ctx, req, durable.WithToken(unknown.Token))
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("enqueued item", res.ID, "duplicate:", res.Duplicate)

	again, _ := q.Enqueue(ctx, req, durable.WithToken("invoice:INV-7"))
	fmt.Println("again: item", again.ID, "duplicate:", again.Duplicate)

	it, _ := q.ItemByToken(ctx, "invoice:INV-7")
	fmt.Println("by token: item", it.ID, it.State)
	// Output:
	// enqueued item 1 duplicate: false
	// again: item 1 duplicate: true
	// by token: item 1 pending
}

// A request that encodes to more than Config.MaxPayloadBytes is refused before the database
// sees it.
func ExamplePayloadTooLargeError() {
	dir, _ := os.MkdirTemp("", "durable-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	q, _ := durable.Open(ctx, sqlite.Open(filepath.Join(dir, "queue.db")), durable.Config{MaxPayloadBytes: 64})
	defer q.Close()
	durable.Register[*SendInvoice](q, "billing.send-invoice")

	_, err := q.Enqueue(ctx, &SendInvoice{Invoice: strings.Repeat("9", 100)})
	if tooLarge, ok := errors.AsType[*durable.PayloadTooLargeError](err); ok {
		fmt.Println(errors.Is(err, durable.ErrPayloadTooLarge), tooLarge.Name, tooLarge.Size, tooLarge.Limit)
	}
	items, _ := q.List(ctx, durable.Filter{})
	fmt.Println("stored:", len(items))
	// Output:
	// true billing.send-invoice 114 64
	// stored: 0
}
