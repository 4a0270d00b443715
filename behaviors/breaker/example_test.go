package breaker_test

import (
	"context"
	"fmt"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
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

// One breaker per endpoint: after three failures the endpoint's breaker opens and calls to it
// fail fast, without reaching the handler.
func ExampleNew() {
	reg := breaker.NewRegistry(breaker.Config{
		Key:              quoteEndpoint,
		FailureThreshold: 3,
		Clock:            fixedClock{time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)},
		OnStateChange: []func(breaker.StateChange){func(c breaker.StateChange) {
			fmt.Printf("%s: %s → %s\n", c.Key, c.From, c.To)
		}},
	})
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(_ context.Context, q *GetQuote) (*Quote, error) {
		fmt.Println("calling", q.Endpoint)
		return nil, &httpError{503}
	})
	m.Use(breaker.New(reg))
	mustBuild(m)
	for range 4 {
		_, err := mediator.Send(context.Background(), m, &GetQuote{Endpoint: "https://prices.example"})
		fmt.Println(err)
	}
	for _, s := range reg.Snapshot() {
		fmt.Println(s.Key, s.State, s.Failures, s.Remaining)
	}
	// Output:
	// calling https://prices.example
	// HTTP 503
	// calling https://prices.example
	// HTTP 503
	// calling https://prices.example
	// https://prices.example: closed → open
	// HTTP 503 (circuit "https://prices.example" opened for 30s)
	// breaker: circuit open for "https://prices.example" (probe in 30s)
	// https://prices.example open 3 30s
}

// Code that sends through its own client uses the registry directly: a gate before the
// call, the outcome after it, and OpenFor to schedule around an open breaker.
func ExampleRegistry_Gate() {
	reg := breaker.NewRegistry(breaker.Config{
		FailureThreshold: 1,
		Clock:            fixedClock{time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)},
	})
	send := func(endpoint string) error { return &httpError{504} }
	for range 2 {
		p, err := reg.Gate("https://ap.example/as4")
		if err != nil {
			fmt.Println("not sent:", err)
			continue
		}
		err = send("https://ap.example/as4")
		p.Done(context.Background(), err)
		fmt.Println("sent:", err)
	}
	remaining, open := reg.OpenFor("https://ap.example/as4")
	fmt.Println(open, remaining)
	_ = reg.Reset("https://ap.example/as4")
	fmt.Println(reg.OpenFor("https://ap.example/as4"))
	fmt.Println(reg.Trip("https://unknown.example"))
	// Output:
	// sent: HTTP 504
	// not sent: breaker: circuit open for "https://ap.example/as4" (probe in 30s)
	// true 30s
	// 0s false
	// breaker: unknown breaker: "https://unknown.example"
}

// An eviction listener drops what is kept per key (here a set of keys seen) when the registry
// evicts the key's breaker.
func ExampleRegistry_AddEvictionListener() {
	reg := breaker.NewRegistry(breaker.Config{})
	seen := map[string]bool{}
	reg.AddEvictionListener(func(key string) { delete(seen, key) })
	for _, host := range []string{"a.example", "b.example"} {
		p, _ := reg.Gate(host)
		p.Success()
		seen[host] = true
	}
	reg.Sweep() // clears the marks of the breakers used since the previous sweep
	fmt.Println(reg.Sweep(), len(seen))
	// Output:
	// 2 0
}
