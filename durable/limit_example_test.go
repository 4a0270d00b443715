package durable_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/sqlite"
)

// An operator lets at most 4 items of a provider's key run at once across the fleet, then
// raises the limit; the listing shows each limit with the items of its key running now, and
// the audit log has both changes.
func ExampleQueue_SetConcurrencyLimit() {
	dir, _ := os.MkdirTemp("", "durable-limit")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	q, err := durable.Open(ctx, sqlite.Open(filepath.Join(dir, "queue.db")), durable.Config{Logger: zap.NewNop()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	durable.Register[*SendReceipt](q, "shop.send-receipt")

	if _, err := q.SetConcurrencyLimit(ctx, "smtp.example.com", 4, "alice", durable.LimitReason("their connection limit")); err != nil {
		fmt.Println(err)
		return
	}
	// Items of the key: the key their enqueue names, or their breaker's key function's.
	if _, err := q.Enqueue(ctx, &SendReceipt{Order: "o-1"}, durable.WithBreakerKey("smtp.example.com")); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := q.SetConcurrencyLimit(ctx, "smtp.example.com", 8, "bob"); err != nil {
		fmt.Println(err)
		return
	}
	limits, _ := q.ConcurrencyLimits(ctx)
	for _, l := range limits {
		fmt.Printf("%s: %d of %d running, set by %s\n", l.Key, l.InUse, l.Max, l.Actor)
	}
	_, err = q.SetConcurrencyLimit(ctx, "smtp.example.com", 0, "bob")
	fmt.Println(err)

	removed, _ := q.RemoveConcurrencyLimit(ctx, "smtp.example.com", "carol")
	fmt.Println("removed:", removed)
	log, _ := q.Audit(ctx, durable.AuditFilter{})
	for _, e := range log {
		fmt.Println(e.Action, e.Target, "by", e.Actor)
	}
	// Output:
	// smtp.example.com: 0 of 8 running, set by bob
	// durable: SetConcurrencyLimit: n 0 is outside [1, 1000000]: a limit lets at least one item run (pause the key to hold them all back)
	// removed: true
	// remove_concurrency_limit smtp.example.com by carol
	// set_concurrency_limit smtp.example.com by bob
	// set_concurrency_limit smtp.example.com by alice
}
