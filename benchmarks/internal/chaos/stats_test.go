package chaos

import (
	"slices"
	"testing"
	"time"
)

func TestLatencyOfKnownData(t *testing.T) {
	// 1 ms … 100 ms, shuffled: nearest-rank percentiles are the p-th value.
	var ds []time.Duration
	for i := range 100 {
		ds = append(ds, time.Duration((i*37)%100+1)*time.Millisecond)
	}
	got := LatencyOf(ds)
	want := Latency{N: 100, P50: 50 * time.Millisecond, P95: 95 * time.Millisecond, P99: 99 * time.Millisecond}
	if got != want {
		t.Errorf("LatencyOf = %+v, want %+v", got, want)
	}
	if ds[0] != time.Millisecond || ds[1] != 38*time.Millisecond {
		t.Error("LatencyOf sorted its input")
	}
	// Three samples: p50 is the second, p95 and p99 the largest.
	small := LatencyOf([]time.Duration{3, 1, 2})
	if small != (Latency{N: 3, P50: 2, P95: 3, P99: 3}) {
		t.Errorf("LatencyOf(3 samples) = %+v", small)
	}
	if (LatencyOf(nil) != Latency{}) {
		t.Error("LatencyOf(nil) is not zero")
	}
}

func TestRollingPickupCoversThirtySeconds(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := NewRecorder(nil)
	// A job a second for 60 s; the pickup of job i is i ms.
	for i := range 60 {
		id := string(rune('a' + i))
		at := t0.Add(time.Duration(i) * time.Second)
		r.Enqueued(id, at)
		r.Acknowledged(id)
		r.Completed(Completion{ID: id, Started: at.Add(time.Duration(i) * time.Millisecond), Finished: at.Add(time.Second / 2)})
	}
	// The window ending at 60 s holds the starts at 30 s … 59 s: pickups 30 … 59 ms.
	got := r.RollingPickup(t0.Add(60 * time.Second))
	if got.N != 30 || got.P50 != 44*time.Millisecond || got.P99 != 59*time.Millisecond {
		t.Errorf("RollingPickup = %+v; want 30 samples, p50 44ms, p99 59ms", got)
	}
}

func TestRecoveryTimeOnASyntheticTrace(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var finishes []time.Time
	add := func(from, to time.Duration, perSec int) {
		for at := from; at < to; at += time.Second / time.Duration(perSec) {
			finishes = append(finishes, t0.Add(at))
		}
	}
	add(0, 60*time.Second, 100)               // clean: 100/s
	add(60*time.Second, 90*time.Second, 20)   // fault: 20/s until 90 s
	add(90*time.Second, 150*time.Second, 100) // back to 100/s
	fromEnd := t0.Add(90 * time.Second)
	// Over a 10 s window the rate reaches 90/s once 9 s of the 10 are at 100/s: 2 + 900 ≥ 900.
	d, ok := RecoveryTime(finishes, fromEnd, t0.Add(150*time.Second), 10*time.Second, 90)
	if !ok || d < 8*time.Second || d > 9*time.Second {
		t.Errorf("RecoveryTime = %v, %v; want between 8 s and 9 s", d, ok)
	}
	// A fault that did not dent throughput recovers at once.
	if d, ok := RecoveryTime(finishes, t0.Add(50*time.Second), t0.Add(150*time.Second), 10*time.Second, 90); !ok || d != 0 {
		t.Errorf("RecoveryTime before the fault = %v, %v; want 0, true", d, ok)
	}
	// A target above anything reached never recovers.
	if _, ok := RecoveryTime(finishes, fromEnd, t0.Add(150*time.Second), 10*time.Second, 150); ok {
		t.Error("recovered to 150/s")
	}
	// Nor does one looked for only until before it is reached.
	if _, ok := RecoveryTime(finishes, fromEnd, t0.Add(95*time.Second), 10*time.Second, 90); ok {
		t.Error("recovered before 95 s")
	}
	if r := Rate(finishes, t0, t0.Add(60*time.Second)); r != 100 {
		t.Errorf("Rate of the clean minute = %v, want 100", r)
	}
}

func TestPerSecondCountsEachWholeSecond(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// Before the start, the first second (its start included), the third, and past the end.
	times := []time.Time{at(-1), at(0), at(999), at(1000), at(2500), at(2999), at(3000)}
	got := PerSecond(times, t0, at(3000))
	if want := []float64{2, 1, 2}; !slices.Equal(got, want) {
		t.Errorf("PerSecond = %v, want %v", got, want)
	}
	if got := PerSecond(times, t0, at(999)); got != nil {
		t.Errorf("PerSecond of less than a second = %v, want nil", got)
	}
}
