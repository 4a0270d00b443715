package chaos

import (
	"slices"
	"time"
)

// Latency is the percentiles of a set of latencies.
type Latency struct {
	// N is the number of samples; the percentiles are zero when it is.
	N int
	// P50, P95 and P99 are nearest-rank percentiles: each one of the samples.
	P50, P95, P99 time.Duration
}

// LatencyOf returns the percentiles of ds; it does not modify ds.
func LatencyOf(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return Latency{N: len(s), P50: Percentile(s, 50), P95: Percentile(s, 95), P99: Percentile(s, 99)}
}

// Percentile is the nearest-rank p-th percentile of sorted, a non-empty ascending slice: the
// smallest sample with at least p % of the samples at or below it.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	rank := int(float64(n)*p/100 + 0.999999999)
	rank = max(1, min(n, rank))
	return sorted[rank-1]
}

// RecoveryShare is the share of its clean throughput a system must get back to after a fault
// to count as recovered: 90 %, the method's, since a fleet that lost a replica's in-flight
// work catches up above its clean rate but may settle a little under it.
const RecoveryShare = 0.9

// RecoveryWindow is the sliding window recovery throughput is measured over: 10 s, short
// enough to time recovery within a minute's bound, long enough to smooth a batch.
const RecoveryWindow = 10 * time.Second

// Rate is the number of times in [from, to) divided by its length in seconds; times is sorted.
func Rate(times []time.Time, from, to time.Time) float64 {
	secs := to.Sub(from).Seconds()
	if secs <= 0 {
		return 0
	}
	lo, _ := slices.BinarySearchFunc(times, from, time.Time.Compare)
	hi, _ := slices.BinarySearchFunc(times, to, time.Time.Compare)
	return float64(hi-lo) / secs
}

// RecoveryTime is how long after from the throughput over the window ending at each instant
// first reaches target (jobs/s), looking no later than until; finishes is sorted. The bool is
// false when it never does. A rate over a window rises only at a completion, so only from and
// the finishes after it are checked.
func RecoveryTime(finishes []time.Time, from, until time.Time, window time.Duration, target float64) (time.Duration, bool) {
	reached := func(t time.Time) bool {
		// The window is half-open at its start and closed at t: it counts the completion at t.
		return Rate(finishes, t.Add(-window), t.Add(1)) >= target
	}
	if reached(from) {
		return 0, true
	}
	i, _ := slices.BinarySearchFunc(finishes, from, time.Time.Compare)
	for ; i < len(finishes) && !finishes[i].After(until); i++ {
		if reached(finishes[i]) {
			return finishes[i].Sub(from), true
		}
	}
	return 0, false
}

// PerSecond is the number of times in each whole second from from on, up to to: the
// throughput trace of a run, one figure per second; times is sorted.
func PerSecond(times []time.Time, from, to time.Time) []float64 {
	n := int(to.Sub(from) / time.Second)
	if n <= 0 {
		return nil
	}
	out := make([]float64, n)
	i, _ := slices.BinarySearchFunc(times, from, time.Time.Compare)
	for ; i < len(times); i++ {
		k := int(times[i].Sub(from) / time.Second)
		if k >= n {
			break
		}
		out[k]++
	}
	return out
}
