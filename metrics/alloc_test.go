package metrics_test

import (
	"context"
	"testing"

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
