package timeout_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/timeout"
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

// BenchmarkTimeout is the timeout behavior around the handler; BenchmarkContextWithTimeout
// is its baseline, a bare context.WithTimeout and cancel around the same call.
func BenchmarkTimeout(b *testing.B) {
	ctx, req, next := context.Background(), &Ping{}, benchNext()
	t := timeout.New(timeout.Config{Duration: time.Second})
	b.ReportAllocs()
	for b.Loop() {
		sinkAny, _ = t.Handle(ctx, req, next)
	}
}

func BenchmarkContextWithTimeout(b *testing.B) {
	ctx, req, next := context.Background(), &Ping{}, benchNext()
	b.ReportAllocs()
	for b.Loop() {
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		sinkAny, _ = next(tctx, req)
		cancel()
	}
}
