package durable_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/durabletest"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/mediator"
)

type PurgeSessions struct {
	mediator.Command
	OlderThan time.Duration
}

// A request sent every night at two, New York time, by whichever instance claims the run.
func ExampleSchedule() {
	dir, _ := os.MkdirTemp("", "durable-schedule-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	// A manual clock stands in for the night's wait; an application leaves Config.Clock zero.
	clock := durabletest.NewManualClock(time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC))
	q, err := durable.Open(ctx, sqlite.Open(filepath.Join(dir, "queue.db")), durable.Config{Clock: clock})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()

	ny, _ := time.LoadLocation("America/New_York")
	durable.Schedule(q, "sessions.purge", "0 2 * * *", func() *PurgeSessions {
		return &PurgeSessions{OlderThan: 30 * 24 * time.Hour}
	}, durable.WithLocation(ny))

	purged := make(chan struct{})
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, r *PurgeSessions) (mediator.Void, error) {
		fmt.Println("purging sessions older than", r.OlderThan)
		close(purged)
		return mediator.Void{}, nil
	})
	if err := m.Build(); err != nil {
		fmt.Println(err)
		return
	}
	if err := q.Start(m, durable.SchedulerConfig{}); err != nil {
		fmt.Println(err)
		return
	}
	infos, _ := q.Schedules(ctx)
	fmt.Println("next run:", infos[0].NextRun.In(ny).Format(time.DateTime), infos[0].Location)

	clock.Advance(18 * time.Hour) // 02:00 in New York (EDT, UTC-4)
	<-purged
	_ = q.Shutdown(ctx) // waits for the run and its log entry

	runs, _ := q.ScheduleRuns(ctx, "sessions.purge", 10)
	fmt.Println("run due", runs[0].DueAt.In(ny).Format(time.DateTime), runs[0].Outcome)
	// Output:
	// next run: 2030-06-02 02:00:00 America/New_York
	// purging sessions older than 720h0m0s
	// run due 2030-06-02 02:00:00 succeeded
}
