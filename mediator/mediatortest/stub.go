package mediatortest

import (
	"context"
	"sync"

	"github.com/switchboard-go/switchboard/mediator"
)

// StubHandler is a request handler that records the requests it gets and answers each with the
// same response and error. Register it with handlers.Value:
//
//	mediator.Handle[*GetUser, *User](m, handlers.Value(stub))
type StubHandler[Q mediator.Request[R], R any] struct {
	mu    sync.Mutex
	calls []Q
	resp  R
	err   error
}

// Returning returns a StubHandler answering with resp and err.
func Returning[Q mediator.Request[R], R any](resp R, err error) *StubHandler[Q, R] {
	return &StubHandler[Q, R]{resp: resp, err: err}
}

// Handle records req and returns the stubbed response and error.
func (h *StubHandler[Q, R]) Handle(_ context.Context, req Q) (R, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, req)
	return h.resp, h.err
}

// Calls returns the requests handled so far, in order.
func (h *StubHandler[Q, R]) Calls() []Q {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Q(nil), h.calls...)
}
