package bulkhead_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/bulkhead"
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

// At most one call per endpoint at once; the next is rejected without waiting.
func ExampleNew() {
	release, started := make(chan struct{}), make(chan struct{})
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *GetQuote) (*Quote, error) {
		close(started)
		<-release
		return &Quote{Price: 1}, nil
	})
	m.Use(bulkhead.New(bulkhead.Config{Limit: 1, Key: quoteEndpoint}))
	mustBuild(m)
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = mediator.Send(context.Background(), m, &GetQuote{Endpoint: "a"}) })
	<-started
	_, err := mediator.Send(context.Background(), m, &GetQuote{Endpoint: "a"})
	fmt.Println(err)
	close(release)
	wg.Wait()
	// Output:
	// bulkhead: "a" full (1 concurrent calls)
}
