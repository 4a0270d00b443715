package durable_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/mediator"
)

type SyncOrder struct {
	mediator.Command
	Order int `json:"order"`
}

// After an outage, every letter whose error says the CRM timed out is replayed by one
// action: a dry run counts them first; the action is stored, run by the queue's scheduler,
// throttled, and reports its totals.
func ExampleQueue_StartBulkAction() {
	dir, _ := os.MkdirTemp("", "durable-bulk")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	q, err := durable.Open(ctx, sqlite.Open(filepath.Join(dir, "queue.db")), durable.Config{Logger: zap.NewNop()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	durable.Register[*SyncOrder](q, "crm.sync-order")
	down := true
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, r *SyncOrder) (mediator.Void, error) {
		if r.Order == 0 {
			return mediator.Void{}, errors.New("no order number")
		}
		if down {
			return mediator.Void{}, errors.New("crm: Timeout after 10s")
		}
		return mediator.Void{}, nil
	})
	if err := m.Build(); err != nil {
		fmt.Println(err)
		return
	}
	items := []durable.BatchItem{{Key: "o0", Request: &SyncOrder{}}}
	for i := 1; i <= 5; i++ {
		items = append(items, durable.BatchItem{Key: fmt.Sprint("o", i), Request: &SyncOrder{Order: i}})
	}
	res, _ := q.RunBatch(ctx, m, "crm-sync", items)
	fmt.Println("dead letters:", len(res.DeadLetters))
	down = false // the CRM is back

	spec := durable.BulkActionSpec{
		Kind:   record.BulkReplay,
		Filter: durable.DeadLetterFilter{Source: "crm-sync", ErrorContains: "timeout"},
		Rate:   100, // letters per second
	}
	dry, _ := q.StartBulkAction(ctx, spec, "alice", durable.DryRun())
	fmt.Println("would replay:", dry.Matched)

	if err := q.Start(m); err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = q.Shutdown(ctx) }()
	a, _ := q.StartBulkAction(ctx, spec, "alice")
	fmt.Println(a.State)
	for !a.State.Finished() {
		<-time.After(10 * time.Millisecond) // a dashboard polls it
		a, _ = q.BulkAction(ctx, a.ID)
	}
	fmt.Printf("%s: %d of %d settled, %d replayed\n", a.State, a.Totals.Settled(), a.Matched, a.Totals.Replayed)
	st, _ := q.Stats(ctx)
	fmt.Println("left failed:", st.DeadLetters[record.DeadLetterFailed])
	// Output:
	// dead letters: 6
	// would replay: 5
	// queued
	// done: 5 of 5 settled, 5 replayed
	// left failed: 1
}

// "Reset the breaker and replay its letters" is one audited action; an action not wanted any
// more is cancelled, and the audit log keeps both.
func ExampleResetBreakerFirst() {
	dir, _ := os.MkdirTemp("", "durable-bulk-reset")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	q, err := durable.Open(ctx, sqlite.Open(filepath.Join(dir, "queue.db")), durable.Config{Logger: zap.NewNop()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	hosts := breaker.NewRegistry(breaker.Config{})
	hosts.Declare("crm.example:443")
	_ = hosts.Trip("crm.example:443") // the CRM was down

	spec := durable.BulkActionSpec{Kind: record.BulkReplay, Filter: durable.DeadLetterFilter{Source: "crm-sync"}}
	a, err := q.StartBulkAction(ctx, spec, "alice", durable.ResetBreakerFirst(hosts, "crm.example:443"))
	if err != nil {
		fmt.Println(err)
		return
	}
	snap, _ := hosts.Get("crm.example:443")
	fmt.Println(a.State, "after resetting", a.ResetBreaker, "now", snap.State)

	a, _ = q.CancelBulkAction(ctx, a.ID, "bob", "wrong source")
	fmt.Println(a.State)
	list, _ := q.BulkActions(ctx, 0, 0)
	fmt.Println("actions:", len(list))
	entries, _ := q.Audit(ctx, durable.AuditFilter{TargetKind: record.AuditTargetBulkAction})
	for _, e := range entries {
		fmt.Println(e.Actor, e.Action, e.Outcome)
	}
	// Output:
	// queued after resetting crm.example:443 now closed
	// cancelled
	// actions: 1
	// bob cancel_bulk_action done
	// alice bulk_replay done
}
