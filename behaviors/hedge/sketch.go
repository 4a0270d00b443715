package hedge

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// The latency sketch of one key: a histogram of successful attempts' durations in buckets
// four to an octave (each at most 25 % wider than its lower bound), from 1 µs to about 70
// minutes, counted with atomics so that recording takes no lock and allocates nothing. Every
// refresh samples the percentile is recomputed, and once the buckets hold window samples
// every count is halved, so the sketch follows the recent calls: about the last window
// samples weigh in.
const (
	sketchBuckets = 128
	unitShift     = 10 // a bucket unit is 1,024 ns
	refresh       = 16
	window        = 1024
)

type sketch struct {
	counts  [sketchBuckets]atomic.Uint32
	n       atomic.Uint64 // samples recorded, for the refresh cadence
	samples atomic.Int64  // samples the buckets held at the last refresh
	delay   atomic.Int64  // the percentile in ns at the last refresh; 0 before MinSamples
	mu      sync.Mutex    // one refresh at a time
	p       float64       // the percentile, in (0, 100)
	min     int           // MinSamples
}

func newSketch(p float64, minSamples int) *sketch { return &sketch{p: p, min: minSamples} }

// bucketOf is the bucket of a duration.
func bucketOf(d time.Duration) int {
	if d < 0 {
		d = 0
	}
	v := uint64(d) >> unitShift
	if v < 4 {
		return int(v)
	}
	e := bits.Len64(v) - 1 // 2 or more
	i := (e-1)*4 + int((v>>(e-2))&3)
	return min(i, sketchBuckets-1)
}

// upperOf is the upper bound of bucket i: the percentile a sketch reports errs on the long
// side, by at most one bucket's width.
func upperOf(i int) time.Duration {
	if i < 4 {
		return time.Duration(i+1) << unitShift
	}
	e, sub := i/4+1, i%4
	return time.Duration(uint64(4+sub+1)<<(e-2)) << unitShift
}

// record adds one successful attempt's duration.
func (s *sketch) record(d time.Duration) {
	s.counts[bucketOf(d)].Add(1)
	if s.n.Add(1)%refresh == 0 && s.mu.TryLock() {
		s.recompute()
		s.mu.Unlock()
	}
}

// recompute refreshes the percentile and halves the counts once they hold window samples.
// Counts recorded meanwhile land before or after the snapshot; the percentile is an estimate
// either way.
func (s *sketch) recompute() {
	var snap [sketchBuckets]uint32
	var total uint64
	for i := range s.counts {
		snap[i] = s.counts[i].Load()
		total += uint64(snap[i])
	}
	s.samples.Store(int64(total))
	if total < uint64(s.min) || total == 0 {
		s.delay.Store(0)
	} else {
		rank := uint64(math.Ceil(s.p / 100 * float64(total)))
		rank = max(rank, 1)
		var seen uint64
		for i, c := range snap {
			seen += uint64(c)
			if seen >= rank {
				s.delay.Store(int64(upperOf(i)))
				break
			}
		}
	}
	if total >= window {
		for i := range s.counts {
			for {
				c := s.counts[i].Load()
				if s.counts[i].CompareAndSwap(c, c/2) {
					break
				}
			}
		}
	}
}

// current returns the percentile, or 0 while the sketch holds fewer than MinSamples samples.
func (s *sketch) current() time.Duration { return time.Duration(s.delay.Load()) }
