package testkit

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/mediator"
)

// StatusErr is an HTTP-like error with a status code and an optional Retry-After hint.
type StatusErr struct {
	Code  int
	After time.Duration
}

func (e *StatusErr) Error() string             { return fmt.Sprintf("status %d", e.Code) }
func (e *StatusErr) StatusCode() int           { return e.Code }
func (e *StatusErr) RetryAfter() time.Duration { return e.After }

// TransientErr declares itself retryable.
type TransientErr struct{ Msg string }

func (e *TransientErr) Error() string   { return e.Msg }
func (e *TransientErr) Retryable() bool { return true }

// Reply is the response of the test requests.
type Reply struct{ Text string }

// Call is a test request keyed by an endpoint.
type Call struct {
	mediator.Returns[*Reply]
	Endpoint string
}

// EndpointKey keys a breaker or bulkhead by the request's endpoint.
func EndpointKey(req any) string { return req.(*Call).Endpoint }

// Script is a handler whose results are given in advance, one per call; past the end it
// succeeds.
type Script struct {
	Calls   int
	Results []error
}

// Handle is the handler.
func (s *Script) Handle(ctx context.Context, q *Call) (*Reply, error) {
	s.Calls++
	if i := s.Calls - 1; i < len(s.Results) && s.Results[i] != nil {
		return nil, s.Results[i]
	}
	return &Reply{Text: "ok " + q.Endpoint}, nil
}

// Build registers h for *Call and the behaviors, and builds.
func Build(t testing.TB, h func(context.Context, *Call) (*Reply, error), bs ...mediator.Behavior) *mediator.Mediator {
	t.Helper()
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, h)
	for _, b := range bs {
		m.Use(b)
	}
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	return m
}

// TypeOf is reflect.TypeFor.
func TypeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }
