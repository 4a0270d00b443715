package recovery_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/switchboard-go/switchboard/behaviors/recovery"
	"github.com/switchboard-go/switchboard/mediator"
)

// GetQuote asks a remote pricing endpoint for a quote.
type GetQuote struct {
	mediator.Returns[*Quote]
	Endpoint string
}

// Quote is the response of GetQuote.
type Quote struct{ Price int }

func mustBuild(m *mediator.Mediator) *mediator.Mediator {
	if err := m.Build(); err != nil {
		panic(err)
	}
	return m
}

// A panic in a behavior becomes a *mediator.PanicError.
func ExampleNew() {
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *GetQuote) (*Quote, error) { return &Quote{}, nil })
	m.Use(mediator.BehaviorFunc(func(context.Context, any, mediator.Next) (any, error) { panic("bug in a behavior") }))
	m.Use(recovery.New())
	mustBuild(m)
	_, err := mediator.Send(context.Background(), m, &GetQuote{})
	fmt.Println(err, errors.Is(err, mediator.ErrPanic))
	// Output:
	// mediator: panic: bug in a behavior true
}
