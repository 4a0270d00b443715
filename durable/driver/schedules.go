package driver

import (
	"github.com/switchboard-go/switchboard/durable/record"
	"time"
)

// ScheduleRow is one row of switchboard_schedules; its fields are documented on
// record.ScheduleInfo.
type ScheduleRow struct {
	Name          string
	Spec          string
	Location      string
	NextAt        time.Time
	RunOwner      string
	RunUntil      time.Time
	RunStartedAt  time.Time
	LastStartedAt time.Time
	LastEndedAt   time.Time
	LastOutcome   string
	LastError     string
	// Request and Payload are a schedule added at run time's; Request is empty for one
	// declared in code.
	Request string
	Payload []byte
	// PausedAt is when it was paused (zero: not paused), PausedUntil when a timed pause
	// ends (zero: until resumed).
	PausedAt, PausedUntil time.Time
	PausedBy              string
	// RemovedAt is when a schedule added at run time was removed (zero: live).
	RemovedAt time.Time
	RemovedBy string
	// RunNowAt is when an operator asked for a run now (zero: none pending).
	RunNowAt time.Time
	RunNowBy string
}

// Paused reports whether the schedule is paused at now: a pause without an end, or one whose
// end is after now.
func (r ScheduleRow) Paused(now time.Time) bool {
	return !r.PausedAt.IsZero() && (r.PausedUntil.IsZero() || r.PausedUntil.After(now))
}

// Running reports whether a run holds a lease that has not expired at now.
func (r ScheduleRow) Running(now time.Time) bool {
	return r.RunOwner != "" && !r.RunUntil.Before(now)
}

// ScheduleRunRow is one row of the run log; its fields are documented on record.ScheduleRun.
type ScheduleRunRow struct {
	ID        int64
	Name      string
	Instance  string
	DueAt     time.Time
	StartedAt time.Time
	EndedAt   time.Time
	Outcome   record.Outcome
	Error     string
	RunNowBy  string
}

// ScheduleDue identifies one due run of a schedule as an instance read it: the claim applies
// only while the row still has this spec, location and next_at, so of the instances that read
// the same due run one at most acts on it.
type ScheduleDue struct {
	Name     string
	Spec     string
	Location string
	// DueAt is the row's next_at as read.
	DueAt time.Time
	// Next is the due time that replaces it.
	Next time.Time
}
