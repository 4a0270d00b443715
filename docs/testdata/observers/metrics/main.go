// Command metrics is a mediator with the metrics package's behavior, hooks, collectors and
// handler: TestObserverBinarySizes checks that its binary is at most 1.1 times the prometheus
// program's.
package main

import (
	"context"
	"net/http"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/fallback"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/mediator"
	"github.com/switchboard-go/switchboard/metrics"
)

// Ping is the request the program sends.
type Ping struct{ mediator.Returns[string] }

func main() {
	rec, err := metrics.New(metrics.Config{})
	if err != nil {
		panic(err)
	}
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *Ping) (string, error) { return "pong", nil })
	m.Use(rec.Behavior())
	if err := m.Build(); err != nil {
		panic(err)
	}
	ctx := context.Background()
	_, _ = mediator.Send(ctx, m, &Ping{})
	rec.OnRetry(ctx, retry.Event{})
	rec.OnFallback(ctx, fallback.Fallback{})
	rec.OnClaim(time.Millisecond, 1, nil)
	rec.OnRefusal("k")
	_ = rec.CollectBreakers(breaker.NewRegistry(breaker.Config{}))
	http.Handle("/metrics", rec.Handler())
}
