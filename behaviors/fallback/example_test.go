package fallback_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/fallback"
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

type ListRecommendations struct {
	mediator.Returns[[]string]
}

// A generic fallback for every request type that responds with a list: an empty list. Its
// result type is checked against each request type at Build.
func ExampleNew() {
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *ListRecommendations) ([]string, error) {
		return nil, errors.New("recommendations service down")
	})
	m.Use(fallback.New(func(_ context.Context, req any, err error) ([]string, error) {
		fmt.Printf("%T degraded: %v\n", req, err)
		return []string{}, nil
	}, fallback.Config{}))
	mustBuild(m)
	recs, err := mediator.Send(context.Background(), m, &ListRecommendations{})
	fmt.Println(len(recs), recs != nil, err)
	// Output:
	// *fallback_test.ListRecommendations degraded: recommendations service down
	// 0 true <nil>
}

// A typed fallback for one request type.
func ExampleNewFor() {
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *GetQuote) (*Quote, error) { return nil, &httpError{503} })
	m.Use(fallback.NewFor(func(_ context.Context, q *GetQuote, err error) (*Quote, error) {
		return &Quote{Price: 40}, nil // last known price
	}, fallback.Config{}))
	mustBuild(m)
	q, err := mediator.Send(context.Background(), m, &GetQuote{})
	fmt.Println(q.Price, err)
	// Output:
	// 40 <nil>
}

// A fallback that answers from a cache declines a request the cache has nothing for (the
// caller then gets the original error), and one When rules out before it runs (here a quote
// that must be live). OnFallback hears each verdict after the function ran.
func ExampleConfig() {
	cache := map[string]*Quote{"eu": {Price: 40}}
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *GetQuote) (*Quote, error) { return nil, &httpError{503} })
	m.Use(fallback.NewFor(func(_ context.Context, q *GetQuote, err error) (*Quote, error) {
		if cached, ok := cache[q.Endpoint]; ok {
			return cached, nil
		}
		return nil, fallback.ErrDecline // nothing cached: the caller gets the 503
	}, fallback.Config{
		When: func(_ context.Context, req any, _ error) bool { return req.(*GetQuote).Endpoint != "live" },
		OnFallback: []func(context.Context, fallback.Fallback){func(_ context.Context, f fallback.Fallback) {
			fmt.Printf("%s %s: %v\n", f.Verdict, f.Request.(*GetQuote).Endpoint, f.Err)
		}},
	}))
	mustBuild(m)
	for _, endpoint := range []string{"eu", "us", "live"} {
		q, err := mediator.Send(context.Background(), m, &GetQuote{Endpoint: endpoint})
		fmt.Println(" ", q, err)
	}
	// Output:
	// answered eu: HTTP 503
	//   &{40} <nil>
	// declined us: HTTP 503
	//   <nil> HTTP 503
	// declined live: HTTP 503
	//   <nil> HTTP 503
}
