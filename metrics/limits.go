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

// CollectConcurrencyLimits registers a collector of q's concurrency limits, read from
// q.ConcurrencyLimitUse at scrape time (bounded by Config.StatsTimeout; a read that fails
// reports nothing):
//
//	<prefix>_durable_concurrency_limit{key}   how many items of the key may run at once
//	<prefix>_durable_concurrency_in_use{key}  how many run now
//
// A key is a series only while it is limited: operators set limits, so there are few. The
// items a limit held back are counted by OnSettled (outcome "limited"). It fails when a
// collector with the same names is already registered.
func (r *Recorder) CollectConcurrencyLimits(q ConcurrencyLimitStats) error {
	c := &limitCollector{read: q.ConcurrencyLimitUse, timeout: r.cfg.StatsTimeout,
		limit: prometheus.NewDesc(r.name("durable_concurrency_limit"),
			"How many items of a breaker key may run at once across the fleet (durable.Queue.SetConcurrencyLimit).", []string{"key"}, nil),
		inUse: prometheus.NewDesc(r.name("durable_concurrency_in_use"),
			"How many items of a limited breaker key run now, each holding one of its slots.", []string{"key"}, nil),
	}
	if c.timeout == 0 {
		c.timeout = 2 * time.Second
	}
	return r.reg.Register(c)
}

type limitCollector struct {
	read         func(context.Context) (limits, inUse map[string]int, err error)
	timeout      time.Duration
	limit, inUse *prometheus.Desc
}

func (c *limitCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.limit
	ch <- c.inUse
}

func (c *limitCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	limits, inUse, err := c.read(ctx)
	cancel()
	if err != nil {
		return
	}
	for key, n := range limits {
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(n), key)
		ch <- prometheus.MustNewConstMetric(c.inUse, prometheus.GaugeValue, float64(inUse[key]), key)
	}
}
