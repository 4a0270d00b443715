package metrics_test

import (
	"context"
	"testing"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/mediator"
	"github.com/switchboard-go/switchboard/metrics"
)

// quotaError is the refusal of a user's own behavior: a quota spent.
type quotaError struct{ req any }

func (e *quotaError) Error() string { return "quota spent" }
func (e *quotaError) Refusal() behaviors.RefusalInfo {
	return behaviors.RefusalInfo{By: "quota", Key: "tenant-1", Request: e.req}
}

// A refusal of a user's own behavior is counted with the outcome refused, as a breaker's is,
// and so is a refusal of another request that the handler passed on: its caller got a refusal
// (load shed further down), not a failure.
func TestUserRefusalIsRefused(t *testing.T) {
	rec, err := metrics.New(metrics.Config{Prefix: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *Ping) (string, error) { return "", &quotaError{req: &Quote{}} })
	mediator.HandleFunc(m, func(context.Context, *Quote) (string, error) { return "ok", nil })
	m.Use(rec.Behavior())
	m.Use(mediator.BehaviorFunc(func(ctx context.Context, req any, next mediator.Next) (any, error) {
		if _, ok := req.(*Quote); ok {
			return nil, &quotaError{req: req}
		}
		return next(ctx, req)
	}), mediator.WithOrder(behaviors.BulkheadOrder))
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	_, _ = mediator.Send(context.Background(), m, &Quote{})
	_, _ = mediator.Send(context.Background(), m, &Ping{})
	scrape(t, rec, `
# HELP shop_requests_total Requests sent through the mediator, by request type and outcome (succeeded, failed, client_error, cancelled, refused, deferred).
# TYPE shop_requests_total counter
shop_requests_total{outcome="cancelled",request="metrics_test.Ping"} 0
shop_requests_total{outcome="client_error",request="metrics_test.Ping"} 0
shop_requests_total{outcome="deferred",request="metrics_test.Ping"} 0
shop_requests_total{outcome="failed",request="metrics_test.Ping"} 0
shop_requests_total{outcome="refused",request="metrics_test.Ping"} 1
shop_requests_total{outcome="succeeded",request="metrics_test.Ping"} 0
shop_requests_total{outcome="cancelled",request="metrics_test.Quote"} 0
shop_requests_total{outcome="client_error",request="metrics_test.Quote"} 0
shop_requests_total{outcome="deferred",request="metrics_test.Quote"} 0
shop_requests_total{outcome="failed",request="metrics_test.Quote"} 0
shop_requests_total{outcome="refused",request="metrics_test.Quote"} 1
shop_requests_total{outcome="succeeded",request="metrics_test.Quote"} 0
`, "shop_requests_total")
}
