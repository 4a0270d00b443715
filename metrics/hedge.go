package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-go/switchboard/behaviors/hedge"
)

// HedgeSource is what CollectHedges reads of a hedging behavior; a *hedge.Behavior is one.
type HedgeSource interface {
	Snapshot() []hedge.Tally
}

var _ HedgeSource = (*hedge.Behavior)(nil)

// hedgeCollector reads hedging behaviors' Snapshot at every scrape.
type hedgeCollector struct {
	hs                        []HedgeSource
	calls, sent, won, refused *prometheus.Desc
	delay                     *prometheus.Desc
}

// CollectHedges registers a collector of the hedging behaviors hs: at every scrape it reads
// their Snapshot and reports, per key,
//
//	<prefix>_hedge_calls_total{key}      calls that ran under the behavior
//	<prefix>_hedge_sent_total{key}       hedges sent
//	<prefix>_hedge_won_total{key}        calls a hedge won (the primary lost)
//	<prefix>_hedge_refused_total{key}    hedges refused: by the retry budget, or at once by the pipeline
//	<prefix>_hedge_delay_seconds{key}    the delay the key's next call waits before hedging
//
// Reading at scrape time costs the calls nothing. The series are bounded by the behaviors'
// hedge.Config.MaxKeys, whose keys beyond the bound share hedge.OverflowKey. The label is
// named by Config.BreakerKeyLabel. A key reported by several behaviors (the same key hedged
// in two pipelines, or both overflowing into hedge.OverflowKey) is one series: its counters
// are the sums of the behaviors', its delay the largest, the one the slowest of them waits. It
// fails when a collector with the same names is already
// registered.
func (r *Recorder) CollectHedges(hs ...HedgeSource) error {
	labels := []string{r.keyLabel}
	return r.reg.Register(&hedgeCollector{
		hs: hs,
		calls: prometheus.NewDesc(r.name("hedge_calls_total"),
			"Calls that ran under a hedging behavior, by key.", labels, nil),
		sent: prometheus.NewDesc(r.name("hedge_sent_total"),
			"Hedged attempts sent, by key.", labels, nil),
		won: prometheus.NewDesc(r.name("hedge_won_total"),
			"Calls a hedged attempt won (the first attempt lost), by key.", labels, nil),
		refused: prometheus.NewDesc(r.name("hedge_refused_total"),
			"Hedged attempts refused, by key: by the retry budget before they were sent, or at once by the pipeline (an open breaker, a rate limit).", labels, nil),
		delay: prometheus.NewDesc(r.name("hedge_delay_seconds"),
			"The delay before a key's next call is hedged: fixed, or the percentile of its recent latency.", labels, nil),
	})
}

func (c *hedgeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.calls, c.sent, c.won, c.refused, c.delay} {
		ch <- d
	}
}

func (c *hedgeCollector) Collect(ch chan<- prometheus.Metric) {
	// A key reported by several behaviors is one series: a metric may be collected once.
	var keys []string
	merged := map[string]*hedge.Tally{}
	for _, h := range c.hs {
		for _, t := range h.Snapshot() {
			m := merged[t.Key]
			if m == nil {
				m = &hedge.Tally{Key: t.Key}
				merged[t.Key] = m
				keys = append(keys, t.Key)
			}
			m.Calls += t.Calls
			m.Sent += t.Sent
			m.Won += t.Won
			m.Refused += t.Refused
			m.Delay = max(m.Delay, t.Delay)
		}
	}
	for _, k := range keys {
		t := merged[k]
		ch <- prometheus.MustNewConstMetric(c.calls, prometheus.CounterValue, float64(t.Calls), t.Key)
		ch <- prometheus.MustNewConstMetric(c.sent, prometheus.CounterValue, float64(t.Sent), t.Key)
		ch <- prometheus.MustNewConstMetric(c.won, prometheus.CounterValue, float64(t.Won), t.Key)
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(t.Refused), t.Key)
		ch <- prometheus.MustNewConstMetric(c.delay, prometheus.GaugeValue, t.Delay.Seconds(), t.Key)
	}
}
