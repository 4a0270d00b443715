package retry_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/budget"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/mediator"
)

type Ping struct {
	mediator.Returns[*Reply]
}

type benchHandler struct{ reply Reply }

func (h *benchHandler) Handle(context.Context, *Ping) (*Reply, error) { return &h.reply, nil }

var (
	sinkReply *Reply
	sinkAny   any

	// directHandler is a package variable so the compiler cannot devirtualize and inline the
	// baseline's call: the baseline is one real call through the handler interface.
	directHandler mediator.Handler[*Ping, *Reply] = &benchHandler{}
)

// benchNext is the rest of a pipeline that is only the handler.
func benchNext() mediator.Next {
	h := directHandler
	return func(ctx context.Context, req any) (any, error) { return h.Handle(ctx, req.(*Ping)) }
}

// BenchmarkRetry is the success path of the retry behavior around the handler.
func BenchmarkRetry(b *testing.B) {
	ctx, req, next := context.Background(), &Ping{}, benchNext()
	rt := retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3, Strategy: retry.Exponential}})
	b.ReportAllocs()
	for b.Loop() {
		sinkAny, _ = rt.Handle(ctx, req, next)
	}
}

// BenchmarkRetryKeyed is the success path of a retry behavior with a per-key layer, which may
// set MaxAge: it reads the clock once per call for the first attempt's start.
func BenchmarkRetryKeyed(b *testing.B) {
	ctx, req, next := context.Background(), &Ping{}, benchNext()
	layer := retry.Policy{MaxAttempts: 5}
	rt := retry.New(retry.Config{
		Policy:    retry.Policy{MaxAttempts: 3, Strategy: retry.Exponential},
		Key:       func(any) string { return "quotes" },
		KeyPolicy: func(string) (retry.Policy, bool) { return layer, true },
	})
	b.ReportAllocs()
	for b.Loop() {
		sinkAny, _ = rt.Handle(ctx, req, next)
	}
}

// BenchmarkRetryMaxAge is the success path of a retry behavior whose policy sets MaxAge: one
// clock reading per call, no allocation.
func BenchmarkRetryMaxAge(b *testing.B) {
	ctx, req, next := context.Background(), &Ping{}, benchNext()
	rt := retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3, Strategy: retry.Exponential, MaxAge: time.Minute}})
	b.ReportAllocs()
	for b.Loop() {
		sinkAny, _ = rt.Handle(ctx, req, next)
	}
}

// BenchmarkRetryBudget is the success path of the retry behavior with a retry budget: the
// call is counted (a clock reading and an atomic add), nothing allocated.
func BenchmarkRetryBudget(b *testing.B) {
	ctx, req, next := context.Background(), &Ping{}, benchNext()
	rt := retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3, Strategy: retry.Exponential}, Budget: budget.New(budget.Config{})})
	b.ReportAllocs()
	for b.Loop() {
		sinkAny, _ = rt.Handle(ctx, req, next)
	}
}
