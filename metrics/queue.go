package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// queueCollector reads a durable queue's counts at scrape time, with a timeout and a cache.
type queueCollector struct {
	counts           func(context.Context) (items, deadLetters map[string]int64, err error)
	timeout, maxAge  time.Duration
	items, dead, age *prometheus.Desc

	mu                  sync.Mutex
	lastItems, lastDead map[string]int64 // the values last read
	readAt              time.Time        // when last was read; zero before the first read
	reading             chan struct{}    // closed when the read in flight ends; nil when none is
}

// QueueStats is what CollectQueue reads of a durable queue; a *durable.Queue is one. Its
// method names only standard types, so that package metrics does not import durable, and a
// program with metrics links no queue and no database driver it does not use.
type QueueStats interface {
	// Counts returns the number of items per state ("pending", "running", "succeeded",
	// "dead", "cancelled") and of dead letters per status ("failed", "replayed", "discarded").
	Counts(ctx context.Context) (items, deadLetters map[string]int64, err error)
}

// CollectQueue registers a collector of q's depth and dead letters, read from q.Counts at
// scrape time:
//
//	<prefix>_durable_items{state}          items per state: pending, running, succeeded, dead, cancelled
//	<prefix>_durable_dead_letters{status}  dead letters per status: failed, replayed, discarded
//	<prefix>_durable_stats_age_seconds     how old the values above are
//
// A scrape reads Counts at most every Config.StatsMaxAge, and the read is bounded by
// Config.StatsTimeout (its context ends then, and the scrape stops waiting): a read that fails
// or times out leaves the last values read, reported with their age, or no queue series before
// the first read succeeds. Only one read runs at a time, however many scrapes come. It fails when a collector with the same names is already registered.
func (r *Recorder) CollectQueue(q QueueStats) error {
	_, err := r.collectCounts(q.Counts)
	return err
}

func (r *Recorder) collectCounts(counts func(context.Context) (items, deadLetters map[string]int64, err error)) (*queueCollector, error) {
	c := &queueCollector{
		counts:  counts,
		timeout: r.cfg.StatsTimeout,
		maxAge:  r.cfg.StatsMaxAge,
		items: prometheus.NewDesc(r.name("durable_items"),
			"Durable queue items per state (pending, running, succeeded, dead, cancelled), read at scrape time.", []string{"state"}, nil),
		dead: prometheus.NewDesc(r.name("durable_dead_letters"),
			"Dead letters per status (failed: waiting for an operator; replayed; discarded), read at scrape time.", []string{"status"}, nil),
		age: prometheus.NewDesc(r.name("durable_stats_age_seconds"),
			"Age of the queue values reported: above the cache age, reads of the queue's counts are failing or slow.", nil, nil),
	}
	if c.timeout == 0 {
		c.timeout = 2 * time.Second
	}
	if c.maxAge == 0 {
		c.maxAge = 10 * time.Second
	}
	return c, r.reg.Register(c)
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.items
	ch <- c.dead
	ch <- c.age
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	items, dead, at, ok := c.read()
	if !ok {
		return
	}
	for state, n := range items {
		ch <- prometheus.MustNewConstMetric(c.items, prometheus.GaugeValue, float64(n), state)
	}
	for status, n := range dead {
		ch <- prometheus.MustNewConstMetric(c.dead, prometheus.GaugeValue, float64(n), status)
	}
	ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, time.Since(at).Seconds())
}

// read returns the values to report, reading them again when they are older than maxAge and
// waiting for that read up to timeout; ok is false when nothing was ever read.
func (c *queueCollector) read() (items, deadLetters map[string]int64, at time.Time, ok bool) {
	c.mu.Lock()
	if c.readAt.IsZero() || c.maxAge < 0 || time.Since(c.readAt) >= c.maxAge {
		if c.reading == nil {
			done := make(chan struct{})
			c.reading = done
			go c.refresh(done)
		}
		wait := c.reading
		c.mu.Unlock()
		timer := time.NewTimer(c.timeout)
		select {
		case <-wait:
		case <-timer.C:
		}
		timer.Stop()
		c.mu.Lock()
	}
	defer c.mu.Unlock()
	return c.lastItems, c.lastDead, c.readAt, !c.readAt.IsZero()
}

// refresh reads the counts, with a context that ends at the timeout (a read the database does not
// answer by then is given up; the next scrape starts another), and keeps a successful result.
func (c *queueCollector) refresh(done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	items, dead, err := c.counts(ctx)
	cancel()
	c.mu.Lock()
	if err == nil {
		c.lastItems, c.lastDead, c.readAt = items, dead, time.Now()
	}
	c.reading = nil
	c.mu.Unlock()
	close(done)
}
