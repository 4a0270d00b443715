package behaviors_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/fallback"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/mediator"
)

// Every hook takes any number of observers, called in the order listed; the breaker's state
// listeners added later (AddListener) run after Config.OnStateChange. The lists are copied when
// the behavior or registry is made.
func TestHooksCallEveryObserverInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var heard []string
		note := func(s string) { heard = append(heard, s) }
		onRetry := []func(context.Context, retry.Event){
			func(context.Context, retry.Event) { note("retry 1") },
			func(context.Context, retry.Event) { note("retry 2") },
		}
		onFallback := []func(context.Context, fallback.Fallback){
			func(context.Context, fallback.Fallback) { note("fallback 1") },
			func(context.Context, fallback.Fallback) { note("fallback 2") },
		}
		cfg := breaker.Config{Key: endpointKey, FailureThreshold: 2,
			OnRefusal: []func(string){func(string) { note("refusal 1") }, func(string) { note("refusal 2") }},
			OnStateChange: []func(breaker.StateChange){
				func(breaker.StateChange) { note("change 1") }, func(breaker.StateChange) { note("change 2") }},
		}
		reg := breaker.NewRegistry(cfg)
		reg.AddListener(func(breaker.StateChange) { note("listener") })
		r := retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3, BaseDelay: time.Second}, OnRetry: onRetry})
		f := fallback.NewFor(func(context.Context, *Call, error) (*Reply, error) { return &Reply{}, nil },
			fallback.Config{OnFallback: onFallback})
		// Changing the lists after New changes nothing.
		onRetry[0], onFallback[0] = func(context.Context, retry.Event) { note("late") }, func(context.Context, fallback.Fallback) { note("late") }
		cfg.OnRefusal[0] = func(string) { note("late") }

		m := build(t, func(context.Context, *Call) (*Reply, error) { return nil, &statusErr{Code: 503} }, breaker.New(reg), r, f)
		for range 2 { // the first trips the breaker (one retry), the second is refused
			if _, err := mediator.Send(context.Background(), m, &Call{Endpoint: "api"}); err != nil {
				t.Fatal(err)
			}
		}
		want := "retry 1, retry 2, change 1, change 2, listener, fallback 1, fallback 2, refusal 1, refusal 2, fallback 1, fallback 2"
		if got := strings.Join(heard, ", "); got != want {
			t.Fatalf("heard\n %s\nwant\n %s", got, want)
		}
	})
}

// An observer of a call's hook that panics is not recovered: the panic goes up the call, and
// the observers after it are not called.
func TestHookObserverPanicReachesTheCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		after := false
		r := retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 2, BaseDelay: time.Second},
			OnRetry: []func(context.Context, retry.Event){
				func(context.Context, retry.Event) { panic("observer broke") },
				func(context.Context, retry.Event) { after = true },
			}})
		got := func() (p any) {
			defer func() { p = recover() }()
			_, _ = r.Handle(context.Background(), &Call{}, func(context.Context, any) (any, error) { return nil, &statusErr{Code: 503} })
			return nil
		}()
		if fmt.Sprint(got) != "observer broke" || after {
			t.Fatalf("recovered %v, observer after it called %v", got, after)
		}
	})
}
