package chaos

import (
	"slices"
	"sync"
	"time"
)

// Recorder is the accounting of a run: what was enqueued and acknowledged when, and every
// completion reported. It is safe for concurrent use.
type Recorder struct {
	clock Clock

	mu          sync.Mutex
	enqueued    map[string]time.Time // acknowledged jobs, by id, at their enqueue
	completions []record
	done        map[string][]int // indexes into completions, by id
}

type record struct {
	Completion
	pickup time.Duration
	known  bool // the id was acknowledged
}

// NewRecorder returns an empty Recorder reading clock (nil is RealClock).
func NewRecorder(clock Clock) *Recorder {
	if clock == nil {
		clock = RealClock
	}
	return &Recorder{clock: clock, enqueued: map[string]time.Time{}, done: map[string][]int{}}
}

// Acknowledged records that the system acknowledged job id enqueued at at.
func (r *Recorder) Acknowledged(id string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.enqueued[id] = at
}

// Completed records a completion; a zero Finished is taken as now.
func (r *Recorder) Completed(c Completion) {
	if c.Finished.IsZero() {
		c.Finished = r.clock.Now()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	at, known := r.enqueued[c.ID]
	rec := record{Completion: c, known: known}
	if known {
		rec.pickup = c.Started.Sub(at)
	}
	r.done[c.ID] = append(r.done[c.ID], len(r.completions))
	r.completions = append(r.completions, rec)
}

// Outstanding is the number of acknowledged jobs with no completion yet.
func (r *Recorder) Outstanding() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for id := range r.enqueued {
		if len(r.done[id]) == 0 {
			n++
		}
	}
	return n
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
	// RecordedRetries are the ids among RunTwice whose completions carry distinct attempt
	// numbers: the system knew it ran them again (at-least-once after a kill). The rest of
	// RunTwice are silent duplicates.
	RecordedRetries []string
	// Unknown is the number of completions of ids never acknowledged.
	Unknown int
}

// Counts tallies the jobs; call it after the drain, when what is not completed is lost.
func (r *Recorder) Counts() Counts {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := Counts{Acknowledged: len(r.enqueued)}
	for id := range r.enqueued {
		if len(r.done[id]) == 0 {
			c.Lost = append(c.Lost, id)
		} else {
			c.Completed++
		}
	}
	for id, idx := range r.done {
		if !r.completions[idx[0]].known {
			c.Unknown += len(idx)
			continue
		}
		if len(idx) < 2 {
			continue
		}
		c.RunTwice = append(c.RunTwice, id)
		attempts := map[int]bool{}
		for _, i := range idx {
			attempts[r.completions[i].Attempt] = true
		}
		if !attempts[0] && len(attempts) == len(idx) {
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
	defer r.mu.Unlock()
	ts := make([]time.Time, len(r.completions))
	for i, c := range r.completions {
		ts[i] = c.Finished
	}
	slices.SortFunc(ts, time.Time.Compare)
	return ts
}

// Pickups returns the pickup latencies (enqueue to handler start) of the first completions
// of acknowledged jobs whose handler started in [from, to).
func (r *Recorder) Pickups(from, to time.Time) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ds []time.Duration
	for _, idx := range r.done {
		c := r.completions[idx[0]]
		if c.known && !c.Started.Before(from) && c.Started.Before(to) {
			ds = append(ds, c.pickup)
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
