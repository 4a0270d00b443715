package handlers

import (
	"context"
	"errors"
	"fmt"

	"github.com/samber/do/v2"

	"github.com/switchboard-go/switchboard/mediator"
)

// ErrAllFailed matches the error of an Otherwise chain whose every handler failed.
var ErrAllFailed = errors.New("handlers: every handler of the chain failed")

// ChainError is the error of an Otherwise chain whose every handler failed. It matches
// ErrAllFailed and unwraps to every handler's error, in order, so errors.Is and errors.As reach
// each of them.
type ChainError struct {
	// Errs holds one error per handler, primary first.
	Errs []error
}

func (e *ChainError) Error() string {
	return fmt.Sprintf("handlers: all %d handlers failed: %v", len(e.Errs), errors.Join(e.Errs...))
}

// Is reports whether target is ErrAllFailed.
func (e *ChainError) Is(target error) bool { return target == ErrAllFailed }

// Unwrap returns every handler's error.
func (e *ChainError) Unwrap() []error { return e.Errs }

// Otherwise returns a handler that tries primary and then each fallback in order, returning the
// first success. When every handler fails, the error is a *ChainError holding every error.
// Caller cancellation stops the chain at once and is returned unchanged: a fallback is not a
// way around the caller giving up. Once ctx is done, whatever error a handler returned is
// treated so.
func Otherwise[Q mediator.Request[R], R any](primary mediator.Handler[Q, R], fallbacks ...mediator.Handler[Q, R]) mediator.Handler[Q, R] {
	return &chain[Q, R]{handlers: append([]mediator.Handler[Q, R]{primary}, fallbacks...)}
}

// OtherwiseWhen is Otherwise, but moves on to the next handler only for errors where shouldFallBack
// returns true; any other error is returned at once, unchanged.
func OtherwiseWhen[Q mediator.Request[R], R any](shouldFallBack func(error) bool, primary mediator.Handler[Q, R], fallbacks ...mediator.Handler[Q, R]) mediator.Handler[Q, R] {
	return &chain[Q, R]{handlers: append([]mediator.Handler[Q, R]{primary}, fallbacks...), when: shouldFallBack}
}

// OtherwiseProvider returns a constructor for the mediator's injector that resolves each
// constructor in order and chains the handlers with Otherwise:
//
//	mediator.Handle[*GetQuote, *Quote](m, handlers.OtherwiseProvider(NewLiveQuotes, NewCachedQuotes))
func OtherwiseProvider[Q mediator.Request[R], R any](primary do.Provider[mediator.Handler[Q, R]], fallbacks ...do.Provider[mediator.Handler[Q, R]]) do.Provider[mediator.Handler[Q, R]] {
	return func(i do.Injector) (mediator.Handler[Q, R], error) {
		hs := make([]mediator.Handler[Q, R], 0, 1+len(fallbacks))
		for n, p := range append([]do.Provider[mediator.Handler[Q, R]]{primary}, fallbacks...) {
			h, err := p(i)
			if err != nil {
				return nil, fmt.Errorf("handlers: constructing handler %d of the chain: %w", n, err)
			}
			hs = append(hs, h)
		}
		return Otherwise(hs[0], hs[1:]...), nil
	}
}

type chain[Q mediator.Request[R], R any] struct {
	handlers []mediator.Handler[Q, R]
	when     func(error) bool
}

func (c *chain[Q, R]) Handle(ctx context.Context, req Q) (R, error) {
	var errs []error
	for _, h := range c.handlers {
		resp, err := h.Handle(ctx, req)
		if err == nil {
			return resp, nil
		}
		// Once the caller's context is done, any error is returned as is: clients report a
		// cancelled call in their own ways (a gRPC Canceled status does not wrap
		// context.Canceled), and a fallback must not answer a caller that gave up.
		if ctx.Err() != nil || (c.when != nil && !c.when(err)) {
			return resp, err
		}
		errs = append(errs, err)
	}
	var zero R
	return zero, &ChainError{Errs: errs}
}
