package chaos

import (
	"slices"
	"sync"
	"time"
)

// Recorder is the accounting of a run: when each job was enqueued, which the system
// acknowledged, and every completion reported. It is safe for concurrent use.
type Recorder struct {
	clock Clock

	mu          sync.Mutex
	jobs        map[string]*job
	finishes    []time.Time // of every completion, in the order received
	unknown     int         // completions of ids never enqueued
	outstanding int         // acknowledged jobs with no completion yet
}

type job struct {
	enqueued    time.Time
	acked       bool
	completions []Completion
}

// NewRecorder returns an empty Recorder reading clock (nil is RealClock).
func NewRecorder(clock Clock) *Recorder {
	if clock == nil {
		clock = RealClock
	}
	return &Recorder{clock: clock, jobs: map[string]*job{}}
}

// Enqueued records that job id is being enqueued at at, the start of its pickup latency. It
// comes before the Enqueue call, since a fast system may complete the job before the call
// returns its acknowledgement.
func (r *Recorder) Enqueued(id string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.jobs[id] == nil {
		r.jobs[id] = &job{}
	}
	r.jobs[id].enqueued = at
}

// Acknowledged records that the system acknowledged job id: from now on it must complete.
func (r *Recorder) Acknowledged(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	j := r.jobs[id]
	if j == nil {
		j = &job{}
		r.jobs[id] = j
	}
	if j.acked {
		return
	}
	j.acked = true
	if len(j.completions) == 0 {
		r.outstanding++
	}
}

// Completed records a completion; a zero Finished is taken as now.
func (r *Recorder) Completed(c Completion) {
	if c.Finished.IsZero() {
		c.Finished = r.clock.Now()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finishes = append(r.finishes, c.Finished)
	j := r.jobs[c.ID]
	if j == nil {
		r.unknown++
		return
	}
	if j.acked && len(j.completions) == 0 {
		r.outstanding--
	}
	j.completions = append(j.completions, c)
}

// EnqueuedAt returns when job id was enqueued, and whether it was.
func (r *Recorder) EnqueuedAt(id string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if j := r.jobs[id]; j != nil && !j.enqueued.IsZero() {
		return j.enqueued, true
	}
	return time.Time{}, false
}

// Outstanding is the number of acknowledged jobs with no completion yet.
func (r *Recorder) Outstanding() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.outstanding
}

// Counts is the tally of a run's jobs at its end.
type Counts struct {
	// Acknowledged is the number of jobs the system acknowledged.
	Acknowledged int
	// Completed is the number of acknowledged jobs completed at least once.
	Completed int
	// Lost are the ids of acknowledged jobs never completed, sorted.
	Lost []string
	// RunTwice are the ids of jobs completed more than once, sorted: a handler that ran to the
	// end twice, whatever the system recorded.
	RunTwice []string
	// RecordedRetries are the ids among RunTwice whose completions all carry distinct attempt
	// numbers: the system knew it ran them again (at-least-once after a kill). The rest of
	// RunTwice are silent duplicates.
	RecordedRetries []string
	// Unknown is the number of completions of ids the harness never enqueued.
	Unknown int
}

// Counts tallies the jobs; call it after the drain, when what is not completed is lost.
func (r *Recorder) Counts() Counts {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := Counts{Unknown: r.unknown}
	for id, j := range r.jobs {
		if j.acked {
			c.Acknowledged++
			if len(j.completions) == 0 {
				c.Lost = append(c.Lost, id)
			} else {
				c.Completed++
			}
		}
		if len(j.completions) < 2 {
			continue
		}
		c.RunTwice = append(c.RunTwice, id)
		attempts := map[int]bool{}
		for _, done := range j.completions {
			attempts[done.Attempt] = true
		}
		if !attempts[0] && len(attempts) == len(j.completions) {
			c.RecordedRetries = append(c.RecordedRetries, id)
		}
	}
	slices.Sort(c.Lost)
	slices.Sort(c.RunTwice)
	slices.Sort(c.RecordedRetries)
	return c
}

// Finishes returns the finish times of every completion, sorted: the throughput trace.
func (r *Recorder) Finishes() []time.Time {
	r.mu.Lock()
	ts := slices.Clone(r.finishes)
	r.mu.Unlock()
	slices.SortFunc(ts, time.Time.Compare)
	return ts
}

// Pickups returns the pickup latencies (enqueue to handler start) of the first completion of
// each job whose handler started in [from, to).
func (r *Recorder) Pickups(from, to time.Time) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ds []time.Duration
	for _, j := range r.jobs {
		if len(j.completions) == 0 || j.enqueued.IsZero() {
			continue
		}
		if s := j.completions[0].Started; !s.Before(from) && s.Before(to) {
			ds = append(ds, s.Sub(j.enqueued))
		}
	}
	return ds
}

// PickupWindow is the span the rolling pickup percentiles cover: the method's 30 s, long
// enough for a stable p99 at tens of jobs per second, short enough to show a fault's spike.
const PickupWindow = 30 * time.Second

// RollingPickup is the pickup percentiles of the handler starts in the PickupWindow ending at.
func (r *Recorder) RollingPickup(at time.Time) Latency {
	return LatencyOf(r.Pickups(at.Add(-PickupWindow), at))
}
