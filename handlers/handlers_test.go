package handlers_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/samber/do/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchboard-go/switchboard/handlers"
	"github.com/switchboard-go/switchboard/mediator"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type Quote struct{ Price int }

type GetQuote struct {
	mediator.Returns[*Quote]
	Symbol string
}

func failing(msg string) mediator.Handler[*GetQuote, *Quote] {
	return handlers.Func(func(context.Context, *GetQuote) (*Quote, error) { return nil, errors.New(msg) })
}

func fixed(price int) mediator.Handler[*GetQuote, *Quote] {
	return handlers.Func(func(context.Context, *GetQuote) (*Quote, error) { return &Quote{Price: price}, nil })
}

func TestOtherwiseFirstSuccessWins(t *testing.T) {
	h := handlers.Otherwise(failing("live feed down"), fixed(7), fixed(9))
	q, err := h.Handle(context.Background(), &GetQuote{})
	require.NoError(t, err)
	assert.Equal(t, 7, q.Price)
}

func TestOtherwiseKeepsEveryError(t *testing.T) {
	h := handlers.Otherwise(failing("live feed down"), failing("cache empty"))
	_, err := h.Handle(context.Background(), &GetQuote{})
	assert.ErrorIs(t, err, handlers.ErrAllFailed)
	var ce *handlers.ChainError
	require.ErrorAs(t, err, &ce)
	require.Len(t, ce.Errs, 2)
	assert.EqualError(t, ce.Errs[0], "live feed down")
	assert.EqualError(t, ce.Errs[1], "cache empty")
	assert.Contains(t, err.Error(), "all 2 handlers failed")
}

func TestOtherwiseStopsOnCallerCancellation(t *testing.T) {
	called := false
	cancelled := handlers.Func(func(ctx context.Context, _ *GetQuote) (*Quote, error) { return nil, ctx.Err() })
	spy := handlers.Func(func(context.Context, *GetQuote) (*Quote, error) { called = true; return &Quote{}, nil })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := handlers.Otherwise(cancelled, spy).Handle(ctx, &GetQuote{})
	assert.Same(t, context.Canceled, err)
	assert.False(t, called)
}

// rpcCanceled is an RPC client's error for a cancelled call; like a gRPC status it does not
// wrap context.Canceled.
type rpcCanceled struct{}

func (rpcCanceled) Error() string { return "rpc error: code = Canceled" }

func TestOtherwiseStopsOnCancellationInClientError(t *testing.T) {
	called := false
	cancelled := handlers.Func(func(ctx context.Context, _ *GetQuote) (*Quote, error) { return nil, rpcCanceled{} })
	spy := handlers.Func(func(context.Context, *GetQuote) (*Quote, error) { called = true; return &Quote{}, nil })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := handlers.Otherwise(cancelled, spy).Handle(ctx, &GetQuote{})
	assert.Equal(t, rpcCanceled{}, err)
	assert.False(t, called)
}

var errPermanent = errors.New("symbol unknown")

func TestOtherwiseWhen(t *testing.T) {
	permanent := handlers.Func(func(context.Context, *GetQuote) (*Quote, error) { return nil, errPermanent })
	h := handlers.OtherwiseWhen(func(err error) bool { return !errors.Is(err, errPermanent) }, permanent, fixed(1))
	_, err := h.Handle(context.Background(), &GetQuote{})
	assert.Same(t, errPermanent, err)
}

func TestOtherwiseProviderThroughMediator(t *testing.T) {
	i := do.New()
	m := mediator.New(i, mediator.Config{})
	mediator.Handle[*GetQuote, *Quote](m, handlers.OtherwiseProvider(
		handlers.Value(failing("live feed down")),
		handlers.Value(fixed(3)),
	))
	require.NoError(t, m.Build())
	q, err := mediator.Send(context.Background(), m, &GetQuote{})
	require.NoError(t, err)
	assert.Equal(t, 3, q.Price)

	bad := mediator.New(nil, mediator.Config{})
	mediator.Handle[*GetQuote, *Quote](bad, handlers.OtherwiseProvider(
		handlers.Value(fixed(1)),
		func(do.Injector) (mediator.Handler[*GetQuote, *Quote], error) {
			return nil, errors.New("no cache configured")
		},
	))
	assert.ErrorContains(t, bad.Build(), "constructing handler 1 of the chain: no cache configured")
}

type Archive struct {
	mediator.Command
	ID int
}

func TestCommandAndNotificationAdapters(t *testing.T) {
	m := mediator.New(nil, mediator.Config{})
	var archived, notified []int
	mediator.Handle[*Archive, mediator.Void](m, handlers.Value(handlers.Command(func(_ context.Context, c *Archive) error {
		archived = append(archived, c.ID)
		return nil
	})))
	mediator.Subscribe[*Archive](m, handlers.Value(handlers.Notification(func(_ context.Context, c *Archive) error {
		notified = append(notified, c.ID)
		return nil
	})))
	require.NoError(t, m.Build())
	_, err := mediator.Send(context.Background(), m, &Archive{ID: 4})
	require.NoError(t, err)
	require.NoError(t, mediator.Publish(context.Background(), m, &Archive{ID: 5}))
	assert.Equal(t, []int{4}, archived)
	assert.Equal(t, []int{5}, notified)
}

// A primary handler with ordered fallbacks; the first success wins.
func ExampleOtherwise() {
	live := handlers.Func(func(_ context.Context, q *GetQuote) (*Quote, error) {
		return nil, fmt.Errorf("live feed for %s: timeout", q.Symbol)
	})
	cached := handlers.Func(func(context.Context, *GetQuote) (*Quote, error) { return &Quote{Price: 101}, nil })
	m := mediator.New(nil, mediator.Config{})
	mediator.Handle[*GetQuote, *Quote](m, handlers.Value(handlers.Otherwise(live, cached)))
	_ = m.Build()
	q, err := mediator.Send(context.Background(), m, &GetQuote{Symbol: "ACME"})
	fmt.Println(q.Price, err)

	_, err = handlers.Otherwise(live, failing("cache empty")).Handle(context.Background(), &GetQuote{Symbol: "ACME"})
	fmt.Println(err)
	// Output:
	// 101 <nil>
	// handlers: all 2 handlers failed: live feed for ACME: timeout
	// cache empty
}
