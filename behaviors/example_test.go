package behaviors_test

import (
	"context"
	"fmt"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/fallback"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/mediator"
)

// GetQuote asks a remote pricing endpoint for a quote.
type GetQuote struct {
	mediator.Returns[*Quote]
	Endpoint string
}

// Quote is the response of GetQuote.
type Quote struct{ Price int }

// httpError is what a client returns for a non-2xx response.
type httpError struct{ code int }

func (e *httpError) Error() string   { return fmt.Sprintf("HTTP %d", e.code) }
func (e *httpError) StatusCode() int { return e.code }

// fixedClock is a Clock that stands still, so examples print exact durations.
type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }
func (c fixedClock) After(d time.Duration) (<-chan time.Time, func() bool) {
	return behaviors.SystemClock.After(d)
}

func quoteEndpoint(req any) string { return req.(*GetQuote).Endpoint }

func mustBuild(m *mediator.Mediator) *mediator.Mediator {
	if err := m.Build(); err != nil {
		panic(err)
	}
	return m
}

// The composed resilience chain: fallback outermost, then retry, then the breaker. Once the
// breaker opens, retry stops at once instead of burning its attempts against it, and the
// fallback serves the degraded response.
func Example_chain() {
	reg := breaker.NewRegistry(breaker.Config{
		Key:              quoteEndpoint,
		FailureThreshold: 3,
		Clock:            fixedClock{time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)},
	})
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, q *GetQuote) (*Quote, error) {
		fmt.Println("  handler, attempt", retry.AttemptNumber(ctx))
		return nil, &httpError{503}
	})
	// Registration order does not matter: each behavior knows its place.
	m.Use(breaker.New(reg))
	m.Use(fallback.NewFor(func(_ context.Context, q *GetQuote, err error) (*Quote, error) {
		fmt.Println("  fallback after:", err)
		return &Quote{Price: -1}, nil
	}, fallback.Config{}))
	m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 2, BaseDelay: time.Millisecond}}))
	mustBuild(m)
	chain, _ := mediator.Explain[*GetQuote](m)
	fmt.Print(chain)
	for i := 1; i <= 3; i++ {
		fmt.Println("send", i)
		q, err := mediator.Send(context.Background(), m, &GetQuote{Endpoint: "https://prices.example"})
		fmt.Println("  =>", q.Price, err)
	}
	// Output:
	// fallback (default, 30)
	//   retry (default, 50)
	//     circuit-breaker (default, 60)
	//       handler
	// send 1
	//   handler, attempt 1
	//   handler, attempt 2
	//   fallback after: retry: failed after 2 attempts: HTTP 503
	//   => -1 <nil>
	// send 2
	//   handler, attempt 1
	//   fallback after: HTTP 503 (circuit "https://prices.example" opened for 30s)
	//   => -1 <nil>
	// send 3
	//   fallback after: breaker: circuit open for "https://prices.example" (probe in 30s)
	//   => -1 <nil>
}

// PausedError is the refusal of a behavior of your own: an operator paused billing.
type PausedError struct{ req any }

func (e *PausedError) Error() string { return "billing is paused" }
func (e *PausedError) Refusal() behaviors.RefusalInfo {
	return behaviors.RefusalInfo{By: "pause", Key: "billing", Request: e.req}
}

// A refusal of a behavior of your own is treated as a breaker's: retry does not retry it
// (whatever its Classifier says), the breaker does not count it, and its outcome is refused.
func ExampleRefusal() {
	reg := breaker.NewRegistry(breaker.Config{Key: quoteEndpoint, FailureThreshold: 1})
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *GetQuote) (*Quote, error) { return &Quote{Price: 1}, nil })
	m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3, Classifier: func(error) bool { return true }}}))
	m.Use(breaker.New(reg))
	m.Use(mediator.BehaviorFunc(func(ctx context.Context, req any, next mediator.Next) (any, error) {
		fmt.Println("  refused")
		return nil, &PausedError{req: req}
	}), mediator.WithOrder(behaviors.BulkheadOrder))

	ctx, req := context.Background(), &GetQuote{Endpoint: "billing"}
	_, err := mediator.Send(ctx, mustBuild(m), req)
	fmt.Println(err, behaviors.IsRefusal(err), behaviors.OutcomeOf(ctx, req, err))
	s, _ := reg.Get("billing")
	fmt.Println("breaker", s.State, "failures", s.Failures)
	// Output:
	//   refused
	// billing is paused true refused
	// breaker closed failures 0
}
