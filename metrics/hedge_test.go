package metrics_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-go/switchboard/behaviors/hedge"
	"github.com/switchboard-go/switchboard/mediator"
	"github.com/switchboard-go/switchboard/metrics"
)

type hedgedReq struct {
	mediator.Returns[string]
	N int
}

// The hedge series come from the behavior's Snapshot at scrape time: a call that was hedged
// and won by its hedge counts one sent and one won, under its key.
func TestCollectHedges(t *testing.T) {
	rec, err := metrics.New(metrics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h := hedge.New(hedge.Config{Delay: time.Millisecond})
	if err := rec.CollectHedges(h); err != nil {
		t.Fatal(err)
	}
	m := mediator.New(nil, mediator.Config{})
	var calls atomic.Int32
	mediator.HandleFunc(m, func(ctx context.Context, q *hedgedReq) (string, error) {
		if calls.Add(1) == 1 {
			<-ctx.Done() // hangs until the hedge wins
			return "", ctx.Err()
		}
		return "ok", nil
	})
	m.Use(h)
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	if _, err := mediator.Send(context.Background(), m, &hedgedReq{}); err != nil {
		t.Fatal(err)
	}
	expected := `
# HELP switchboard_hedge_sent_total Hedged attempts sent, by key.
# TYPE switchboard_hedge_sent_total counter
switchboard_hedge_sent_total{key="*metrics_test.hedgedReq"} 1
# HELP switchboard_hedge_won_total Calls a hedged attempt won (the first attempt lost), by key.
# TYPE switchboard_hedge_won_total counter
switchboard_hedge_won_total{key="*metrics_test.hedgedReq"} 1
# HELP switchboard_hedge_delay_seconds The delay before a key's next call is hedged: fixed, or the percentile of its recent latency.
# TYPE switchboard_hedge_delay_seconds gauge
switchboard_hedge_delay_seconds{key="*metrics_test.hedgedReq"} 0.001
`
	if err := testutil.GatherAndCompare(rec.Gatherer(), strings.NewReader(expected),
		"switchboard_hedge_sent_total", "switchboard_hedge_won_total", "switchboard_hedge_delay_seconds"); err != nil {
		t.Fatal(err)
	}
}

// fixedHedges is a HedgeSource reporting fixed tallies.
type fixedHedges []hedge.Tally

func (f fixedHedges) Snapshot() []hedge.Tally { return f }

// Two hedging behaviors reporting the same key (both overflowing into hedge.OverflowKey, or one
// key hedged in two pipelines) are one series per key: their counters summed, the largest
// delay. Reported apart, the duplicate series made every scrape fail.
func TestCollectHedgesSameKey(t *testing.T) {
	rec, err := metrics.New(metrics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	a := fixedHedges{{Key: hedge.OverflowKey, Calls: 3, Sent: 2, Won: 1, Refused: 1, Delay: 2 * time.Millisecond},
		{Key: "a", Calls: 1}}
	b := fixedHedges{{Key: hedge.OverflowKey, Calls: 4, Sent: 1, Won: 1, Refused: 2, Delay: 5 * time.Millisecond}}
	if err := rec.CollectHedges(a, b); err != nil {
		t.Fatal(err)
	}
	expected := `
# HELP switchboard_hedge_calls_total Calls that ran under a hedging behavior, by key.
# TYPE switchboard_hedge_calls_total counter
switchboard_hedge_calls_total{key="_overflow"} 7
switchboard_hedge_calls_total{key="a"} 1
# HELP switchboard_hedge_sent_total Hedged attempts sent, by key.
# TYPE switchboard_hedge_sent_total counter
switchboard_hedge_sent_total{key="_overflow"} 3
switchboard_hedge_sent_total{key="a"} 0
# HELP switchboard_hedge_won_total Calls a hedged attempt won (the first attempt lost), by key.
# TYPE switchboard_hedge_won_total counter
switchboard_hedge_won_total{key="_overflow"} 2
switchboard_hedge_won_total{key="a"} 0
# HELP switchboard_hedge_delay_seconds The delay before a key's next call is hedged: fixed, or the percentile of its recent latency.
# TYPE switchboard_hedge_delay_seconds gauge
switchboard_hedge_delay_seconds{key="_overflow"} 0.005
switchboard_hedge_delay_seconds{key="a"} 0
`
	if err := testutil.GatherAndCompare(rec.Gatherer(), strings.NewReader(expected),
		"switchboard_hedge_calls_total", "switchboard_hedge_sent_total", "switchboard_hedge_won_total",
		"switchboard_hedge_delay_seconds"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(rec.Gatherer(), "switchboard_hedge_refused_total"); err != nil || n != 2 {
		t.Fatalf("refused series = %d, %v", n, err)
	}
}
