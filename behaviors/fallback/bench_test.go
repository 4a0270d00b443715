package fallback_test

import (
	"context"
	"testing"

	"github.com/switchboard-go/switchboard/behaviors/fallback"
	"github.com/switchboard-go/switchboard/mediator"
)

var sinkReply *Reply

// BenchmarkAnswered is a failure the fallback answers, through a built mediator.
func BenchmarkAnswered(b *testing.B) {
	degraded := &Reply{Text: "cached"}
	m := build(b, func(context.Context, *Call) (*Reply, error) { return nil, errBoom },
		fallback.NewFor(func(context.Context, *Call, error) (*Reply, error) { return degraded, nil }, fallback.Config{}))
	s, err := mediator.SenderFor[*Call](m)
	if err != nil {
		b.Fatal(err)
	}
	ctx, req := context.Background(), &Call{}
	b.ReportAllocs()
	for b.Loop() {
		sinkReply, _ = s.Send(ctx, req)
	}
}
