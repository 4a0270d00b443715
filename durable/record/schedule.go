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

}
