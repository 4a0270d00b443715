package behaviors_test

import (
	"context"
	"testing"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/fallback"
	"github.com/switchboard-go/switchboard/behaviors/retry"
)

// The refused path: an open breaker refuses every call, retry recognises the refusal and does
// not retry it, and the fallback answers.
func BenchmarkSendRefused(b *testing.B) {
	ctx, req := context.Background(), &Ping{}
	reg := breaker.NewRegistry(breaker.Config{})
	s := benchMediator(b,
		fallback.NewFor(func(context.Context, *Ping, error) (*Reply, error) { return &Reply{}, nil }, fallback.Config{}),
		retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3}}),
		breaker.New(reg),
	)
	if err := reg.Trip(reg.KeyOf(req)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Send(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
