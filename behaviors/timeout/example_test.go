package timeout_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/behaviors/timeout"
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

// A handler that honours its context stops at the deadline; the error is typed.
func ExampleNew() {
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, _ *GetQuote) (*Quote, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	m.Use(timeout.New(timeout.Config{Duration: time.Millisecond}))
	mustBuild(m)
	_, err := mediator.Send(context.Background(), m, &GetQuote{})
	fmt.Println(err)
	fmt.Println(errors.Is(err, timeout.ErrExceeded), behaviors.IsTimeout(err))
	// Output:
	// timeout: exceeded after 1ms: context deadline exceeded
	// true true
}

// Inside retry a timeout bounds each attempt; outside it, the whole call.
func ExampleNew_total() {
	for _, timeout := range []*timeout.Behavior{timeout.New(timeout.Config{Duration: time.Second}), timeout.New(timeout.Config{Duration: 5 * time.Second, Total: true})} {
		m := mediator.New(nil, mediator.Config{})
		mediator.HandleFunc(m, func(context.Context, *GetQuote) (*Quote, error) { return &Quote{}, nil })
		m.Use(retry.New(retry.Config{}))
		m.Use(timeout)
		mustBuild(m)
		chain, _ := mediator.Explain[*GetQuote](m)
		fmt.Print(chain)
	}
	// Output:
	// retry (default, 50)
	//   timeout (default, 70)
	//     handler
	// timeout (default, 49)
	//   retry (default, 50)
	//     handler
}
