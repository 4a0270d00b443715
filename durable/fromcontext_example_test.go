package durable_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/mediator"
)

type ChargeCard struct {
	mediator.Command
	Cents int `json:"cents"`
}

// A handler finds out which item it runs, in a scheduler's attempt and in an operator's replay
// of the item's dead letter alike, and uses the item id as its idempotency key.
func ExampleFromContext() {
	dir, _ := os.MkdirTemp("", "durable-from-context")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	dead := make(chan record.DeadLetter, 1)
	q, err := durable.Open(ctx, sqlite.Open(filepath.Join(dir, "queue.db")), durable.Config{Logger: zap.NewNop(),
		Policy: retry.Policy{MaxAttempts: 1}, PollInterval: 10 * time.Millisecond, OnDead: []func(context.Context, record.DeadLetter){func(_ context.Context, d record.DeadLetter) { dead <- d }}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	durable.Register[*ChargeCard](q, "payments.charge")

	gatewayDown := true
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, r *ChargeCard) (mediator.Void, error) {
		d, _ := durable.FromContext(ctx, r)
		if d.DeadLetter != 0 {
			fmt.Printf("replay of dead letter %d, item %d (idempotency key item-%d)\n", d.DeadLetter, d.ItemID, d.ItemID)
		} else {
			fmt.Printf("attempt %d of item %d (idempotency key item-%d)\n", d.Attempt, d.ItemID, d.ItemID)
		}
		if gatewayDown {
			return mediator.Void{}, errors.New("gateway refused the charge")
		}
		return mediator.Void{}, nil
	})
	if err := m.Build(); err != nil {
		fmt.Println(err)
		return
	}
	if err := q.Start(m); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := q.Enqueue(ctx, &ChargeCard{Cents: 1999}); err != nil {
		fmt.Println(err)
		return
	}
	letter := <-dead
	_ = q.Shutdown(ctx)

	gatewayDown = false
	res, err := q.Replay(ctx, m, letter.ID, "alice")
	fmt.Println(res, err)
	// Output:
	// attempt 1 of item 1 (idempotency key item-1)
	// replay of dead letter 1, item 1 (idempotency key item-1)
	// replayed <nil>
}
