// Command tracing is a mediator with the tracing package's behavior, hooks and propagator:
// TestObserverBinarySizes checks that its binary is at most 1.1 times the otel program's.
package main

import (
	"context"

	"github.com/switchboard-go/switchboard/behaviors/fallback"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/mediator"
	"github.com/switchboard-go/switchboard/tracing"
)

// Ping is the request the program sends.
type Ping struct{ mediator.Returns[string] }

func main() {
	cfg := tracing.Config{}
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *Ping) (string, error) { return "pong", nil })
	m.Use(tracing.New(cfg))
	if err := m.Build(); err != nil {
		panic(err)
	}
	ctx := context.Background()
	_, _ = mediator.Send(ctx, m, &Ping{})
	tracing.OnRetry(ctx, retry.Event{})
	tracing.OnFallback(ctx, fallback.Fallback{})
	p := tracing.Propagator(cfg)
	carrier := map[string]string{}
	p.Inject(ctx, carrier)
	_ = p.Extract(ctx, carrier)
}
