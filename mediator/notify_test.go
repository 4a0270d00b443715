package mediator_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/switchboard-go/switchboard/mediator"
)

type Shipped struct{ ID int }

func TestPublishStrategies(t *testing.T) {
	errA, errB := errors.New("a failed"), errors.New("b failed")
	var calls []string
	var mu sync.Mutex
	record := func(name string, err error) func(context.Context, *Shipped) error {
		return func(context.Context, *Shipped) error {
			mu.Lock()
			calls = append(calls, name)
			mu.Unlock()
			return err
		}
	}
	m := built(t, func(m *mediator.Mediator) {
		mediator.SubscribeFunc(m, record("a", errA))
		mediator.SubscribeFunc(m, record("b", errB))
		mediator.SubscribeFunc(m, record("c", nil))
	})
	ctx := context.Background()

	err := mediator.Publish(ctx, m, &Shipped{})
	assert.Same(t, errA, err, "default is stop on first error")
	assert.Equal(t, []string{"a"}, calls)

	calls = nil
	err = mediator.PublishWith(ctx, m, &Shipped{}, mediator.ContinueOnError)
	assert.ErrorIs(t, err, errA)
	assert.ErrorIs(t, err, errB)
	assert.Equal(t, []string{"a", "b", "c"}, calls)

	calls = nil
	err = mediator.PublishWith(ctx, m, &Shipped{}, mediator.Parallel(2))
	assert.ErrorIs(t, err, errA)
	assert.ErrorIs(t, err, errB)
	assert.ElementsMatch(t, []string{"a", "b", "c"}, calls)
}

func TestPublishDefaultStrategyPerMediator(t *testing.T) {
	boom := errors.New("boom")
	ran := 0
	m := mediator.New(nil, mediator.Config{PublishStrategy: mediator.ContinueOnError})
	mediator.SubscribeFunc(m, func(context.Context, *Shipped) error { ran++; return boom })
	mediator.SubscribeFunc(m, func(context.Context, *Shipped) error { ran++; return nil })
	require.NoError(t, m.Build())
	assert.ErrorIs(t, mediator.Publish(context.Background(), m, &Shipped{}), boom)
	assert.Equal(t, 2, ran)
	assert.Equal(t, "continue-on-error", mediator.ContinueOnError.String())
}

func TestParallelIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var running, peak atomic.Int32
		release := make(chan struct{})
		m := mediator.New(nil, mediator.Config{})
		for range 5 {
			mediator.SubscribeFunc(m, func(context.Context, *Shipped) error {
				n := running.Add(1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				<-release
				running.Add(-1)
				return nil
			})
		}
		require.NoError(t, m.Build())
		done := make(chan error)
		go func() { done <- mediator.PublishWith(context.Background(), m, &Shipped{}, mediator.Parallel(2)) }()
		synctest.Wait()
		assert.Equal(t, int32(2), running.Load(), "two handlers run, the rest wait")
		close(release)
		require.NoError(t, <-done)
		assert.Equal(t, int32(2), peak.Load())
	})
}

func TestMissingNotificationHandler(t *testing.T) {
	m := built(t, func(*mediator.Mediator) {})
	assert.NoError(t, mediator.Publish(context.Background(), m, &Shipped{}), "ignored by default")
	assert.ErrorIs(t, m.PublishAny(context.Background(), nil, mediator.PublishStrategy{}), mediator.ErrNilRequest)

	strict := mediator.New(nil, mediator.Config{RequireNotificationHandlers: true})
	require.NoError(t, strict.Build())
	err := mediator.Publish(context.Background(), strict, &Shipped{})
	assert.ErrorIs(t, err, mediator.ErrNoHandler)
	assert.EqualError(t, err, "mediator: no handler for notification *mediator_test.Shipped")
	assert.ErrorIs(t, mediator.Publish(context.Background(), mediator.New(nil, mediator.Config{}), &Shipped{}), mediator.ErrNotBuilt)
}

func TestNotificationHandlerPanicIsAnError(t *testing.T) {
	m := built(t, func(m *mediator.Mediator) {
		mediator.SubscribeFunc(m, func(context.Context, *Shipped) error { panic("bad handler") })
	})
	err := mediator.Publish(context.Background(), m, &Shipped{})
	assert.ErrorIs(t, err, mediator.ErrPanic)
}

func TestFireAndForget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var sunk []error
		var mu sync.Mutex
		boom := errors.New("mailer down")
		m := mediator.New(nil, mediator.Config{ErrorSink: []func(context.Context, any, error){func(_ context.Context, n any, err error) {
			mu.Lock()
			sunk = append(sunk, err)
			mu.Unlock()
		}}})
		mediator.SubscribeFunc(m, func(ctx context.Context, _ *Shipped) error {
			<-release
			return boom
		})
		require.NoError(t, m.Build())

		ctx, cancel := context.WithCancel(context.Background())
		require.NoError(t, mediator.PublishWith(ctx, m, &Shipped{}, mediator.FireAndForget))
		cancel() // the caller going away does not cancel the detached handler

		closed := make(chan error)
		go func() { closed <- m.Close() }()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("Close returned while a handler was running")
		default:
		}
		assert.ErrorIs(t, mediator.PublishWith(context.Background(), m, &Shipped{}, mediator.FireAndForget), mediator.ErrClosed)
		close(release)
		require.NoError(t, <-closed)
		assert.Equal(t, []error{boom}, sunk)
	})
}

func TestFireAndForgetDefaultSinkLogsToLogger(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	m := mediator.New(nil, mediator.Config{Logger: zap.New(core)})
	boom := errors.New("mailer down")
	mediator.SubscribeFunc(m, func(context.Context, *Shipped) error { return boom })
	require.NoError(t, m.Build())
	require.NoError(t, mediator.PublishWith(context.Background(), m, &Shipped{}, mediator.FireAndForget))
	require.NoError(t, m.Close())

	entries := logs.AllUntimed()
	require.Len(t, entries, 1)
	assert.Equal(t, zapcore.ErrorLevel, entries[0].Level)
	assert.Equal(t, "mediator: notification handler failed", entries[0].Message)
	assert.Equal(t, map[string]any{"notification": "*mediator_test.Shipped", "error": "mailer down"}, entries[0].ContextMap())
}

func TestShutdownDeadlineCancelsDetachedHandlers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mediator.New(nil, mediator.Config{})
		var handlerErr atomic.Value
		mediator.SubscribeFunc(m, func(ctx context.Context, _ *Shipped) error {
			<-ctx.Done()
			handlerErr.Store(ctx.Err())
			return nil
		})
		require.NoError(t, m.Build())
		require.NoError(t, mediator.PublishWith(context.Background(), m, &Shipped{}, mediator.FireAndForget))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := m.Shutdown(ctx)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, context.Canceled, handlerErr.Load(), "handler returned before Shutdown did")
		assert.NoError(t, m.Close(), "closing twice is safe")
	})
}

// Shutdown with a context that is already done (the signal context that started the
// shutdown) reports no error when no fire-and-forget handler is running, however quickly the
// mediator's own bookkeeping winds down.
func TestShutdownWithDoneContextAndNothingRunning(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 200 {
		m := mediator.New(nil, mediator.Config{})
		mediator.SubscribeFunc(m, func(context.Context, *Shipped) error { return nil })
		require.NoError(t, m.Build())
		require.NoError(t, mediator.PublishWith(context.Background(), m, &Shipped{}, mediator.FireAndForget))
		require.NoError(t, m.Close())
		m = mediator.New(nil, mediator.Config{})
		require.NoError(t, m.Shutdown(ctx))
	}
}

// ErrorSink takes any number of observers, called in the order listed; one that panics is
// recovered and logged, and the next one is called.
func TestErrorSinkObservers(t *testing.T) {
	core, logs := observer.New(zapcore.ErrorLevel)
	var mu sync.Mutex
	var heard []string
	m := mediator.New(nil, mediator.Config{Logger: zap.New(core), ErrorSink: []func(context.Context, any, error){
		func(context.Context, any, error) { panic("sink broke") },
		func(_ context.Context, _ any, err error) {
			mu.Lock()
			defer mu.Unlock()
			heard = append(heard, err.Error())
		},
	}})
	mediator.SubscribeFunc(m, func(context.Context, *Shipped) error { return errors.New("mailer down") })
	require.NoError(t, m.Build())
	require.NoError(t, mediator.PublishWith(context.Background(), m, &Shipped{}, mediator.FireAndForget))
	require.NoError(t, m.Close()) // waits for the handler and its sinks
	assert.Equal(t, []string{"mailer down"}, heard)
	require.Equal(t, 1, logs.FilterMessage("mediator: ErrorSink panicked").Len())
	assert.Equal(t, "sink broke", logs.All()[0].ContextMap()["panic"])
}
