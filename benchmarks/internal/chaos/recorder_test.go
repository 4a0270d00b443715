package chaos

import (
	"slices"
	"testing"
	"time"
)

func TestRecorderCountsACompletionBeforeItsAcknowledgement(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := NewRecorder(nil)
	// a completes before Enqueue returns; b is acknowledged and never completes; c's enqueue
	// failed (not acknowledged) yet the system ran it; d was never enqueued at all.
	r.Enqueued("a", t0)
	r.Completed(Completion{ID: "a", Started: t0.Add(2 * time.Millisecond), Finished: t0.Add(3 * time.Millisecond)})
	r.Acknowledged("a")
	r.Enqueued("b", t0)
	r.Acknowledged("b")
	r.Enqueued("c", t0)
	r.Completed(Completion{ID: "c", Started: t0.Add(5 * time.Millisecond), Finished: t0.Add(6 * time.Millisecond)})
	r.Completed(Completion{ID: "d", Started: t0, Finished: t0})
	if n := r.Outstanding(); n != 1 {
		t.Errorf("Outstanding = %d, want 1 (b)", n)
	}
	c := r.Counts()
	if c.Acknowledged != 2 || c.Completed != 1 || !slices.Equal(c.Lost, []string{"b"}) || c.Unknown != 1 || len(c.RunTwice) != 0 {
		t.Errorf("Counts = %+v; want 2 acknowledged, 1 completed, b lost, 1 unknown", c)
	}
	ps := r.Pickups(t0, t0.Add(time.Second))
	slices.Sort(ps)
	if want := []time.Duration{2 * time.Millisecond, 5 * time.Millisecond}; !slices.Equal(ps, want) {
		t.Errorf("Pickups = %v, want %v", ps, want)
	}
	if fs := r.Finishes(); len(fs) != 3 || !fs[0].Equal(t0) {
		t.Errorf("Finishes = %v", fs)
	}
	// b completing, even twice without attempts, leaves nothing outstanding and b run twice.
	r.Completed(Completion{ID: "b", Started: t0.Add(time.Second)})
	r.Completed(Completion{ID: "b", Started: t0.Add(time.Second)})
	if n := r.Outstanding(); n != 0 {
		t.Errorf("Outstanding = %d after b completed", n)
	}
	if c := r.Counts(); len(c.Lost) != 0 || !slices.Equal(c.RunTwice, []string{"b"}) || len(c.RecordedRetries) != 0 {
		t.Errorf("Counts = %+v; want b run twice, not a recorded retry", c)
	}
}
