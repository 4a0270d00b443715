package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
)

// breakerCollector reads a breaker registry's Snapshot at every scrape.
type breakerCollector struct {
	reg             *breaker.Registry
	state, halfOpen *prometheus.Desc
}

// CollectBreakers registers a collector of reg's breakers: at every scrape it reads
// reg.Snapshot and reports, per breaker the registry holds,
//
//	<prefix>_circuit_breaker_state{key}      1 open, 0 closed or half-open
//	<prefix>_circuit_breaker_half_open{key}  1 half-open, 0 otherwise
//
// So the values are right from the first scrape (a breaker tripped before any traffic shows
// 1; a keyed breaker exists, and can be tripped, once the registry has seen its key), they
// need no state-change listener, breakers created at Build (one per request type)
// appear before their first call, and evicted breakers drop out at the next scrape: the series
// are as many as the breakers the bounded registry holds. Half-open has a gauge of its own
// rather than a value of 0.5 so that "state == 1" means open and sums of the gauge count open
// breakers. It fails when a collector with the same names is already registered.
func (r *Recorder) CollectBreakers(reg *breaker.Registry) error {
	return r.reg.Register(&breakerCollector{
		reg: reg,
		state: prometheus.NewDesc(r.name("circuit_breaker_state"),
			"Circuit breaker state, read from the registry at scrape time: 1 open, 0 closed or half-open.", []string{"key"}, nil),
		halfOpen: prometheus.NewDesc(r.name("circuit_breaker_half_open"),
			"1 while a circuit breaker is half-open (letting probes through), 0 otherwise.", []string{"key"}, nil),
	})
}

func (c *breakerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.state; ch <- c.halfOpen }

func (c *breakerCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.reg.Snapshot() {
		ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, bit(s.State == breaker.StateOpen), s.Key)
		ch <- prometheus.MustNewConstMetric(c.halfOpen, prometheus.GaugeValue, bit(s.State == breaker.StateHalfOpen), s.Key)
	}
}

func bit(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
