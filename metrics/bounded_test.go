package metrics_test

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/metrics"
)

// manualClock is a behaviors.Clock that moves only when told.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *manualClock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func (c *manualClock) After(d time.Duration) (<-chan time.Time, func() bool) {
	return behaviors.SystemClock.After(d)
}

// breakerFamilies are the metric families with a breaker key label.
var breakerFamilies = []string{"switchboard_breaker_refused_total", "switchboard_breaker_state",
	"switchboard_breaker_half_open"}

// seriesByKey gathers rec's metrics and returns, per family, the number of series, the
// number of them labelled with a key other than the overflow value, and the sum of their
// values (counters and gauges).
func seriesByKey(t *testing.T, rec *metrics.Recorder, label string) (all, perKey map[string]int, sums map[string]float64, total int) {
	t.Helper()
	mfs, err := rec.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	all, perKey, sums = map[string]int{}, map[string]int{}, map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			total++
			all[mf.GetName()]++
			sums[mf.GetName()] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() != metrics.OverflowKey {
					perKey[mf.GetName()]++
				}
			}
		}
	}
	return all, perKey, sums, total
}

// refuseKeys opens the breakers of n keys and has each refuse one call.
func refuseKeys(t *testing.T, reg *breaker.Registry, n int) {
	t.Helper()
	for i := range n {
		key := "https://host-" + strconv.Itoa(i)
		p, err := reg.Gate(key)
		if err != nil {
			t.Fatal(err)
		}
		p.Failure() // FailureThreshold 1: open
		if _, err := reg.Gate(key); err == nil {
			t.Fatalf("%s: not refused", key)
		}
	}
}

// A hundred thousand refused keys do not make a hundred thousand series of any breaker metric:
// each family has at most MaxBreakerKeys (default 1,000) keys of its own and one overflow
// series, and once the registry has evicted the breakers, no series of theirs is left.
func TestBreakerSeriesBoundedUnderManyRefusedKeys(t *testing.T) {
	const keys, maxKeys = 100_000, 1_000 // maxKeys: the documented default of Config.MaxBreakerKeys
	rec, err := metrics.New(metrics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	clock := &manualClock{now: time.Unix(1e9, 0)}
	reg := breaker.NewRegistry(breaker.Config{FailureThreshold: 1, OpenDuration: time.Minute, MaxBreakers: -1,
		Clock: clock, OnRefusal: []func(string){rec.OnRefusal}})
	if err := rec.CollectBreakers(reg); err != nil {
		t.Fatal(err)
	}
	refuseKeys(t, reg, keys)
	if reg.Len() != keys {
		t.Fatalf("registry holds %d breakers, want %d open", reg.Len(), keys)
	}

	all, perKey, sums, total := seriesByKey(t, rec, "key")
	t.Logf("%d keys refused: %d series in all, %v per family, %v with a key of their own", keys, total, all, perKey)
	for _, f := range breakerFamilies {
		if all[f] > maxKeys+1 || perKey[f] > maxKeys {
			t.Errorf("%s: %d series, %d of them per key; want at most %d keys and one overflow series", f, all[f], perKey[f], maxKeys)
		}
	}
	// Folded, nothing is lost: every refusal is counted, and the overflow gauge counts the
	// open breakers it stands for.
	if got := sums["switchboard_breaker_refused_total"]; got != keys {
		t.Errorf("breaker_refused_total sums to %v, want %d", got, keys)
	}
	if got := sums["switchboard_breaker_state"]; got != keys {
		t.Errorf("breaker_state sums to %v open, want %d", got, keys)
	}
	if total > 3*(maxKeys+1)+100 {
		t.Errorf("%d series in all", total)
	}

	clock.Advance(2 * time.Minute) // past the open duration: nothing left to decide
	reg.Sweep()                    // clears the marks of the breakers used since the last sweep
	if n := reg.Sweep(); n != keys || reg.Len() != 0 {
		t.Fatalf("second sweep evicted %d, %d held", n, reg.Len())
	}
	all, perKey, _, total = seriesByKey(t, rec, "key")
	t.Logf("after eviction: %d series in all, %v per family, %v with a key of their own", total, all, perKey)
	for _, f := range breakerFamilies {
		if perKey[f] != 0 || all[f] > 1 {
			t.Errorf("%s after every breaker was evicted: %d series, %d of them per key", f, all[f], perKey[f])
		}
	}

	// The places are free again: a key refused now has series of its own.
	refuseKeys(t, reg, 1)
	if _, perKey, _, _ = seriesByKey(t, rec, "key"); perKey["switchboard_breaker_refused_total"] != 1 ||
		perKey["switchboard_breaker_state"] != 1 {
		t.Errorf("after eviction, a new refused key has %v series of its own", perKey)
	}
}

// The breaker key label is named by Config.BreakerKeyLabel in all three breaker families, and
// Config.MaxBreakerKeys sets the bound: the keys met first keep their series, the others are
// folded.
func TestBreakerKeyLabelAndBound(t *testing.T) {
	rec, err := metrics.New(metrics.Config{BreakerKeyLabel: "source", MaxBreakerKeys: 2})
	if err != nil {
		t.Fatal(err)
	}
	clock := &manualClock{now: time.Unix(1e9, 0)}
	reg := breaker.NewRegistry(breaker.Config{FailureThreshold: 1, OpenDuration: time.Minute, Clock: clock, OnRefusal: []func(string){rec.OnRefusal}})
	if err := rec.CollectBreakers(reg); err != nil {
		t.Fatal(err)
	}
	refuseKeys(t, reg, 3) // host-0 and host-1 get series, host-2 is folded
	scrape(t, rec, `
# HELP switchboard_breaker_refused_total Calls refused by an open circuit breaker, by breaker key (_overflow: keys beyond the Recorder's bound).
# TYPE switchboard_breaker_refused_total counter
switchboard_breaker_refused_total{source="_overflow"} 1
switchboard_breaker_refused_total{source="https://host-0"} 1
switchboard_breaker_refused_total{source="https://host-1"} 1
# HELP switchboard_breaker_state Circuit breaker state, read from the registry at scrape time: 1 open, 0 closed or half-open (_overflow: how many of the breakers beyond the Recorder's bound are open).
# TYPE switchboard_breaker_state gauge
switchboard_breaker_state{source="_overflow"} 1
switchboard_breaker_state{source="https://host-0"} 1
switchboard_breaker_state{source="https://host-1"} 1
# HELP switchboard_breaker_half_open 1 while a circuit breaker is half-open (letting probes through), 0 otherwise (_overflow: how many of the breakers beyond the Recorder's bound are half-open).
# TYPE switchboard_breaker_half_open gauge
switchboard_breaker_half_open{source="_overflow"} 0
switchboard_breaker_half_open{source="https://host-0"} 0
switchboard_breaker_half_open{source="https://host-1"} 0
`, "switchboard_breaker_refused_total", "switchboard_breaker_state", "switchboard_breaker_half_open")
}
