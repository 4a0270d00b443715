package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
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

// stepClock is a Clock that stands still until a wait, which passes at once and moves it on by
// the wait, so examples and tests neither sleep nor depend on the machine's speed; a handler
// moves it to spend time.
type stepClock struct{ now time.Time }

func (c *stepClock) Now() time.Time { return c.now }
func (c *stepClock) After(d time.Duration) (<-chan time.Time, func() bool) {
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch, func() bool { return false }
}

func quoteEndpoint(req any) string { return req.(*GetQuote).Endpoint }

func mustBuild(m *mediator.Mediator) *mediator.Mediator {
	if err := m.Build(); err != nil {
		panic(err)
	}
	return m
}

// Retry retries 503s up to three attempts in total; the attempt number is in the context.
func ExampleNew() {
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, q *GetQuote) (*Quote, error) {
		fmt.Println("attempt", retry.AttemptNumber(ctx))
		if retry.AttemptNumber(ctx) < 3 {
			return nil, &httpError{503}
		}
		return &Quote{Price: 42}, nil
	})
	m.Use(retry.New(retry.Config{
		Policy: retry.Policy{MaxAttempts: 3, Strategy: retry.Exponential, BaseDelay: time.Microsecond},
		OnRetry: []func(context.Context, retry.Event){func(_ context.Context, e retry.Event) {
			fmt.Printf("attempt %d failed (%v), next in %s\n", e.Attempt, e.Err, e.Delay)
		}},
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
func ExampleExhaustedError() {
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *GetQuote) (*Quote, error) { return nil, &httpError{502} })
	m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 2, BaseDelay: time.Millisecond}}))
	mustBuild(m)
	_, err := mediator.Send(context.Background(), m, &GetQuote{})
	var he *httpError
	fmt.Println(err)
	fmt.Println(errors.As(err, &he), he.code)
	// Output:
	// retry: failed after 2 attempts: HTTP 502
	// true 502
}

// A caller overrides the retry policy of one request; the requests its handler sends keep
// their own.
func ExampleWithOverride() {
	rt := retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 5, BaseDelay: time.Second}})
	req := &GetQuote{}
	ctx := retry.WithOverride(context.Background(), req, retry.Policy{MaxAttempts: 2})
	p := rt.Policy(ctx, req)
	fmt.Println(p.MaxAttempts, p.BaseDelay, p.Strategy, p.MaxDelay)
	fmt.Println(rt.Policy(ctx, &GetQuote{}).MaxAttempts)
	// Output:
	// 2 1s fixed 30s
	// 5
}

// Delay grows exponentially up to MaxDelay and never overflows; r, the jitter draw, spreads it
// by ±10 % when Jitter is On.
func ExamplePolicy_Delay() {
	p := retry.Policy{Strategy: retry.Exponential, BaseDelay: time.Second, Multiplier: 2, MaxDelay: time.Minute}
	for _, n := range []int{1, 2, 3, 6, 7, 1_000_000} {
		fmt.Println(n, p.Delay(n, 0.5))
	}
	p.Jitter = behaviors.On
	fmt.Println(p.Delay(1, 0), p.Delay(1, 0.5), p.Delay(1, 0.75))
	// Output:
	// 1 1s
	// 2 2s
	// 3 4s
	// 6 32s
	// 7 1m0s
	// 1000000 1m0s
	// 900ms 1s 1.05s
}

// Validate reports every invalid field, each naming its field and value; the retry behavior's
// Build, the durable queue's Open and its Register refuse such a policy.
func ExamplePolicy_Validate() {
	err := retry.Policy{MaxAttempts: -1, Multiplier: 0.5}.Validate()
	fmt.Println(errors.Is(err, retry.ErrInvalidPolicy))
	fmt.Println(err)
	// Output:
	// true
	// retry: invalid retry policy: MaxAttempts -1 is negative
	// retry: invalid retry policy: Multiplier 0.5 is not a finite number of at least 1
}

// A quote is worthless after a while: MaxAge ends the retries when the next one would start
// more than MaxAge after the first attempt, and the final error says so. Here a retry every
// second with MaxAge 2.5 s makes the attempts at 0, 1 and 2 s, not the one at 3 s.
func ExamplePolicy_maxAge() {
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, q *GetQuote) (*Quote, error) {
		fmt.Println("attempt", retry.AttemptNumber(ctx))
		return nil, &httpError{503}
	})
	m.Use(retry.New(retry.Config{
		Policy: retry.Policy{MaxAttempts: 10, BaseDelay: time.Second, MaxAge: 2500 * time.Millisecond},
		Clock:  &stepClock{},
	}))
	mustBuild(m)
	_, err := mediator.Send(context.Background(), m, &GetQuote{})
	fmt.Println(err)
	var re *retry.ExhaustedError
	fmt.Println(errors.As(err, &re), re.Attempts, re.MaxAge)
	// Output:
	// attempt 1
	// attempt 2
	// attempt 3
	// retry: failed after 3 attempts (retries stopped: the next attempt would start more than MaxAge 2.5s after the first failure): HTTP 503
	// true 3 2.5s
}
