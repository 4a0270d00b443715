package chaos

import (
	"context"
	"time"
)

// PayloadSize is the size of every job's payload: the method's 256 bytes, small enough that
// the queue's own work, not copying, is what is measured.
const PayloadSize = 256

// HandlerTime is how long every system's handler works per job: the method's 1 ms.
const HandlerTime = time.Millisecond

// Job is one unit of work the harness enqueues.
type Job struct {
	// ID identifies the job in the system's completions; unique per run.
	ID string
	// Payload is PayloadSize bytes the handler receives.
	Payload []byte
}

// Completion is a system's report that its handler ran a job to the end.
type Completion struct {
	// ID is the job's.
	ID string
	// Started is when the handler began, on the harness's clock; pickup latency is from the
	// enqueue to it.
	Started time.Time
	// Finished is when the handler returned; zero means when the harness received the report.
	Finished time.Time
	// Instance is the replica that ran it.
	Instance int
	// Attempt is the system's count of runs of the job, starting at 1; zero when the system
	// does not report attempts. A second completion with a higher attempt is a retry the
	// system recorded (a lease that expired under a killed replica); one without is a silent
	// duplicate.
	Attempt int
}

// System is a job system under test: replicas doing the same work, at the same offered rate,
// on the same PostgreSQL. The next step implements it for switchboard and River as processes the
// harness starts; the tests implement it in memory.
type System interface {
	// Name labels the system in reports.
	Name() string
	// Start starts n replicas, numbered 0 to n-1.
	Start(ctx context.Context, n int) error
	// Kill stops replica i at once, without a graceful stop (SIGKILL for a process).
	Kill(ctx context.Context, i int) error
	// Restart starts replica i again after a Kill.
	Restart(ctx context.Context, i int) error
	// Enqueue inserts the job; a nil error is the system's acknowledgement that the job is
	// stored, after which losing it counts against the system.
	Enqueue(ctx context.Context, j Job) error
	// Completions delivers a report for every run of a job's handler that finished, until
	// Stop returns.
	Completions() <-chan Completion
	// Stop stops every replica gracefully and closes Completions.
	Stop(ctx context.Context) error
}
