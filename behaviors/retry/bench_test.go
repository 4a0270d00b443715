package retry_test

import (
	"context"
	"testing"

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
