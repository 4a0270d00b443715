package hedge_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/budget"
	"github.com/switchboard-go/switchboard/behaviors/hedge"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/mediator"
)

// GetPrice is a read: safe to send twice at once.
type GetPrice struct {
	mediator.Returns[string]
	Symbol string
}

// Idempotent marks the requests that may be hedged.
func (*GetPrice) Idempotent() {}

// Idempotent is implemented by the requests that may be hedged.
type Idempotent interface{ Idempotent() }

// A call still running after the delay is hedged: here the first attempt hangs, the hedge
// answers, and the first is cancelled before Send returns. The behavior applies to the
// idempotent requests alone.
func ExampleNew() {
	var attempts atomic.Int32
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, q *GetPrice) (string, error) {
		if attempts.Add(1) == 1 {
			<-ctx.Done() // a slow replica: it answers only when cancelled
			fmt.Println("first attempt cancelled:", ctx.Err())
			return "", ctx.Err()
		}
		return q.Symbol + " 101.5", nil
	})
	m.Use(hedge.New(hedge.Config{
		Delay: 5 * time.Millisecond,
		OnHedge: []func(context.Context, hedge.Notice){func(_ context.Context, n hedge.Notice) {
			fmt.Println(n.Phase, "attempt", n.Attempt)
		}},
	}), mediator.ForInterface[Idempotent]())
	if err := m.Build(); err != nil {
		fmt.Println(err)
		return
	}
	price, err := mediator.Send(context.Background(), m, &GetPrice{Symbol: "ACME"})
	fmt.Println(price, err)
	// Output:
	// sent attempt 1
	// first attempt cancelled: context canceled
	// won attempt 1
	// cancelled attempt 0
	// ACME 101.5 <nil>
}

// Hedges share a retry budget with retry: with no room left in it, the hedge is refused, not
// sent, and the call waits for its first attempt.
func ExampleConfig_budget() {
	b := budget.New(budget.Config{Ratio: 0.01, Floor: budget.NoFloor}) // one call allows no retry
	refused := make(chan struct{})
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, q *GetPrice) (string, error) {
		<-refused // slow: still running when its hedge is refused
		return q.Symbol + " 99.0", nil
	})
	m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3}, Budget: b}), mediator.ForInterface[Idempotent]())
	m.Use(hedge.New(hedge.Config{
		Delay:  time.Millisecond,
		Budget: b,
		OnHedge: []func(context.Context, hedge.Notice){func(_ context.Context, n hedge.Notice) {
			fmt.Println(n.Phase, "attempt", n.Attempt, "-", errors.Is(n.Err, budget.ErrSpent))
			close(refused)
		}},
	}), mediator.ForInterface[Idempotent]())
	if err := m.Build(); err != nil {
		fmt.Println(err)
		return
	}
	price, err := mediator.Send(context.Background(), m, &GetPrice{Symbol: "ACME"})
	fmt.Println(price, err)
	// Output:
	// refused attempt 1 - true
	// ACME 99.0 <nil>
}
