package mediator_test

import (
	"context"
	"errors"
	"iter"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-go/switchboard/mediator"
)

type Ticks struct {
	mediator.Yields[int]
	PanicAt int
}

// tickHandler produces from a goroutine, the way a handler reading from a network would, so the
// tests can see that stopping the consumer releases the producer.
func tickHandler(ctx context.Context, q *Ticks) iter.Seq2[int, error] {
	return func(yield func(int, error) bool) {
		ch := make(chan int)
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			defer close(ch)
			for i := 1; ; i++ {
				select {
				case ch <- i:
				case <-stop:
					return
				}
			}
		}()
		for v := range ch {
			if v == q.PanicAt {
				panic("producer broke")
			}
			if !yield(v, nil) {
				return
			}
		}
	}
}

func streamMediator(t *testing.T) *mediator.Mediator {
	return built(t, func(m *mediator.Mediator) {
		mediator.HandleStreamFunc(m, tickHandler)
		m.UseStream(mediator.StreamBehaviorFunc(func(ctx context.Context, req any, next mediator.StreamNext) iter.Seq2[any, error] {
			return func(yield func(any, error) bool) {
				for v, err := range next(ctx, req) {
					if err == nil {
						v = v.(int) * 10
					}
					if !yield(v, err) {
						return
					}
				}
			}
		}), mediator.WithName("times-ten"))
	})
}

func TestStreamBehaviorAndEarlyStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := streamMediator(t)
		var got []int
		for v, err := range mediator.Stream(context.Background(), m, &Ticks{}) {
			require.NoError(t, err)
			got = append(got, v)
			if len(got) == 3 {
				break
			}
		}
		assert.Equal(t, []int{10, 20, 30}, got)
		synctest.Wait() // the producer goroutine has exited: the bubble would not settle otherwise
		chain, err := mediator.Explain[*Ticks](m)
		require.NoError(t, err)
		assert.Equal(t, "times-ten (default, 0)\n  handler\n", chain.String())
	})
}

func TestStreamEndsWhenContextIsCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := streamMediator(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var got []int
		var last error
		for v, err := range mediator.Stream(ctx, m, &Ticks{}) {
			if err != nil {
				last = err
				continue
			}
			got = append(got, v)
			if len(got) == 2 {
				cancel()
			}
		}
		assert.Equal(t, []int{10, 20}, got)
		assert.Same(t, context.Canceled, last)
	})
}

func TestStreamHandlerPanicIsAnElement(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := streamMediator(t)
		var errs []error
		for _, err := range mediator.Stream(context.Background(), m, &Ticks{PanicAt: 2}) {
			if err != nil {
				errs = append(errs, err)
			}
		}
		require.Len(t, errs, 1)
		assert.ErrorIs(t, errs[0], mediator.ErrPanic)
	})
}

func TestStreamConsumerPanicIsNotSwallowed(t *testing.T) {
	m := streamMediator(t)
	assert.PanicsWithValue(t, "consumer broke", func() {
		for range mediator.Stream(context.Background(), m, &Ticks{}) {
			panic("consumer broke")
		}
	})
}

func TestStreamErrors(t *testing.T) {
	m := streamMediator(t)
	type Other struct{ mediator.Yields[string] }
	for _, err := range mediator.Stream(context.Background(), m, &Other{}) {
		assert.ErrorIs(t, err, mediator.ErrNoHandler)
	}
	_, err := mediator.Explain[*Other](m)
	assert.EqualError(t, err, "mediator: no handler for stream request *mediator_test.Other")
	for _, err := range mediator.Stream(context.Background(), mediator.New(nil, mediator.Config{}), &Ticks{}) {
		assert.ErrorIs(t, err, mediator.ErrNotBuilt)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n := 0
	for _, err := range mediator.Stream(ctx, m, &Ticks{}) {
		n++
		assert.True(t, errors.Is(err, context.Canceled))
	}
	assert.Equal(t, 1, n)
}

type Quiet struct {
	mediator.Yields[int]
}

// A handler that stops on its own when ctx is done, without yielding ctx's error, still ends
// the stream with that error: the consumer can tell a cut-short stream from a complete one.
func TestStreamQuietHandlerCancelledEndsWithError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := built(t, func(m *mediator.Mediator) {
			mediator.HandleStreamFunc(m, func(ctx context.Context, _ *Quiet) iter.Seq2[int, error] {
				return func(yield func(int, error) bool) {
					for i := 1; ; i++ {
						if ctx.Err() != nil {
							return
						}
						if !yield(i, nil) {
							return
						}
					}
				}
			})
		})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var got []int
		var errs []error
		for v, err := range mediator.Stream(ctx, m, &Quiet{}) {
			if err != nil {
				errs = append(errs, err)
				continue
			}
			got = append(got, v)
			if len(got) == 2 {
				cancel()
			}
		}
		assert.Equal(t, []int{1, 2}, got)
		require.Len(t, errs, 1)
		assert.Same(t, context.Canceled, errs[0])
	})
}

// A stream behavior that yields items of another type than the item type yields an error
// element instead of a silent zero value.
func TestStreamWrongItemTypeIsAnError(t *testing.T) {
	m := built(t, func(m *mediator.Mediator) {
		mediator.HandleStreamFunc(m, tickHandler)
		m.UseStream(mediator.StreamBehaviorFunc(func(ctx context.Context, req any, next mediator.StreamNext) iter.Seq2[any, error] {
			return func(yield func(any, error) bool) { yield("one", nil) }
		}))
	})
	n := 0
	for v, err := range mediator.Stream(context.Background(), m, &Ticks{}) {
		n++
		assert.Zero(t, v)
		assert.ErrorIs(t, err, mediator.ErrInvalidBehavior)
	}
	assert.Equal(t, 1, n)
}
