package tracing_test

import (
	"context"
	"testing"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/mediator"
	"github.com/switchboard-go/switchboard/tracing"
)

// pausedError is the refusal of a user's own behavior.
type pausedError struct{ req any }

func (e *pausedError) Error() string { return "paused" }
func (e *pausedError) Refusal() behaviors.RefusalInfo {
	return behaviors.RefusalInfo{By: "pause", Request: e.req}
}

// A refusal of a user's own behavior has the outcome refused, as a breaker's has.
func TestUserRefusalIsRejected(t *testing.T) {
	rec, tp := recorder(t)
	pause := mediator.BehaviorFunc(func(_ context.Context, req any, _ mediator.Next) (any, error) {
		return nil, &pausedError{req: req}
	})
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *Charge) (*Receipt, error) { return &Receipt{}, nil })
	m.Use(tracing.New(tracing.Config{TracerProvider: tp}))
	m.Use(pause, mediator.WithOrder(behaviors.BulkheadOrder))
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	if _, err := mediator.Send(context.Background(), m, &Charge{}); !behaviors.IsRefusal(err) {
		t.Fatal(err)
	}
	if got := attrs(rec.Ended()[0].Attributes())["switchboard.outcome"].AsString(); got != "refused" {
		t.Fatalf("outcome %q", got)
	}
}
