package timeout_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchboard-go/switchboard/mediator"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// statusErr is an HTTP-like error with a status code and an optional Retry-After hint.
type statusErr struct {
	code  int
	after time.Duration
}

func (e *statusErr) Error() string             { return fmt.Sprintf("status %d", e.code) }
func (e *statusErr) StatusCode() int           { return e.code }
func (e *statusErr) RetryAfter() time.Duration { return e.after }

// transientErr declares itself retryable.
type transientErr struct{ msg string }

func (e *transientErr) Error() string   { return e.msg }
func (e *transientErr) Retryable() bool { return true }

var errBoom = errors.New("boom")

// Reply is the response of the test requests.
type Reply struct{ Text string }

// Call is a test request keyed by an endpoint.
type Call struct {
	mediator.Returns[*Reply]
	Endpoint string
}

// endpointKey keys a breaker or bulkhead by the request's endpoint.
func endpointKey(req any) string { return req.(*Call).Endpoint }

// script is a handler whose results are given in advance, one per call; past the end it
// succeeds.
type script struct {
	calls   int
	results []error
}

func (s *script) handle(ctx context.Context, q *Call) (*Reply, error) {
	s.calls++
	if i := s.calls - 1; i < len(s.results) && s.results[i] != nil {
		return nil, s.results[i]
	}
	return &Reply{Text: "ok " + q.Endpoint}, nil
}

// build registers h for *Call and the behaviors, and builds.
func build(t testing.TB, h func(context.Context, *Call) (*Reply, error), bs ...mediator.Behavior) *mediator.Mediator {
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

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }
