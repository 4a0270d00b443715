package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/ratelimit"
	"github.com/switchboard-go/switchboard/mediator"
)

// GetQuote asks a remote pricing endpoint for a quote.
type GetQuote struct {
	mediator.Returns[*Quote]
	Endpoint string
}

// Quote is the response of GetQuote.
type Quote struct{ Price int }

// stillClock is a Clock that stands still, so examples print exact waits.
type stillClock struct{ t time.Time }

func (c stillClock) Now() time.Time { return c.t }
func (c stillClock) After(d time.Duration) (<-chan time.Time, func() bool) {
	return behaviors.SystemClock.After(d)
}

func mustBuild(m *mediator.Mediator) *mediator.Mediator {
	if err := m.Build(); err != nil {
		panic(err)
	}
	return m
}

// Two calls a second per endpoint, the second refused with the wait until its permit.
func ExampleNew() {
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *GetQuote) (*Quote, error) { return &Quote{Price: 1}, nil })
	m.Use(ratelimit.New(ratelimit.Config{Rate: 2, Clock: stillClock{time.Unix(0, 0)},
		Key: func(req any) string { return req.(*GetQuote).Endpoint }}))
	mustBuild(m)
	for _, endpoint := range []string{"a", "a", "b"} {
		_, err := mediator.Send(context.Background(), m, &GetQuote{Endpoint: endpoint})
		fmt.Printf("%s: %v (retry after %v, refusal %v)\n", endpoint, err, behaviors.RetryAfter(err), behaviors.IsRefusal(err))
	}
	// Output:
	// a: <nil> (retry after 0s, refusal false)
	// a: rate limit: "a" over 2 per second (next permit in 500ms) (retry after 500ms, refusal true)
	// b: <nil> (retry after 0s, refusal false)
}

// With MaxWait a call waits for its permit; the observers see how long.
func ExampleConfig_maxWait() {
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *GetQuote) (*Quote, error) { return &Quote{Price: 1}, nil })
	m.Use(ratelimit.New(ratelimit.Config{Rate: 50, Burst: 2, MaxWait: 100 * time.Millisecond,
		OnPermit: []func(context.Context, ratelimit.PermitEvent){func(_ context.Context, e ratelimit.PermitEvent) {
			fmt.Println("permit after", e.Wait.Round(10*time.Millisecond))
		}}}))
	mustBuild(m)
	for range 3 {
		if _, err := mediator.Send(context.Background(), m, &GetQuote{}); err != nil {
			fmt.Println(err)
		}
	}
	// A durable queue's dispatch does not wait: the queue parks the item until the permit.
	stored := &GetQuote{}
	_, err := mediator.Send(mediator.WithMarks(context.Background(), stored, mediator.Stored), m, stored)
	fmt.Println("stored dispatch refused:", errors.Is(err, ratelimit.ErrLimited))
	// Output:
	// permit after 0s
	// permit after 0s
	// permit after 20ms
	// stored dispatch refused: true
}

// SendMessage sends a message over a channel: "sms", "email", ...
type SendMessage struct {
	mediator.Returns[*Sent]
	Channel string
}

// Sent is the response of SendMessage.
type Sent struct{}

// One limiter, a rate per channel: sms at 2 a second, email at 4 (two at once after a quiet
// spell), and every channel not listed at the default 1.
func ExampleConfig_limits() {
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *SendMessage) (*Sent, error) { return &Sent{}, nil })
	rl := ratelimit.New(ratelimit.Config{
		Rate: 1, // the channels not listed
		Limits: map[string]ratelimit.Limit{
			"sms":   {Rate: 2},
			"email": {Rate: 4, Burst: 2},
		},
		Key:   func(req any) string { return req.(*SendMessage).Channel },
		Clock: stillClock{time.Unix(0, 0)},
	})
	m.Use(rl)
	mustBuild(m)
	for _, channel := range []string{"sms", "sms", "email", "email", "email", "push", "push"} {
		_, err := mediator.Send(context.Background(), m, &SendMessage{Channel: channel})
		fmt.Printf("%s: %v\n", channel, err)
	}
	for _, s := range rl.Snapshot() {
		fmt.Printf("%s: %g a second, burst %d\n", s.Key, s.Rate, s.Burst)
	}
	// Output:
	// sms: <nil>
	// sms: rate limit: "sms" over 2 per second (next permit in 500ms)
	// email: <nil>
	// email: <nil>
	// email: rate limit: "email" over 4 per second (next permit in 250ms)
	// push: <nil>
	// push: rate limit: "push" over 1 per second (next permit in 1s)
	// email: 4 a second, burst 2
	// push: 1 a second, burst 1
	// sms: 2 a second, burst 1
}
