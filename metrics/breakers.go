package metrics

import (
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
)

// breakerCollector reads a breaker registry's Snapshot at every scrape.
type breakerCollector struct {
	rec             *Recorder
	reg             *breaker.Registry
	state, halfOpen *prometheus.Desc
}

// CollectBreakers registers a collector of reg's breakers: at every scrape it reads
// reg.Snapshot and reports, per breaker the registry holds,
//
//	<prefix>_breaker_state{key}      1 open, 0 closed or half-open
//	<prefix>_breaker_half_open{key}  1 half-open, 0 otherwise
//
// So the values are right from the first scrape (a breaker tripped before any traffic shows
// 1; a keyed breaker exists, and can be tripped, once the registry has seen its key), they
// need no state-change listener, breakers created at Build (one per request type)
// appear before their first call, and evicted breakers drop out at the next scrape. The label
// is named by Config.BreakerKeyLabel.
//
// The series are bounded twice: by the registry, whose evictions (Registry.AddEvictionListener)
// also remove the breaker_refused_total series of the evicted keys, and by
// Config.MaxBreakerKeys. A key keeps its series from the first time the Recorder meets it (a
// refusal, or a scrape that finds its breaker) until its breaker is evicted; the breakers of
// keys beyond the bound are counted in one series per gauge whose key is OverflowKey, with the
// number of them open (state) and half-open (half_open). Breakers created at Build and declared
// keys are never evicted: collect the registry at start-up, so the first scrape gives them
// their series before a burst of other keys can take every place.
//
// Half-open has a gauge of its own rather than a value of 0.5 so that "state == 1" means open
// and sums of the gauge count open breakers. It fails when a collector with the same names is
// already registered.
func (r *Recorder) CollectBreakers(reg *breaker.Registry) error {
	labels := []string{r.keyLabel}
	err := r.reg.Register(&breakerCollector{
		rec: r,
		reg: reg,
		state: prometheus.NewDesc(r.name("breaker_state"),
			"Circuit breaker state, read from the registry at scrape time: 1 open, 0 closed or half-open ("+
				OverflowKey+": how many of the breakers beyond the Recorder's bound are open).", labels, nil),
		halfOpen: prometheus.NewDesc(r.name("breaker_half_open"),
			"1 while a circuit breaker is half-open (letting probes through), 0 otherwise ("+
				OverflowKey+": how many of the breakers beyond the Recorder's bound are half-open).", labels, nil),
	})
	if err != nil {
		return err
	}
	reg.AddEvictionListener(r.evicted)
	return nil
}

func (c *breakerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.state; ch <- c.halfOpen }

func (c *breakerCollector) Collect(ch chan<- prometheus.Metric) {
	snaps := c.reg.Snapshot()
	own := c.rec.admit(snaps)
	var open, halfOpen, folded int
	for i, s := range snaps {
		if !own[i] {
			folded++
			open += int(bit(s.State == breaker.StateOpen))
			halfOpen += int(bit(s.State == breaker.StateHalfOpen))
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, bit(s.State == breaker.StateOpen), s.Key)
		ch <- prometheus.MustNewConstMetric(c.halfOpen, prometheus.GaugeValue, bit(s.State == breaker.StateHalfOpen), s.Key)
	}
	if folded > 0 {
		ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, float64(open), OverflowKey)
		ch <- prometheus.MustNewConstMetric(c.halfOpen, prometheus.GaugeValue, float64(halfOpen), OverflowKey)
	}
}

// admit reports, for each breaker of snaps (sorted by key, as Registry.Snapshot sorts them),
// whether its key has series of its own, giving one to each key met for the first time while
// the bound allows. A key that got its place from an earlier scrape alone (it was never
// refused) and whose breaker is gone loses it first: its eviction may have been announced
// between that scrape's Snapshot and its admission, and would then never free the place.
func (r *Recorder) admit(snaps []breaker.Snapshot) []bool {
	own := make([]bool, len(snaps))
	r.keyMu.Lock()
	defer r.keyMu.Unlock()
	for k, c := range r.keys {
		if c == nil {
			if _, found := slices.BinarySearchFunc(snaps, k, func(s breaker.Snapshot, k string) int {
				return strings.Compare(s.Key, k)
			}); !found {
				delete(r.keys, k)
			}
		}
	}
	for i, s := range snaps {
		_, held := r.keys[s.Key]
		if !held && !r.fullLocked() {
			r.keys[s.Key], held = nil, true
		}
		own[i] = held
	}
	return own
}

func bit(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
