package mediator_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
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
		got := firstThree(t, m)
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
	for name, mk := range map[string]func(*testing.T) *mediator.Mediator{"pipeline": streamMediator, "direct": directStreamMediator} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := mk(t)
				var errs []error
				for _, err := range mediator.Stream(context.Background(), m, &Ticks{PanicAt: 2}) {
					if err != nil {
						errs = append(errs, err)
					}
				}
				require.Len(t, errs, 1)
				assert.ErrorIs(t, errs[0], mediator.ErrPanic)
				var pe *mediator.PanicError
				require.ErrorAs(t, errs[0], &pe)
				assert.Contains(t, string(pe.Stack), "tickHandler")
			})
		})
	}
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
		got, errs := cancelAfterTwo(m, &Quiet{})
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

type Counted struct {
	mediator.Yields[*benchResp]
	N int
}

// A stream costs the same few allocations whatever its length: the mediator adds none per item
// and one per stream to those of ranging any sequence, so a long stream is not a garbage
// source. The one is the yield function the handler's sequence is given, which belongs to that
// stream alone so that a late call of it can never reach another stream. Ranging a sequence
// the compiler cannot see into, as a consumer's loop does here, costs two more of its own (the
// loop body and its state).
func TestStreamAllocations(t *testing.T) {
	// The handler's sequences are made up front: a sequence made per call would allocate on
	// its own account, ranged through the mediator or not.
	seqs := map[int]iter.Seq2[*benchResp, error]{}
	for _, n := range []int{3, 100} {
		items := make([]*benchResp, n)
		for i := range items {
			items[i] = &benchResp{N: i}
		}
		seqs[n] = func(yield func(*benchResp, error) bool) {
			for _, it := range items {
				if !yield(it, nil) {
					return
				}
			}
		}
	}
	m := built(t, func(m *mediator.Mediator) {
		mediator.HandleStreamFunc(m, func(_ context.Context, q *Counted) iter.Seq2[*benchResp, error] {
			return seqs[q.N]
		})
	})
	ctx := context.Background()
	for _, n := range []int{3, 100} {
		req := &Counted{N: n}
		got := 0
		allocs := testing.AllocsPerRun(100, func() {
			got = 0
			for it, err := range mediator.Stream(ctx, m, req) {
				if err != nil || it == nil {
					t.Fatal(it, err)
				}
				got++
			}
		})
		assert.Equal(t, n, got)
		opaque := testing.AllocsPerRun(100, func() {
			got = 0
			for it, err := range opaqueSeq(seqs, n) {
				if err != nil || it == nil {
					t.Fatal(it, err)
				}
				got++
			}
		})
		assert.Equal(t, n, got)
		assert.LessOrEqual(t, allocs, opaque+1, "allocations per stream of %d items", n)
		assert.LessOrEqual(t, allocs, 3.0, "allocations per stream of %d items", n)
	}
}

// opaqueSeq is a package variable so the compiler cannot see which sequence its result is, as
// it cannot see a mediator's handlers.
var opaqueSeq = func(seqs map[int]iter.Seq2[*benchResp, error], n int) iter.Seq2[*benchResp, error] {
	return seqs[n]
}

// A stream request without stream behaviors takes the typed direct path; it keeps every
// guarantee of the pipeline's.
func directStreamMediator(t *testing.T) *mediator.Mediator {
	return built(t, func(m *mediator.Mediator) { mediator.HandleStreamFunc(m, tickHandler) })
}

func TestStreamDirectEarlyStopAndCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := directStreamMediator(t)
		got := firstThree(t, m)
		assert.Equal(t, []int{1, 2, 3}, got)
		synctest.Wait() // the producer goroutine has exited

		got, errs := cancelAfterTwo(m, &Ticks{})
		assert.Equal(t, []int{1, 2}, got)
		require.Len(t, errs, 1)
		assert.Same(t, context.Canceled, errs[0])
	})
}

func TestStreamDirectConsumerPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := directStreamMediator(t)
		assert.PanicsWithValue(t, "consumer broke", func() {
			for range mediator.Stream(context.Background(), m, &Ticks{}) {
				panic("consumer broke")
			}
		})
		// A run the consumer's panic left is reused cleanly.
		n := 0
		for v, err := range mediator.Stream(context.Background(), m, &Ticks{}) {
			require.NoError(t, err)
			n = v
			if v == 2 {
				break
			}
		}
		assert.Equal(t, 2, n)
		synctest.Wait()
	})
}

func TestStreamDirectCancelledBefore(t *testing.T) {
	m := directStreamMediator(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("operator gave up")
	cancel(cause)
	n := 0
	for v, err := range mediator.Stream(ctx, m, &Ticks{}) {
		n++
		assert.Zero(t, v)
		assert.ErrorIs(t, err, context.Canceled)
		assert.ErrorIs(t, err, cause)
	}
	assert.Equal(t, 1, n)
}

// Many streams of one handler at once, each from its own goroutine, get their own items: the
// typed path's reused state is never shared.
func TestStreamDirectConcurrent(t *testing.T) {
	m := built(t, func(m *mediator.Mediator) {
		mediator.HandleStreamFunc(m, func(_ context.Context, q *Counted) iter.Seq2[*benchResp, error] {
			return func(yield func(*benchResp, error) bool) {
				for i := range q.N {
					if !yield(&benchResp{N: q.N*1000 + i}, nil) {
						return
					}
				}
			}
		})
	})
	var wg sync.WaitGroup
	for g := 1; g <= 8; g++ {
		wg.Go(func() {
			for range 50 {
				i := 0
				for it, err := range mediator.Stream(context.Background(), m, &Counted{N: g}) {
					if !assert.NoError(t, err) || !assert.Equal(t, g*1000+i, it.N) {
						return
					}
					i++
				}
				assert.Equal(t, g, i)
			}
		})
	}
	wg.Wait()
}

// cancelAfterTwo streams req, cancelling the stream's context once two items have arrived, and
// returns the items and the error elements.
func cancelAfterTwo[Q mediator.StreamRequest[int]](m *mediator.Mediator, req Q) (got []int, errs []error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for v, err := range mediator.Stream(ctx, m, req) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		got = append(got, v)
		if len(got) == 2 {
			cancel()
		}
	}
	return got, errs
}

// firstThree streams Ticks and breaks out of the loop after three items.
func firstThree(t *testing.T, m *mediator.Mediator) []int {
	var got []int
	for v, err := range mediator.Stream(context.Background(), m, &Ticks{}) {
		require.NoError(t, err)
		got = append(got, v)
		if len(got) == 3 {
			break
		}
	}
	return got
}

// A consumer that panics on the element telling it the stream's context was done before the
// handler ran gets its own panic back, not a *PanicError element made of it.
func TestStreamConsumerPanicOnCancelledStartIsNotSwallowed(t *testing.T) {
	m := built(t, func(m *mediator.Mediator) {
		mediator.HandleStreamFunc(m, tickHandler)
		m.UseStream(mediator.StreamBehaviorFunc(func(ctx context.Context, req any, next mediator.StreamNext) iter.Seq2[any, error] {
			inner, cancel := context.WithCancel(ctx)
			cancel()
			return next(inner, req)
		}), mediator.WithName("cancels"))
	})
	assert.PanicsWithValue(t, "consumer broke", func() {
		for _, err := range mediator.Stream(context.Background(), m, &Ticks{}) {
			if errors.Is(err, context.Canceled) {
				panic("consumer broke")
			}
		}
	})
}

type Leaky struct {
	mediator.Yields[string]
	Name string
}

// leakyMediator serves Leaky with handle, with or without a stream behavior in front of it.
func leakyMediator(t *testing.T, pipeline bool, handle func(context.Context, *Leaky) iter.Seq2[string, error]) *mediator.Mediator {
	return built(t, func(m *mediator.Mediator) {
		mediator.HandleStreamFunc(m, handle)
		if pipeline {
			m.UseStream(mediator.StreamBehaviorFunc(func(ctx context.Context, req any, next mediator.StreamNext) iter.Seq2[any, error] {
				return next(ctx, req)
			}), mediator.WithName("pass"))
		}
	})
}

// streamLeaky ranges one stream of Leaky to the end and returns its items and error elements.
func streamLeaky(m *mediator.Mediator, name string) (got []string, errs []error) {
	for v, err := range mediator.Stream(context.Background(), m, &Leaky{Name: name}) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		got = append(got, v)
	}
	return got, errs
}

// A handler that keeps the yield function of one stream and calls it while serving a later
// stream cannot put the first stream's items into the later one: the late call is refused
// with a panic, which the later stream's handler step turns into its *PanicError element.
func TestStreamLateYieldInLaterStreamIsRefused(t *testing.T) {
	for _, pipeline := range []bool{false, true} {
		t.Run(map[bool]string{false: "direct", true: "pipeline"}[pipeline], func(t *testing.T) {
			var kept func(string, error) bool
			m := leakyMediator(t, pipeline, func(_ context.Context, q *Leaky) iter.Seq2[string, error] {
				return func(yield func(string, error) bool) {
					if kept == nil {
						kept = yield
					} else {
						kept("late item of the first stream", nil)
					}
					yield(q.Name, nil)
				}
			})
			got, errs := streamLeaky(m, "first")
			require.Empty(t, errs)
			require.Equal(t, []string{"first"}, got)

			got, errs = streamLeaky(m, "second")
			assert.Empty(t, got, "the second stream's consumer saw items it was not sent")
			require.Len(t, errs, 1)
			assert.ErrorIs(t, errs[0], mediator.ErrPanic)
			assert.ErrorContains(t, errs[0], "range function continued iteration after whole loop exit")
		})
	}
}

// A late call of a kept yield function from a goroutine the handler left running, made while a
// later stream of the same handler is open, panics on that goroutine and delivers nothing to
// the later stream.
func TestStreamLateYieldFromGoroutineIsRefused(t *testing.T) {
	for _, pipeline := range []bool{false, true} {
		t.Run(map[bool]string{false: "direct", true: "pipeline"}[pipeline], func(t *testing.T) {
			fire := make(chan struct{})
			fired := make(chan any, 1)
			var late any // what the late call panicked with
			m := leakyMediator(t, pipeline, func(_ context.Context, q *Leaky) iter.Seq2[string, error] {
				return func(yield func(string, error) bool) {
					switch q.Name {
					case "first":
						go func() {
							<-fire
							defer func() { fired <- recover() }()
							yield("late item of the first stream", nil)
						}()
					case "second":
						close(fire)
						late = <-fired // hold the second stream open until the late call is over
					}
					yield(q.Name, nil)
				}
			})
			got, errs := streamLeaky(m, "first")
			require.Empty(t, errs)
			require.Equal(t, []string{"first"}, got)

			got, errs = streamLeaky(m, "second")
			assert.Contains(t, fmt.Sprint(late), "range function continued iteration after whole loop exit")
			assert.Empty(t, errs)
			assert.Equal(t, []string{"second"}, got, "the second stream's consumer saw another stream's item")
		})
	}
}

// A handler's sequence that goes on yielding after yield returned false panics, as a
// range-over-func loop does, with the consumer's loop already over.
func TestStreamYieldAfterStopPanics(t *testing.T) {
	for _, pipeline := range []bool{false, true} {
		t.Run(map[bool]string{false: "direct", true: "pipeline"}[pipeline], func(t *testing.T) {
			m := leakyMediator(t, pipeline, func(_ context.Context, q *Leaky) iter.Seq2[string, error] {
				return func(yield func(string, error) bool) {
					yield("one", nil)
					yield("two", nil) // yield said stop
				}
			})
			var got []string
			defer func() {
				assert.Contains(t, fmt.Sprint(recover()), "range function continued iteration after function for loop body returned false")
				assert.Equal(t, []string{"one"}, got)
			}()
			for v := range mediator.Stream(context.Background(), m, &Leaky{}) {
				got = append(got, v)
				break
			}
			t.Error("the handler's second yield did not panic")
		})
	}
}

// Stream finds the pipeline, calls the stream behaviors and checks the context when its
// sequence is ranged, anew for each range: a sequence made before Build or before its context
// was cancelled reports the mediator and the context as they are when the loop starts.
func TestStreamDispatchesWhenRanged(t *testing.T) {
	for _, pipeline := range []bool{false, true} {
		t.Run(map[bool]string{false: "direct", true: "pipeline"}[pipeline], func(t *testing.T) {
			behaviorCalls, handlerCalls := 0, 0
			m := mediator.New(nil, mediator.Config{})
			t.Cleanup(func() { _ = m.Close() })
			mediator.HandleStreamFunc(m, func(_ context.Context, q *Leaky) iter.Seq2[string, error] {
				handlerCalls++
				return func(yield func(string, error) bool) { yield(q.Name, nil) }
			})
			if pipeline {
				m.UseStream(mediator.StreamBehaviorFunc(func(ctx context.Context, req any, next mediator.StreamNext) iter.Seq2[any, error] {
					behaviorCalls++
					return next(ctx, req)
				}))
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			seq := mediator.Stream(ctx, m, &Leaky{Name: "made before Build"})
			require.NoError(t, m.Build())
			for range 2 {
				var got []string
				for v, err := range seq {
					require.NoError(t, err)
					got = append(got, v)
				}
				assert.Equal(t, []string{"made before Build"}, got)
			}
			assert.Equal(t, 2, handlerCalls)
			if pipeline {
				assert.Equal(t, 2, behaviorCalls)
			}

			cancel()
			n := 0
			for v, err := range seq {
				n++
				assert.Zero(t, v)
				assert.Same(t, context.Canceled, err)
			}
			assert.Equal(t, 1, n)
			assert.Equal(t, 2, handlerCalls, "the handler ran for a stream whose context was done")
		})
	}
}
