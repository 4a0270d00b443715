package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ConcurrencyLimitStats is what CollectConcurrencyLimits reads of a durable queue; a
// *durable.Queue is one. Its method names only standard types, as QueueStats's does.
type ConcurrencyLimitStats interface {
	// ConcurrencyLimitUse returns the concurrency limit of each limited breaker key and how
	// many of its items run now, each holding a slot.
	ConcurrencyLimitUse(ctx context.Context) (limits, inUse map[string]int, err error)
}

// CollectConcurrencyLimits registers a collector of the concurrency limits of qs, read from
// each one's ConcurrencyLimitUse at scrape time (bounded by Config.StatsTimeout; a read that
// fails reports nothing of its source):
//
//	<prefix>_durable_concurrency_limit{key}   how many items of the key may run at once
//	<prefix>_durable_concurrency_in_use{key}  how many run now
//
// A key is a series only while it is limited: operators set limits, so there are few. The
// label is named by Config.BreakerKeyLabel. A key several sources report (queues sharing a
// database, which read the same limit) is one series: the largest limit and the largest
// number in use any of them read. The items a limit held back are counted by OnSettled
// (outcome "concurrency_limited"). It fails when a collector with the same names is already
// registered.
func (r *Recorder) CollectConcurrencyLimits(qs ...ConcurrencyLimitStats) error {
	labels := []string{r.keyLabel}
	c := &limitCollector{timeout: r.cfg.StatsTimeout,
		limit: prometheus.NewDesc(r.name("durable_concurrency_limit"),
			"How many items of a breaker key may run at once across the fleet (durable.Queue.SetConcurrencyLimit).", labels, nil),
		inUse: prometheus.NewDesc(r.name("durable_concurrency_in_use"),
			"How many items of a limited breaker key run now, each holding one of its slots.", labels, nil),
	}
	for _, q := range qs {
		c.reads = append(c.reads, q.ConcurrencyLimitUse)
	}
	if c.timeout == 0 {
		c.timeout = 2 * time.Second
	}
	return r.reg.Register(c)
}

type limitCollector struct {
	reads        []func(context.Context) (limits, inUse map[string]int, err error)
	timeout      time.Duration
	limit, inUse *prometheus.Desc
}

func (c *limitCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.limit
	ch <- c.inUse
}

func (c *limitCollector) Collect(ch chan<- prometheus.Metric) {
	// A key several sources report is one series: a metric may be collected once.
	limits, inUse := map[string]int{}, map[string]int{}
	for _, read := range c.reads {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		l, u, err := read(ctx)
		cancel()
		if err != nil {
			continue
		}
		for key, n := range l {
			limits[key] = max(limits[key], n)
			inUse[key] = max(inUse[key], u[key])
		}
	}
	for key, n := range limits {
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(n), key)
		ch <- prometheus.MustNewConstMetric(c.inUse, prometheus.GaugeValue, float64(inUse[key]), key)
	}
}
