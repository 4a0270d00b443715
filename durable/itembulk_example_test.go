package durable_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/mediator"
)

type NotifyLegacy struct {
	mediator.Command
	User int `json:"user"`
}

// The legacy notifier is retired: every pending item of its request is cancelled by one
// action. A dry run counts them first; the action is stored, run by the queue's scheduler,
// throttled, and reports its totals. The items of other requests are not touched.
func ExampleQueue_StartItemBulkAction() {
	dir, _ := os.MkdirTemp("", "durable-item-bulk")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	q, err := durable.Open(ctx, sqlite.Open(filepath.Join(dir, "queue.db")), durable.Config{Logger: zap.NewNop()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	durable.Register[*NotifyLegacy](q, "legacy.notify")
	durable.Register[*SyncOrder](q, "crm.sync-order")
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, r *NotifyLegacy) (mediator.Void, error) { return mediator.Void{}, nil })
	mediator.HandleFunc(m, func(ctx context.Context, r *SyncOrder) (mediator.Void, error) { return mediator.Void{}, nil })
	if err := m.Build(); err != nil {
		fmt.Println(err)
		return
	}
	for i := 1; i <= 3; i++ { // waiting for their retry, an hour from now
		_, _ = q.Enqueue(ctx, &NotifyLegacy{User: i}, durable.WithDelay(time.Hour))
	}
	order, _ := q.Enqueue(ctx, &SyncOrder{Order: 7}, durable.WithDelay(time.Hour))

	spec := durable.ItemBulkActionSpec{
		Kind:   record.BulkCancelItems,
		Filter: durable.ItemFilter{Name: "legacy.notify"},
		Reason: "the legacy notifier is retired",
		Rate:   100, // items per second
	}
	dry, _ := q.StartItemBulkAction(ctx, spec, "alice", durable.DryRun())
	fmt.Println("would cancel:", dry.Matched, "first:", dry.Sample[0].Name)

	if err := q.Start(m); err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = q.Shutdown(ctx) }()
	a, _ := q.StartItemBulkAction(ctx, spec, "alice")
	fmt.Println(a.State)
	for !a.State.Finished() {
		<-time.After(10 * time.Millisecond) // a dashboard polls it
		a, _ = q.ItemBulkAction(ctx, a.ID)
	}
	fmt.Printf("%s: %d of %d cancelled, %d skipped\n", a.State, a.Changed, a.Matched, a.Skipped)
	it, _ := q.Item(ctx, order.ID)
	fmt.Println("the order sync:", it.State)
	// Output:
	// would cancel: 3 first: legacy.notify
	// queued
	// done: 3 of 3 cancelled, 0 skipped
	// the order sync: pending
}
