package behaviors_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
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

// Retry retries 503s up to three attempts in total; the attempt number is in the context.
func ExampleNewRetry() {
	m := mediator.New(nil)
	_ = mediator.HandleFunc(m, func(ctx context.Context, q *GetQuote) (*Quote, error) {
		fmt.Println("attempt", behaviors.Attempt(ctx))
		if behaviors.Attempt(ctx) < 3 {
			return nil, &httpError{503}
		}
		return &Quote{Price: 42}, nil
	})
	_ = m.Use(behaviors.NewRetry(behaviors.RetryConfig{
		Policy: behaviors.RetryPolicy{MaxAttempts: 3, Strategy: behaviors.StrategyExponential, BaseDelay: time.Microsecond},
		OnRetry: func(_ context.Context, e behaviors.RetryEvent) {
			fmt.Printf("attempt %d failed (%v), next in %s\n", e.Attempt, e.Err, e.Delay)
		},
	}))
	mustBuild(m)
	q, err := mediator.Send(context.Background(), m, &GetQuote{})
	fmt.Println(q.Price, err)
	// Output:
	// attempt 1
	// attempt 1 failed (HTTP 503), next in 1µs
	// attempt 2
	// attempt 2 failed (HTTP 503), next in 2µs
	// attempt 3
	// 42 <nil>
}

// The final error says how many attempts were made and keeps the handler's error reachable.
func ExampleRetryError() {
	m := mediator.New(nil)
	_ = mediator.HandleFunc(m, func(context.Context, *GetQuote) (*Quote, error) { return nil, &httpError{502} })
	_ = m.Use(behaviors.NewRetry(behaviors.RetryConfig{Policy: behaviors.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Millisecond}}))
	mustBuild(m)
	_, err := mediator.Send(context.Background(), m, &GetQuote{})
	var he *httpError
	fmt.Println(err)
	fmt.Println(errors.As(err, &he), he.code)
	// Output:
	// behaviors: failed after 2 attempts: HTTP 502
	// true 502
}

// A caller overrides the retry policy of one request; the requests its handler sends keep
// their own.
func ExampleWithRetryOverride() {
	rt := behaviors.NewRetry(behaviors.RetryConfig{Policy: behaviors.RetryPolicy{MaxAttempts: 5, BaseDelay: time.Second}})
	req := &GetQuote{}
	ctx := behaviors.WithRetryOverride(context.Background(), req, behaviors.RetryPolicy{MaxAttempts: 2})
	p := rt.Policy(ctx, req)
	fmt.Println(p.MaxAttempts, p.BaseDelay, p.Strategy, p.MaxDelay)
	fmt.Println(rt.Policy(ctx, &GetQuote{}).MaxAttempts)
	// Output:
	// 2 1s fixed 30s
	// 5
}

// One breaker per endpoint: after three failures the endpoint's breaker opens and calls to it
// fail fast, without reaching the handler.
func ExampleNewCircuitBreaker() {
	reg := behaviors.NewBreakerRegistry(behaviors.BreakerConfig{
		FailureThreshold: 3,
		Clock:            fixedClock{time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)},
		OnStateChange: func(c behaviors.StateChange) {
			fmt.Printf("%s: %s → %s\n", c.Key, c.From, c.To)
		},
	})
	m := mediator.New(nil)
	_ = mediator.HandleFunc(m, func(_ context.Context, q *GetQuote) (*Quote, error) {
		fmt.Println("calling", q.Endpoint)
		return nil, &httpError{503}
	})
	_ = m.Use(behaviors.NewCircuitBreaker(reg, quoteEndpoint))
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
	// behaviors: circuit open for "https://prices.example" (probe in 30s)
	// https://prices.example open 3 30s
}

// Code that sends through its own client uses the registry directly: a gate before the
// call, the outcome after it, and OpenFor to schedule around an open breaker.
func ExampleBreakerRegistry_Gate() {
	reg := behaviors.NewBreakerRegistry(behaviors.BreakerConfig{
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
	// not sent: behaviors: circuit open for "https://ap.example/as4" (probe in 30s)
	// true 30s
	// 0s false
	// behaviors: unknown breaker: "https://unknown.example"
}

type ListRecommendations struct {
	mediator.Returns[[]string]
}

// A generic fallback for every request type that responds with a list: an empty list. Its
// result type is checked against each request type at Build.
func ExampleNewFallback() {
	m := mediator.New(nil)
	_ = mediator.HandleFunc(m, func(context.Context, *ListRecommendations) ([]string, error) {
		return nil, errors.New("recommendations service down")
	})
	_ = m.Use(behaviors.NewFallback(func(_ context.Context, req any, err error) ([]string, error) {
		fmt.Printf("%T degraded: %v\n", req, err)
		return []string{}, nil
	}))
	mustBuild(m)
	recs, err := mediator.Send(context.Background(), m, &ListRecommendations{})
	fmt.Println(len(recs), recs != nil, err)
	// Output:
	// *behaviors_test.ListRecommendations degraded: recommendations service down
	// 0 true <nil>
}

// A typed fallback for one request type.
func ExampleNewFallbackFor() {
	m := mediator.New(nil)
	_ = mediator.HandleFunc(m, func(context.Context, *GetQuote) (*Quote, error) { return nil, &httpError{503} })
	_ = m.Use(behaviors.NewFallbackFor(func(_ context.Context, q *GetQuote, err error) (*Quote, error) {
		return &Quote{Price: 40}, nil // last known price
	}))
	mustBuild(m)
	q, err := mediator.Send(context.Background(), m, &GetQuote{})
	fmt.Println(q.Price, err)
	// Output:
	// 40 <nil>
}

// A handler that honours its context stops at the deadline; the error is typed.
func ExampleNewTimeout() {
	m := mediator.New(nil)
	_ = mediator.HandleFunc(m, func(ctx context.Context, _ *GetQuote) (*Quote, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	_ = m.Use(behaviors.NewTimeout(time.Millisecond))
	mustBuild(m)
	_, err := mediator.Send(context.Background(), m, &GetQuote{})
	fmt.Println(err)
	fmt.Println(errors.Is(err, behaviors.ErrTimeout), behaviors.IsTimeout(err))
	// Output:
	// behaviors: timeout after 1ms: context deadline exceeded
	// true true
}

// Inside retry a timeout bounds each attempt; outside it, the whole call.
func ExampleNewTotalTimeout() {
	for _, timeout := range []*behaviors.Timeout{behaviors.NewTimeout(time.Second), behaviors.NewTotalTimeout(5 * time.Second)} {
		m := mediator.New(nil)
		_ = mediator.HandleFunc(m, func(context.Context, *GetQuote) (*Quote, error) { return &Quote{}, nil })
		_ = m.Use(behaviors.NewRetry(behaviors.RetryConfig{}))
		_ = m.Use(timeout)
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

// At most one call per endpoint at once; the next is rejected without waiting.
func ExampleNewBulkhead() {
	release, started := make(chan struct{}), make(chan struct{})
	m := mediator.New(nil)
	_ = mediator.HandleFunc(m, func(context.Context, *GetQuote) (*Quote, error) {
		close(started)
		<-release
		return &Quote{Price: 1}, nil
	})
	_ = m.Use(behaviors.NewBulkhead(behaviors.BulkheadConfig{Limit: 1, Key: quoteEndpoint}))
	mustBuild(m)
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = mediator.Send(context.Background(), m, &GetQuote{Endpoint: "a"}) })
	<-started
	_, err := mediator.Send(context.Background(), m, &GetQuote{Endpoint: "a"})
	fmt.Println(err)
	close(release)
	wg.Wait()
	// Output:
	// behaviors: bulkhead "a" full (1 concurrent calls)
}

type Signup struct {
	mediator.Returns[int]
	Email string
}

func (s *Signup) Validate() error {
	if s.Email == "" {
		return errors.New("email is required")
	}
	return nil
}

// Requests that implement Validator are checked before the pipeline runs.
func ExampleNewValidation() {
	m := mediator.New(nil)
	_ = mediator.HandleFunc(m, func(context.Context, *Signup) (int, error) { return 1, nil })
	_ = m.Use(behaviors.NewValidation())
	mustBuild(m)
	_, err := mediator.Send(context.Background(), m, &Signup{})
	fmt.Println(err)
	fmt.Println(errors.Is(err, behaviors.ErrValidation), behaviors.Retryable(err))
	// Output:
	// behaviors: invalid *behaviors_test.Signup: email is required
	// true false
}

// A panic in a behavior becomes a *mediator.PanicError.
func ExampleNewRecover() {
	m := mediator.New(nil)
	_ = mediator.HandleFunc(m, func(context.Context, *GetQuote) (*Quote, error) { return &Quote{}, nil })
	_ = m.Use(mediator.BehaviorFunc(func(context.Context, any, mediator.Next) (any, error) { panic("bug in a behavior") }))
	_ = m.Use(behaviors.NewRecover())
	mustBuild(m)
	_, err := mediator.Send(context.Background(), m, &GetQuote{})
	fmt.Println(err, errors.Is(err, mediator.ErrPanic))
	// Output:
	// mediator: panic: bug in a behavior true
}

// The composed resilience chain: fallback outermost, then retry, then the breaker. Once the
// breaker opens, retry stops at once instead of burning its attempts against it, and the
// fallback serves the degraded response.
func Example_chain() {
	reg := behaviors.NewBreakerRegistry(behaviors.BreakerConfig{
		FailureThreshold: 3,
		Clock:            fixedClock{time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)},
	})
	m := mediator.New(nil)
	_ = mediator.HandleFunc(m, func(ctx context.Context, q *GetQuote) (*Quote, error) {
		fmt.Println("  handler, attempt", behaviors.Attempt(ctx))
		return nil, &httpError{503}
	})
	// Registration order does not matter: each behavior knows its place.
	_ = m.Use(behaviors.NewCircuitBreaker(reg, quoteEndpoint))
	_ = m.Use(behaviors.NewFallbackFor(func(_ context.Context, q *GetQuote, err error) (*Quote, error) {
		fmt.Println("  fallback after:", err)
		return &Quote{Price: -1}, nil
	}))
	_ = m.Use(behaviors.NewRetry(behaviors.RetryConfig{Policy: behaviors.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Millisecond}}))
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
	//   fallback after: behaviors: failed after 2 attempts: HTTP 503
	//   => -1 <nil>
	// send 2
	//   handler, attempt 1
	//   fallback after: HTTP 503 (circuit "https://prices.example" opened for 30s)
	//   => -1 <nil>
	// send 3
	//   fallback after: behaviors: circuit open for "https://prices.example" (probe in 30s)
	//   => -1 <nil>
}
