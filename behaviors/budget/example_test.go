package budget_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/budget"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/mediator"
)

// GetQuote asks a remote pricing endpoint for a quote.
type GetQuote struct {
	mediator.Returns[*Quote]
	Symbol string
}

// Quote is the response of GetQuote.
type Quote struct{ Price int }

// unavailable is what the pricing client returns while the endpoint is down.
type unavailable struct{}

func (unavailable) Error() string   { return "HTTP 503" }
func (unavailable) StatusCode() int { return 503 }

// During an outage, a budget of 20 % (plus a floor of 1 retry a second over a 10 s window)
// holds the load on the failing endpoint near its call rate, though the policy allows five
// attempts per call.
func Example() {
	received := 0
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, q *GetQuote) (*Quote, error) {
		received++
		return nil, unavailable{}
	})
	b := budget.New(budget.Config{
		Ratio:  0.2,              // retries at most 20 % of the calls...
		Floor:  1,                // ...plus 1 retry per second whatever the traffic
		Window: 10 * time.Second, // counted over the last 10 s
		Key:    func(any) string { return "quotes-api" },
	})
	m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 5, BaseDelay: time.Millisecond}, Budget: b}))
	if err := m.Build(); err != nil {
		panic(err)
	}
	var last error
	for range 50 {
		_, last = mediator.Send(context.Background(), m, &GetQuote{Symbol: "ACME"})
	}
	fmt.Println("calls sent: 50, received by the endpoint:", received)
	fmt.Println("stopped by the budget:", errors.Is(last, budget.ErrSpent))
	fmt.Println(last)
	u := b.Snapshot()[0]
	fmt.Printf("%s: %d calls, %d retries, %d refused\n", u.Key, u.Calls, u.Retries, u.Refused)
	// Output:
	// calls sent: 50, received by the endpoint: 70
	// stopped by the budget: true
	// retry: failed after 2 attempts (retries stopped: retry budget "quotes-api" exceeded, 20 retries of 50 calls in 10s): HTTP 503
	// quotes-api: 50 calls, 20 retries, 48 refused
}
