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

type SendReceipt struct {
	mediator.Command
	Order string `json:"order"`
}

// An operator pauses a request name while its provider is down: every instance stops claiming
// its items, which wait, pending and untouched. A pause of a breaker key holds back only the
// items of that key, until a time. Both are in the audit log.
func ExampleQueue_Pause() {
	dir, _ := os.MkdirTemp("", "durable-pause")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	q, err := durable.Open(ctx, sqlite.Open(filepath.Join(dir, "queue.db")), durable.Config{Logger: zap.NewNop()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	durable.Register[*SendReceipt](q, "shop.send-receipt")

	if _, err := q.Pause(ctx, durable.NameTarget("shop.send-receipt"), "alice", durable.PauseReason("mail provider outage")); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := q.Pause(ctx, durable.KeyTarget("smtp.example.com"), "alice",
		durable.PauseUntil(time.Now().Add(time.Hour)), durable.PauseReason("rate limited")); err != nil {
		fmt.Println(err)
		return
	}
	pauses, _ := q.Pauses(ctx)
	for _, p := range pauses {
		fmt.Printf("%s %s by %s (%s), timed: %v\n", p.Kind, p.Target, p.Actor, p.Reason, !p.Until.IsZero())
	}

	resumed, _ := q.Resume(ctx, durable.NameTarget("shop.send-receipt"), "bob")
	fmt.Println("resumed:", resumed)
	log, _ := q.Audit(ctx, durable.AuditFilter{TargetKind: record.AuditTargetName})
	for _, e := range log {
		fmt.Println(e.Action, e.Target, "by", e.Actor)
	}
	// Output:
	// breaker_key smtp.example.com by alice (rate limited), timed: true
	// name shop.send-receipt by alice (mail provider outage), timed: false
	// resumed: true
	// resume shop.send-receipt by bob
	// pause shop.send-receipt by alice
}
