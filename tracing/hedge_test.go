package tracing_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/hedge"
	"github.com/switchboard-go/switchboard/mediator"
	"github.com/switchboard-go/switchboard/tracing"
)

// A hedged dispatch's span has an event per step: the hedge sent, the attempt that won, the
// one cancelled.
func TestHedgeEvents(t *testing.T) {
	rec, tp := recorder(t)
	var n atomic.Int32
	m := build(t, func(ctx context.Context, c *Charge) (*Receipt, error) {
		if n.Add(1) == 1 {
			<-ctx.Done() // hangs until the hedge wins
			return nil, ctx.Err()
		}
		return &Receipt{ID: "r"}, nil
	},
		tracing.New(tracing.Config{TracerProvider: tp}),
		hedge.New(hedge.Config{Delay: time.Millisecond, OnHedge: []func(context.Context, hedge.Notice){tracing.OnHedge}}))
	if _, err := mediator.Send(context.Background(), m, &Charge{Invoice: "INV-1"}); err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	var got []string
	for _, e := range spans[0].Events() {
		if e.Name != "switchboard.hedge" {
			continue
		}
		s := ""
		for _, a := range e.Attributes {
			s += fmt.Sprintf("%s=%s ", a.Key, a.Value.Emit())
		}
		got = append(got, s)
	}
	want := "[switchboard.hedge.phase=sent switchboard.hedge.attempt=1 switchboard.hedge.delay=0.001  " +
		"switchboard.hedge.phase=won switchboard.hedge.attempt=1  switchboard.hedge.phase=cancelled switchboard.hedge.attempt=0 ]"
	if fmt.Sprint(got) != want {
		t.Fatalf("events %q\nwant   %q", got, want)
	}
}
