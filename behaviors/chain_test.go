package behaviors_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/bulkhead"
	"github.com/switchboard-go/switchboard/behaviors/fallback"
	"github.com/switchboard-go/switchboard/behaviors/hedge"
	"github.com/switchboard-go/switchboard/behaviors/ratelimit"
	"github.com/switchboard-go/switchboard/behaviors/recovery"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/behaviors/timeout"
	"github.com/switchboard-go/switchboard/behaviors/validation"
	"github.com/switchboard-go/switchboard/mediator"
)

// Seed 003's composition: fallback → retry → breaker → handler. Once the breaker opens, retry
// stops at the first circuit-open error instead of burning its attempts and delays, and the
// fallback serves the degraded response.
func TestChainFallbackRetryBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := breaker.NewRegistry(breaker.Config{Key: endpointKey})
		calls, retries := 0, 0
		var lastErr error
		m := build(t, func(context.Context, *Call) (*Reply, error) {
			calls++
			return nil, &statusErr{Code: 503}
		},
			breaker.New(reg),
			retry.New(retry.Config{
				Policy:  retry.Policy{MaxAttempts: 3, BaseDelay: time.Second},
				OnRetry: []func(context.Context, retry.Event){func(context.Context, retry.Event) { retries++ }},
			}),
			fallback.NewFor(func(_ context.Context, q *Call, err error) (*Reply, error) {
				lastErr = err
				return &Reply{Text: "degraded"}, nil
			}, fallback.Config{}),
		)
		send := func() (time.Duration, *Reply) {
			start := time.Now()
			r, err := mediator.Send(context.Background(), m, &Call{Endpoint: "api"})
			if err != nil {
				t.Fatal(err)
			}
			return time.Since(start), r
		}
		// 3 attempts, 2 waits; degraded.
		if d, r := send(); d != 2*time.Second || r.Text != "degraded" || calls != 3 || retries != 2 {
			t.Fatalf("first: %s %v, %d calls, %d retries", d, r, calls, retries)
		}
		// Attempt 4 fails; attempt 5 trips the breaker and ends the retries at once: no wait for
		// an attempt that would be refused.
		if d, _ := send(); d != time.Second || calls != 5 || retries != 3 {
			t.Fatalf("second: %s, %d calls, %d retries", d, calls, retries)
		}
		var re *retry.ExhaustedError
		if !errors.As(lastErr, &re) || re.Attempts != 2 || !errors.Is(lastErr, breaker.ErrTripped) ||
			errors.Is(lastErr, breaker.ErrOpen) {
			t.Fatalf("second error %v", lastErr)
		}
		// The error says what the dependency said.
		var se *statusErr
		if !errors.As(lastErr, &se) || se.Code != 503 {
			t.Fatalf("second error %v does not reach the handler's error", lastErr)
		}
		// Open: no handler call, no retry, no wait; the fallback still serves.
		if d, r := send(); d != 0 || r.Text != "degraded" || calls != 5 || retries != 3 {
			t.Fatalf("third: %s %v, %d calls, %d retries", d, r, calls, retries)
		}
		var co *breaker.OpenError
		if !errors.As(lastErr, &co) || co.Key != "api" || co.Remaining != 30*time.Second {
			t.Fatalf("third error %v", lastErr)
		}
	})
}

// Registering the behaviors in any order gives the same chain.
func TestChainOrder(t *testing.T) {
	reg := breaker.NewRegistry(breaker.Config{})
	bs := []mediator.Behavior{
		recovery.New(),
		validation.New(),
		fallback.NewFor(func(context.Context, *CreateUser, error) (int, error) { return 0, nil }, fallback.Config{}),
		retry.New(retry.Config{}),
		hedge.New(hedge.Config{Delay: time.Second}),
		breaker.New(reg),
		ratelimit.New(ratelimit.Config{Rate: 100}),
		timeout.New(timeout.Config{Duration: time.Second}),
		bulkhead.New(bulkhead.Config{Limit: 4}),
	}
	const want = `recovery (pre, -1000)
  validation (pre, 100)
    fallback (default, 30)
      retry (default, 50)
        hedge (default, 55)
          circuit-breaker (default, 60)
            rate-limit (default, 65)
              timeout (default, 70)
                bulkhead (default, 80)
                  handler
`
	for range 20 {
		rand.Shuffle(len(bs), func(i, j int) { bs[i], bs[j] = bs[j], bs[i] })
		m := mediator.New(nil, mediator.Config{})
		mediator.HandleFunc(m, func(context.Context, *CreateUser) (int, error) { return 1, nil })
		for _, b := range bs {
			m.Use(b)
		}
		if err := m.Build(); err != nil {
			t.Fatal(err)
		}
		chain, _ := mediator.Explain[*CreateUser](m)
		if chain.String() != want {
			t.Fatalf("chain\n%s\nwant\n%s", chain, want)
		}
	}
}

type Ping struct {
	mediator.Returns[*Reply]
}

// The success path allocates nothing: the breaker alone (behavior, gate), and fallback +
// retry + breaker through a built mediator with pointer requests and responses.
func TestSuccessPathAllocatesNothing(t *testing.T) {
	reg := breaker.NewRegistry(breaker.Config{Key: endpointKey})
	reply := &Reply{Text: "pong"}
	ctx := context.Background()

	p, _ := reg.Gate("warm")
	p.Done(ctx, nil)
	if n := testing.AllocsPerRun(1000, func() {
		p, err := reg.Gate("warm")
		if err != nil {
			t.Fatal(err)
		}
		p.Done(ctx, nil)
	}); n != 0 {
		t.Errorf("Gate+Done: %v allocs", n)
	}

	cb := breaker.New(reg)
	req := &Call{Endpoint: "e"}
	next := func(context.Context, any) (any, error) { return reply, nil }
	if n := testing.AllocsPerRun(1000, func() { _, _ = cb.Handle(ctx, req, next) }); n != 0 {
		t.Errorf("breaker behavior: %v allocs", n)
	}

	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *Ping) (*Reply, error) { return reply, nil })
	m.Use(fallback.NewFor(func(context.Context, *Ping, error) (*Reply, error) { return reply, nil }, fallback.Config{}))
	m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3}}))
	m.Use(breaker.New(breaker.NewRegistry(breaker.Config{})))
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	ping := &Ping{}
	if n := testing.AllocsPerRun(1000, func() {
		r, err := mediator.Send(ctx, m, ping)
		if err != nil || r != reply {
			t.Fatal(r, err)
		}
	}); n != 0 {
		t.Errorf("fallback+retry+breaker through the mediator: %v allocs", n)
	}
}

// CreateUser is a request that validates itself.
type CreateUser struct {
	mediator.Returns[int]
	Name string
}

func (c *CreateUser) Validate() error {
	if c.Name == "" {
		return errors.New("name is required")
	}
	return nil
}
