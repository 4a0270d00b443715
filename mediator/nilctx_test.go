package mediator_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-go/switchboard/mediator"
)

// A nil context is the caller's mistake, answered with ErrNilContext by every entry point,
// never a panic in the caller's goroutine; no behavior or handler runs.
func TestNilContextIsAnErrorNotAPanic(t *testing.T) {
	ran := 0
	m := built(t, func(m *mediator.Mediator) {
		mediator.HandleFunc(m, func(context.Context, *Echo) (*string, error) { ran++; s := ""; return &s, nil })
		mediator.HandleFunc(m, func(context.Context, *Twice) (int, error) { ran++; return 2, nil })
		m.Use(mediator.BehaviorFunc(func(ctx context.Context, req any, next mediator.Next) (any, error) {
			return next(ctx, req)
		}), mediator.ForRequest[*Twice]())
		mediator.SubscribeFunc(m, func(context.Context, *Shipped) error { ran++; return nil })
		mediator.HandleStreamFunc(m, tickHandler)
	})
	var nilCtx context.Context //nolint:staticcheck // the mistake under test
	check := func(name string, call func() error) {
		t.Helper()
		var err error
		require.NotPanics(t, func() { err = call() }, name)
		assert.ErrorIs(t, err, mediator.ErrNilContext, name)
	}
	check("Send, bare", func() error { _, err := mediator.Send(nilCtx, m, &Echo{}); return err })
	check("Send, with a behavior", func() error { _, err := mediator.Send(nilCtx, m, &Twice{}); return err })
	check("SendAny", func() error { _, err := m.SendAny(nilCtx, &Twice{}); return err })
	check("TypedSender.Send", func() error {
		s, err := mediator.SenderFor[*Echo](m)
		require.NoError(t, err)
		_, err = s.Send(nilCtx, &Echo{})
		return err
	})
	check("Publish", func() error { return mediator.Publish(nilCtx, m, &Shipped{}) })
	check("Stream", func() error {
		for _, err := range mediator.Stream(nilCtx, m, &Ticks{}) {
			return err
		}
		return nil
	})
	check("StreamAny", func() error {
		for _, err := range m.StreamAny(nilCtx, &Ticks{}) {
			return err
		}
		return nil
	})
	assert.Zero(t, ran, "a handler ran")
}
