package recovery_test

import (
	"context"
	"errors"
	"testing"

	"github.com/switchboard-go/switchboard/behaviors/recovery"
	"github.com/switchboard-go/switchboard/mediator"
)

func TestRecover(t *testing.T) {
	boom := mediator.BehaviorFunc(func(ctx context.Context, req any, next mediator.Next) (any, error) {
		panic(errBoom)
	})
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, (&script{}).Handle)
	m.Use(boom, mediator.WithName("boom"))
	m.Use(recovery.New())
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	_, err := mediator.Send(context.Background(), m, &Call{})
	var pe *mediator.PanicError
	if !errors.As(err, &pe) || !errors.Is(err, errBoom) || len(pe.Stack) == 0 {
		t.Fatal(err)
	}
	chain, _ := mediator.Explain[*Call](m)
	if chain.String() != "recovery (pre, -1000)\n  boom (default, 0)\n    handler\n" {
		t.Fatal(chain)
	}
}
