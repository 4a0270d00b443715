package replicas

import (
	"context"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/switchboard-go/switchboard/benchmarks/internal/chaos"
	"github.com/switchboard-go/switchboard/mediator"
)

// SwitchboardJob is the request a switchboard replica handles: a chaos.Job.
type SwitchboardJob struct {
	mediator.Command
	ID      string `json:"id"`
	Payload []byte `json:"payload"`
}

// SwitchboardName is the registered name of SwitchboardJob.
const SwitchboardName = "chaos.job"

// RiverArgs is the job a River replica works: a chaos.Job.
type RiverArgs struct {
	ID      string `json:"id"`
	Payload []byte `json:"payload"`
}

// Kind is River's name of the job.
func (RiverArgs) Kind() string { return "chaos_job" }

// Report writes the line a replica prints for a run of a job's handler that finished, which the
// harness reads back with ParseReport.
func Report(id string, attempt int, started, finished time.Time) string {
	return fmt.Sprintf("done %s %d %d %d\n", id, attempt, started.UnixNano(), finished.UnixNano())
}

// ParseReport reads a line Report wrote, for replica instance.
func ParseReport(line string, instance int) (chaos.Completion, error) {
	var (
		c       chaos.Completion
		st, fin int64
	)
	if _, err := fmt.Sscanf(line, "done %s %d %d %d", &c.ID, &c.Attempt, &st, &fin); err != nil {
		return chaos.Completion{}, fmt.Errorf("replica %d: report %q: %w", instance, line, err)
	}
	c.Started, c.Finished, c.Instance = time.Unix(0, st), time.Unix(0, fin), instance
	return c, nil
}

// work is the handler's work: chaos.HandlerTime, or less when ctx ends first.
func work(ctx context.Context) error {
	t := time.NewTimer(chaos.HandlerTime)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

var _ river.JobArgs = RiverArgs{}
