package benchmarks

import (
	"context"
	"iter"
	"strconv"
	"testing"

	"github.com/samber/do/v2"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/mediator"
)

// The in-process rows of make bench, each beside its baseline in the same run: Send with no
// behaviors against BenchmarkDirectCall, Stream against ranging the handler's sequence, and a
// keyed breaker past its cap against a plain map bounded the same way.

// newSendMediator builds a mediator with the handler of req and no behaviors.
func newSendMediator(b *testing.B) *mediator.Mediator {
	b.Helper()
	m := mediator.New(nil, mediator.Config{})
	h := &handler{}
	mediator.Handle[*req, *resp](m, func(do.Injector) (*handler, error) { return h, nil })
	mediator.HandleStreamFunc(m, streamSeq)
	if err := m.Build(); err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkSend is mediator.Send with no behaviors: the mediator's own cost over
// BenchmarkDirectCall is the type lookup, the panic guard and the typed answer.
func BenchmarkSend(b *testing.B) {
	m := newSendMediator(b)
	ctx := context.Background()
	q := &req{}
	b.ReportAllocs()
	for b.Loop() {
		sink, errSink = mediator.Send(ctx, m, q)
	}
}

// passThrough is a behavior that only calls the rest of the pipeline.
type passThrough struct{}

func (passThrough) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	return next(ctx, req)
}

// BenchmarkSendThreeBehaviors is mediator.Send through 3 pass-through behaviors: the cost of a
// pipeline of behaviors that do nothing themselves, as the other mediators' figures with 3
// behaviors measure it.
func BenchmarkSendThreeBehaviors(b *testing.B) {
	m := mediator.New(nil, mediator.Config{})
	h := &handler{}
	mediator.Handle[*req, *resp](m, func(do.Injector) (*handler, error) { return h, nil })
	for range 3 {
		m.Use(passThrough{})
	}
	if err := m.Build(); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	q := &req{}
	b.ReportAllocs()
	for b.Loop() {
		sink, errSink = mediator.Send(ctx, m, q)
	}
}

// BenchmarkTypedSend is Send through a TypedSender, which skips the type lookup.
func BenchmarkTypedSend(b *testing.B) {
	s, err := mediator.SenderFor[*req, *resp](newSendMediator(b))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	q := &req{}
	b.ReportAllocs()
	for b.Loop() {
		sink, errSink = s.Send(ctx, q)
	}
}

type streamReq struct {
	mediator.Yields[*resp]
}

var streamItems = []*resp{{1}, {2}, {3}}

// streamSeq is the stream handler: three items from a slice.
func streamSeq(context.Context, *streamReq) iter.Seq2[*resp, error] {
	return func(yield func(*resp, error) bool) {
		for _, it := range streamItems {
			if !yield(it, nil) {
				return
			}
		}
	}
}

// BenchmarkStreamDirect is Stream's baseline: the handler's sequence of 3 items ranged directly.
func BenchmarkStreamDirect(b *testing.B) {
	ctx := context.Background()
	q := &streamReq{}
	b.ReportAllocs()
	for b.Loop() {
		for it, err := range streamSeq(ctx, q) {
			sink, errSink = it, err
		}
	}
}

// BenchmarkStream is mediator.Stream of the same 3 items with no behaviors.
func BenchmarkStream(b *testing.B) {
	m := newSendMediator(b)
	ctx := context.Background()
	q := &streamReq{}
	b.ReportAllocs()
	for b.Loop() {
		for it, err := range mediator.Stream(ctx, m, q) {
			sink, errSink = it, err
		}
	}
}

// keyedKeys is the number of distinct keys of BenchmarkKeyedBreaker, a hundred times its cap.
const (
	keyedKeys = 1_000_000
	keyedCap  = 10_000
)

// BenchmarkKeyedBreaker cycles through 1M keys. switchboard: Gate and Done on a registry
// bounded to 10k breakers (MaxBreakers), so nearly every call misses and evicts; map: the
// baseline, a plain map bounded to 10k keys, where a miss deletes the oldest key and inserts.
func BenchmarkKeyedBreaker(b *testing.B) {
	keys := make([]string, keyedKeys)
	for i := range keys {
		keys[i] = "endpoint-" + strconv.Itoa(i)
	}
	ctx := context.Background()
	b.Run("switchboard", func(b *testing.B) {
		reg := breaker.NewRegistry(breaker.Config{MaxBreakers: keyedCap})
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			p, err := reg.Gate(keys[i])
			if err != nil {
				b.Fatal(err)
			}
			p.Done(ctx, nil)
			if i++; i == keyedKeys {
				i = 0
			}
		}
	})
	// The baseline is a plain map bounded the same way: a miss deletes the oldest key and
	// inserts the new one, the least a bounded cache of the keys must do.
	b.Run("map", func(b *testing.B) {
		m := make(map[string]*int, keyedCap)
		ring := make([]string, keyedCap)
		vals := make([]int, keyedCap)
		i, slot := 0, 0
		b.ReportAllocs()
		for b.Loop() {
			k := keys[i]
			if v, ok := m[k]; ok {
				*v++
			} else {
				if old := ring[slot]; old != "" {
					delete(m, old)
				}
				ring[slot] = k
				m[k] = &vals[slot]
				slot = (slot + 1) % keyedCap
			}
			if i++; i == keyedKeys {
				i = 0
			}
		}
	})
}
