package behaviors_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/budget"
	"github.com/switchboard-go/switchboard/behaviors/fallback"
	"github.com/switchboard-go/switchboard/behaviors/hedge"
	"github.com/switchboard-go/switchboard/behaviors/ratelimit"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/mediator"
)

// allEvents is an application's own observer of every behavior: it implements each
// behavior's observer interface and notes what it heard.
type allEvents struct {
	mu    sync.Mutex
	heard []string
}

func (o *allEvents) note(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.heard = append(o.heard, s)
}

func (o *allEvents) count(s string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, h := range o.heard {
		if h == s {
			n++
		}
	}
	return n
}

func (o *allEvents) OnRetry(_ context.Context, e retry.Event) { o.note("retry") }
func (o *allEvents) OnFallback(_ context.Context, f fallback.Fallback) {
	o.note("fallback " + f.Verdict.String())
}
func (o *allEvents) OnStateChange(c breaker.StateChange) { o.note("breaker " + c.To.String()) }
func (o *allEvents) OnRefusal(key string)                { o.note("breaker refused") }
func (o *allEvents) OnRateLimitRefused(context.Context, ratelimit.RefusedEvent) {
	o.note("rate limit refused")
}
func (o *allEvents) OnRateLimitPermit(context.Context, ratelimit.PermitEvent) {
	o.note("rate limit permit")
}
func (o *allEvents) OnBudgetSpend(_ context.Context, s budget.Spend) { o.note("budget spend") }
func (o *allEvents) OnHedge(_ context.Context, n hedge.Notice)       { o.note("hedge " + n.Phase.String()) }

// limited and hedged are requests of their own pipelines' rate limit and hedge.
type (
	limited struct{ mediator.Returns[int] }
	hedged  struct{ mediator.Returns[int] }
)

// One observer attached once to a mediator hears the events of every behavior of its
// pipelines: retry, fallback, breaker state changes and refusals, rate limit, retry budget,
// hedge; attached twice, it hears each event once.
func TestObserveReachesEveryBehavior(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := &allEvents{}
		m := mediator.New(nil, mediator.Config{})
		m.Observe(obs, obs)
		spend := budget.New(budget.Config{})
		call := mediator.ForRequest[*Call]()
		m.Use(fallback.NewFor(func(context.Context, *Call, error) (*Reply, error) { return &Reply{}, nil }, fallback.Config{}), call)
		m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3, BaseDelay: time.Second}, Budget: spend}), call)
		m.Use(breaker.New(breaker.NewRegistry(breaker.Config{FailureThreshold: 2})), call)
		mediator.HandleFunc(m, func(context.Context, *Call) (*Reply, error) { return nil, &statusErr{Code: 503} })
		m.Use(ratelimit.New(ratelimit.Config{Rate: 1, Burst: 1}), mediator.ForRequest[*limited]())
		mediator.HandleFunc(m, func(context.Context, *limited) (int, error) { return 1, nil })
		m.Use(hedge.New(hedge.Config{Delay: time.Second}), mediator.ForRequest[*hedged]())
		var started atomic.Bool
		mediator.HandleFunc(m, func(ctx context.Context, _ *hedged) (int, error) {
			if started.CompareAndSwap(false, true) { // the primary is slow: the hedge wins
				<-ctx.Done()
				return 0, ctx.Err()
			}
			return 2, nil
		})
		if err := m.Build(); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for range 2 { // the first trips the breaker after one retry, the second is refused
			if _, err := mediator.Send(ctx, m, &Call{}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := mediator.Send(ctx, m, &limited{}); err != nil {
			t.Fatal(err)
		}
		if _, err := mediator.Send(ctx, m, &limited{}); err == nil {
			t.Fatal("the second call within the rate limit's burst was let through")
		}
		if v, err := mediator.Send(ctx, m, &hedged{}); v != 2 || err != nil {
			t.Fatalf("hedged call: %v, %v", v, err)
		}
		synctest.Wait()
		want := map[string]int{"retry": 1, "budget spend": 1, "breaker open": 1, "breaker refused": 1, "fallback answered": 2,
			"rate limit permit": 1, "rate limit refused": 1, "hedge sent": 1, "hedge won": 1}
		for ev, n := range want {
			if got := obs.count(ev); got != n {
				t.Errorf("heard %q %d times, want %d (heard: %s)", ev, got, n, strings.Join(obs.heard, ", "))
			}
		}
	})
}

// A breaker registry shared by the pipelines of two mediators, both observed by one
// observer, tells it each state change once; a second observer, of one of them, hears it
// too.
func TestSharedRegistryTellsEachObserverOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := breaker.NewRegistry(breaker.Config{FailureThreshold: 1})
		shared, own := &allEvents{}, &allEvents{}
		fail := func(context.Context, *Call) (*Reply, error) { return nil, &statusErr{Code: 503} }
		var ms []*mediator.Mediator
		for i := range 2 {
			m := mediator.New(nil, mediator.Config{})
			m.Observe(shared)
			if i == 1 {
				m.Observe(own)
			}
			m.Use(breaker.New(reg))
			mediator.HandleFunc(m, fail)
			if err := m.Build(); err != nil {
				t.Fatal(err)
			}
			ms = append(ms, m)
		}
		if _, err := mediator.Send(context.Background(), ms[0], &Call{}); err == nil {
			t.Fatal("the failing call succeeded")
		}
		if n, m := shared.count("breaker open"), own.count("breaker open"); n != 1 || m != 1 {
			t.Fatalf("the opening was heard %d times by the observer of both mediators, %d by the other; want once each", n, m)
		}
	})
}

// An application's observer attached once to the mediator hears the retries and the
// fallbacks of every pipeline, with no hook listed in the behaviors' configs.
func Example_observe() {
	m := mediator.New(nil, mediator.Config{})
	m.Observe(printer{})
	m.Use(fallback.NewFor(func(context.Context, *Call, error) (*Reply, error) { return &Reply{Text: "cached"}, nil }, fallback.Config{}))
	m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 2, BaseDelay: time.Millisecond}}))
	mediator.HandleFunc(m, func(context.Context, *Call) (*Reply, error) { return nil, &statusErr{Code: 503} })
	if err := m.Build(); err != nil {
		panic(err)
	}
	r, err := mediator.Send(context.Background(), m, &Call{})
	fmt.Println(r.Text, err)
	// Output:
	// retry after attempt 1: status 503
	// fallback answered: retry: failed after 2 attempts: status 503
	// cached <nil>
}

// printer is an observer of retries and fallbacks.
type printer struct{}

func (printer) OnRetry(_ context.Context, e retry.Event) {
	fmt.Printf("retry after attempt %d: %v\n", e.Attempt, e.Err)
}

func (printer) OnFallback(_ context.Context, f fallback.Fallback) {
	fmt.Printf("fallback %s: %v\n", f.Verdict, f.Err)
}
