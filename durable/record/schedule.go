package record

import "time"

// ScheduleInfo is a stored schedule, registered or not (rows are never deleted).
type ScheduleInfo struct {
	Name, Spec string
	Location   string // the time zone Spec is read in (time.Location.String)
	NextRun    time.Time
	RunningOn  string // the instance running it now; a dead one until its lease runs out
	// LastStartedAt, LastEndedAt, LastOutcome and LastError are of the last run that ended
	// (skipped runs are only in the run log).
	LastStartedAt, LastEndedAt time.Time
	LastOutcome                Outcome
	LastError                  string
	// Request is the registered request name a schedule added at run time sends
	// (durable.Queue.AddSchedule), and Payload that request as its codec encoded it; Request
	// is empty for a schedule declared in code (durable.Schedule).
	Request string
	Payload []byte
	// Paused reports a pause in force: due runs are passed over, unlogged, until it ends.
	// PausedAt and PausedBy say when and by whom it was paused, PausedUntil when a timed pause
	// ends by itself (zero: until resumed).
	Paused                bool
	PausedAt, PausedUntil time.Time
	PausedBy              string
	// RemovedAt is when a schedule added at run time was removed, by RemovedBy; zero while it
	// is live. No instance runs a removed schedule; its run log stays.
	RemovedAt time.Time
	RemovedBy string
	// RunNowAt is when an operator (RunNowBy) asked for a run now that no instance has
	// started yet; zero when none is pending.
	RunNowAt time.Time
	RunNowBy string
}

// ScheduleRun is one entry of a schedule's run log (durable.Queue.ScheduleRuns).
type ScheduleRun struct {
	ID       int64 // increasing
	Name     string
	Instance string // the scheduler instance that ran (or skipped) it
	// DueAt is when the run was due; a catch-up run after downtime started long after.
	DueAt              time.Time
	StartedAt, EndedAt time.Time // equal for a skipped run
	Outcome            Outcome
	Error              string // the error, or why the run was skipped
	// RunNowBy is the operator whose run-now (durable.Queue.RunScheduleNow) this run was; empty
	// for a run due by the schedule's spec. DueAt is then when the operator asked.
	RunNowBy string
}
