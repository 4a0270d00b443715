package durable_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/mediator"
)

// Each running scheduler writes its outcomes minute by minute (and the minute in progress at
// Shutdown); History merges the instances' rows per minute, for the last day or any part of
// it, so that what happened while nobody watched is still there to chart.
func ExampleQueue_History() {
	dir, _ := os.MkdirTemp("", "durable-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	q, _ := durable.Open(ctx, sqlite.Open(filepath.Join(dir, "queue.db")), durable.Config{PollInterval: 10 * time.Millisecond})
	defer q.Close()
	durable.Register[*SendInvoice](q, "billing.send-invoice")

	done := make(chan struct{})
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, r *SendInvoice) (mediator.Void, error) {
		done <- struct{}{}
		return mediator.Void{}, nil
	})
	_ = m.Build()
	since := time.Now().Add(-24 * time.Hour)
	for _, inv := range []string{"INV-1", "INV-2", "INV-3"} {
		_, _ = q.Enqueue(ctx, &SendInvoice{Invoice: inv})
	}
	_ = q.Start(m)
	for range 3 {
		<-done
	}
	_ = q.Shutdown(ctx)

	minutes, err := q.History(ctx, since)
	if err != nil {
		fmt.Println(err)
		return
	}
	var succeeded int64
	for _, mi := range minutes {
		succeeded += mi.Outcomes[record.SettledSucceeded]
	}
	fmt.Println("succeeded in the last 24 h:", succeeded)
	// Output:
	// succeeded in the last 24 h: 3
}
