package metrics_test

import (
	"context"
	"testing"

	"github.com/switchboard-go/switchboard/behaviors/validation"
	"github.com/switchboard-go/switchboard/mediator"
	"github.com/switchboard-go/switchboard/metrics"
)

// notFound is a callee's 404: a StatusCoder.
type notFound struct{}

func (notFound) Error() string   { return "404 Not Found" }
func (notFound) StatusCode() int { return 404 }

// busy is a callee's 503.
type busy struct{}

func (busy) Error() string   { return "503 Service Unavailable" }
func (busy) StatusCode() int { return 503 }

// A 4xx answer or a validation error is the caller's to fix, counted with the outcome
// client_error; a 5xx stays failed. Both used to be counted as failed.
func TestClientErrorIsCountedApart(t *testing.T) {
	rec, err := metrics.New(metrics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m := mediator.New(nil, mediator.Config{})
	var answer error
	mediator.HandleFunc(m, func(context.Context, *Ping) (string, error) { return "", answer })
	m.Use(rec.Behavior())
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	for _, e := range []error{notFound{}, &validation.Error{Err: errBad}, busy{}} {
		answer = e
		_, _ = mediator.Send(context.Background(), m, &Ping{})
	}
	scrape(t, rec, `
# HELP switchboard_requests_total Requests sent through the mediator, by request type and outcome (succeeded, failed, client_error, cancelled, refused, deferred).
# TYPE switchboard_requests_total counter
switchboard_requests_total{outcome="cancelled",request="metrics_test.Ping"} 0
switchboard_requests_total{outcome="client_error",request="metrics_test.Ping"} 2
switchboard_requests_total{outcome="deferred",request="metrics_test.Ping"} 0
switchboard_requests_total{outcome="failed",request="metrics_test.Ping"} 1
switchboard_requests_total{outcome="refused",request="metrics_test.Ping"} 0
switchboard_requests_total{outcome="succeeded",request="metrics_test.Ping"} 0
`, "switchboard_requests_total")
}
