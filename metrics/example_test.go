package metrics_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/mediator"
	"github.com/switchboard-go/switchboard/metrics"
)

// GetPrice asks a pricing service for a price.
type GetPrice struct{ mediator.Returns[int] }

func Example() {
	rec, err := metrics.New(metrics.Config{AppID: "shop"}) // a registry of its own; switchboard_... names, app="shop"
	if err != nil {
		panic(err)
	}
	breakers := breaker.NewRegistry(breaker.Config{})
	if err := rec.CollectBreakers(breakers); err != nil { // states read at every scrape
		panic(err)
	}

	m := mediator.New(nil, mediator.Config{})
	m.Observe(rec) // retries, fallbacks, refusals, rate limits, budgets; a queue's claims and settled items
	mediator.HandleFunc(m, func(context.Context, *GetPrice) (int, error) { return 42, nil })
	m.Use(rec.Behavior()) // requests_total, request_duration_seconds
	m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3}}))
	m.Use(breaker.New(breakers))
	if err := m.Build(); err != nil {
		panic(err)
	}

	_, _ = mediator.Send(context.Background(), m, &GetPrice{})
	_ = breakers.Trip("*metrics_test.GetPrice") // an operator opens the breaker
	_, err = mediator.Send(context.Background(), m, &GetPrice{})
	fmt.Println(err != nil)

	srv := httptest.NewServer(rec.Handler()) // mount it at /metrics
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "switchboard_") && !strings.Contains(line, "_bucket") && !strings.Contains(line, "_seconds") &&
			!strings.HasSuffix(line, " 0") {
			fmt.Println(line)
		}
	}
	// Output:
	// true
	// switchboard_breaker_refused_total{app="shop",key="*metrics_test.GetPrice"} 1
	// switchboard_breaker_state{app="shop",key="*metrics_test.GetPrice"} 1
	// switchboard_requests_total{app="shop",outcome="refused",request="metrics_test.GetPrice"} 1
	// switchboard_requests_total{app="shop",outcome="succeeded",request="metrics_test.GetPrice"} 1
}

// The breaker key label named as existing dashboards expect, and a bound on the keys with
// series of their own: beyond it, refusals are summed under OverflowKey; once the registry
// evicts a breaker, its series go.
func ExampleConfig_breakerKeys() {
	rec, err := metrics.New(metrics.Config{BreakerKeyLabel: "source", MaxBreakerKeys: 2})
	if err != nil {
		panic(err)
	}
	breakers := breaker.NewRegistry(breaker.Config{FailureThreshold: 1, OnRefusal: []func(string){rec.OnRefusal}})
	if err := rec.CollectBreakers(breakers); err != nil { // also drops the series of evicted keys
		panic(err)
	}
	for _, host := range []string{"a.example", "b.example", "c.example", "d.example"} {
		p, _ := breakers.Gate(host)
		p.Failure() // opens it
		_, _ = breakers.Gate(host)
	}
	mfs, _ := rec.Gatherer().Gather()
	for _, mf := range mfs {
		if mf.GetName() == "switchboard_breaker_refused_total" {
			for _, m := range mf.GetMetric() {
				fmt.Println(m.GetLabel()[0].GetName(), m.GetLabel()[0].GetValue(), m.GetCounter().GetValue())
			}
		}
	}
	// Output:
	// source _overflow 2
	// source a.example 1
	// source b.example 1
}
