package metrics_test

import (
	"context"
	"errors"
	"testing"

	"github.com/switchboard-go/switchboard/behaviors/fallback"
	"github.com/switchboard-go/switchboard/mediator"
	"github.com/switchboard-go/switchboard/metrics"
)

// Fetch answers with a pointer made once, so the handler allocates nothing (a string response
// would allocate when boxed in the pipeline's any) and what is measured is the pipeline's.
type Fetch struct{ mediator.Returns[*Reply] }

type Reply struct{ Text string }

var reply = &Reply{Text: "ok"}

func fetchMediator(tb testing.TB, rec *metrics.Recorder) *mediator.Mediator {
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *Fetch) (*Reply, error) { return reply, nil })
	if rec != nil {
		m.Use(rec.Behavior())
	}
	if err := m.Build(); err != nil {
		tb.Fatal(err)
	}
	return m
}

// The behavior's success path allocates nothing: Build resolved the series of the type.
func TestBehaviorAllocatesNothing(t *testing.T) {
	rec, err := metrics.New(metrics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m := fetchMediator(t, rec)
	ctx, req := context.Background(), &Fetch{}
	if n := testing.AllocsPerRun(1000, func() { _, _ = mediator.Send(ctx, m, req) }); n != 0 {
		t.Fatalf("%v allocs per send", n)
	}
}

func BenchmarkSend(b *testing.B) {
	rec, err := metrics.New(metrics.Config{})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		rec  *metrics.Recorder
	}{{"without", nil}, {"with-metrics", rec}} {
		b.Run(c.name, func(b *testing.B) {
			m := fetchMediator(b, c.rec)
			ctx, req := context.Background(), &Fetch{}
			b.ReportAllocs()
			for b.Loop() {
				_, _ = mediator.Send(ctx, m, req)
			}
		})
	}
}

// Counting a refusal allocates nothing once the key has its series, nor when it is folded into
// the overflow series: a flood of refused calls costs no garbage.
func TestOnRefusalAllocatesNothing(t *testing.T) {
	rec, err := metrics.New(metrics.Config{MaxBreakerKeys: 1})
	if err != nil {
		t.Fatal(err)
	}
	rec.OnRefusal("held")
	rec.OnRefusal("folded")
	for _, key := range []string{"held", "folded"} {
		if n := testing.AllocsPerRun(1000, func() { rec.OnRefusal(key) }); n != 0 {
			t.Errorf("%s: %v allocs per refusal", key, n)
		}
	}
}

// Counting a fallback's answer adds no allocation to the answered path.
func TestOnFallbackAllocatesNothing(t *testing.T) {
	rec, err := metrics.New(metrics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	errDown := errors.New("down")
	answered := func(cfg fallback.Config) float64 {
		m := mediator.New(nil, mediator.Config{})
		mediator.HandleFunc(m, func(context.Context, *Fetch) (*Reply, error) { return nil, errDown })
		m.Use(fallback.NewFor(func(context.Context, *Fetch, error) (*Reply, error) { return reply, nil }, cfg))
		if err := m.Build(); err != nil {
			t.Fatal(err)
		}
		ctx, req := context.Background(), &Fetch{}
		return testing.AllocsPerRun(1000, func() { _, _ = mediator.Send(ctx, m, req) })
	}
	without, with := answered(fallback.Config{}), answered(fallback.Config{OnFallback: []func(context.Context, fallback.Fallback){rec.OnFallback}})
	if with != without {
		t.Fatalf("answered path: %v allocs per send with OnFallback, %v without", with, without)
	}
}
