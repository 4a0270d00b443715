package durable_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/mediator"
)

type SendStatement struct {
	mediator.Command
	Number string `json:"number"`
}

// An operator lists the pending items a page at a time, cancels one that should not run, and
// makes another, due later, run now; the audit log keeps who did what.
func ExampleQueue_Items() {
	dir, _ := os.MkdirTemp("", "durable-items")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	q, err := durable.Open(ctx, sqlite.Open(filepath.Join(dir, "queue.db")), durable.Config{Logger: zap.NewNop()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	durable.Register[*SendStatement](q, "billing.send-statement")
	for _, n := range []string{"A-1", "A-2", "A-3"} {
		if _, err := q.Enqueue(ctx, &SendStatement{Number: n}, durable.WithDelay(time.Hour)); err != nil {
			fmt.Println(err)
			return
		}
	}

	f := durable.ItemFilter{State: record.StatePending, Name: "billing.send-statement", Limit: 2}
	var ids []record.ItemID
	for {
		page, err := q.Items(ctx, f)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, it := range page.Items {
			fmt.Printf("%s %s\n", it.State, it.Payload)
			ids = append(ids, it.ID)
		}
		if page.Next == "" {
			break
		}
		f.After = page.Next
	}

	res, err := q.Cancel(ctx, ids[1], "ops@example", "invoice A-2 was sent by hand")
	fmt.Println("cancel:", res, err)
	res, err = q.RunNow(ctx, ids[2], "ops@example")
	fmt.Println("run now:", res, err)
	res, err = q.Cancel(ctx, ids[1], "ops@example", "again")
	fmt.Println("cancel again:", res, err)

	log, _ := q.Audit(ctx, durable.AuditFilter{TargetKind: record.AuditTargetItem})
	for _, e := range log {
		fmt.Println(strings.TrimSpace(fmt.Sprintln(e.Action, e.Outcome, e.Actor, e.Detail)))
	}
	// Output:
	// pending {"number":"A-1"}
	// pending {"number":"A-2"}
	// pending {"number":"A-3"}
	// cancel: cancelled <nil>
	// run now: due <nil>
	// cancel again: finished <nil>
	// cancel no_change ops@example the item had finished: cancelled; reason: again
	// run_now done ops@example
	// cancel done ops@example reason: invoice A-2 was sent by hand
}

// RunNow does not bypass a pause: an item whose request name is paused stays as it is
// (ItemPaused), and the audit log names the pause. Resumed, the item can be run now.
func ExampleQueue_RunNow_paused() {
	dir, _ := os.MkdirTemp("", "durable-runnow")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	q, err := durable.Open(ctx, sqlite.Open(filepath.Join(dir, "queue.db")), durable.Config{Logger: zap.NewNop()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	durable.Register[*SendStatement](q, "billing.send-statement")
	e, err := q.Enqueue(ctx, &SendStatement{Number: "B-7"}, durable.WithDelay(time.Hour))
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := q.Pause(ctx, durable.NameTarget("billing.send-statement"), "alice", durable.PauseReason("printer jam")); err != nil {
		fmt.Println(err)
		return
	}
	res, err := q.RunNow(ctx, e.ID, "bob")
	fmt.Println("run now:", res, err)
	log, _ := q.Audit(ctx, durable.AuditFilter{TargetKind: record.AuditTargetItem})
	fmt.Println(log[0].Outcome, log[0].Detail)

	if _, err := q.Resume(ctx, durable.NameTarget("billing.send-statement"), "alice"); err != nil {
		fmt.Println(err)
		return
	}
	res, err = q.RunNow(ctx, e.ID, "bob")
	fmt.Println("run now after the resume:", res, err)
	// Output:
	// run now: paused <nil>
	// no_change the item is held back by the pause of name billing.send-statement by alice until resumed; reason: printer jam; resume it to run the item
	// run now after the resume: due <nil>
}
