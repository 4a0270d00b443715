package durable_test

import (
	"context"
	"errors"
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
	if err := q.Start(m); err != nil {
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

type RotateKeys struct {
	mediator.Command
	Service string
}

// A schedule added while the queue runs, as the admin API adds one: its request is a
// registered name and a payload, so that every instance can run it. A run now is claimed by one
// instance and logged with who asked.
func ExampleQueue_AddSchedule() {
	dir, _ := os.MkdirTemp("", "durable-addschedule-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	clock := durabletest.NewManualClock(time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC))
	q, err := durable.Open(ctx, sqlite.Open(filepath.Join(dir, "queue.db")), durable.Config{Clock: clock})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	durable.Register[*RotateKeys](q, "keys.rotate")

	ran := make(chan struct{}, 2)
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, r *RotateKeys) (mediator.Void, error) {
		fmt.Println("rotating the keys of", r.Service)
		ran <- struct{}{}
		return mediator.Void{}, nil
	})
	if err := m.Build(); err != nil {
		fmt.Println(err)
		return
	}
	if err := q.Start(m); err != nil {
		fmt.Println(err)
		return
	}

	_, err = q.AddSchedule(ctx, durable.ScheduleSpec{Name: "keys.weekly", Spec: "0 3 * * 1", Location: "Europe/Paris",
		Request: "keys.rotate", Payload: []byte(`{"Service": "billing"}`)}, "alice")
	fmt.Println("added:", err)
	_, err = q.AddSchedule(ctx, durable.ScheduleSpec{Name: "keys.daily", Spec: "@daily", Request: "keys.rotate", Payload: []byte(`{"Service": 7}`)}, "alice")
	fmt.Println(errors.Is(err, durable.ErrInvalidSchedule))

	info, _ := q.PauseSchedule(ctx, "keys.weekly", "alice", time.Time{})
	fmt.Println("paused:", info.Paused, "next run:", info.NextRun.In(time.UTC).Format(time.DateTime))
	_, _ = q.RunScheduleNow(ctx, "keys.weekly", "bob") // runs, paused or not
	<-ran
	_ = q.Shutdown(ctx)

	runs, _ := q.ScheduleRuns(ctx, "keys.weekly", 10)
	fmt.Println("run now by", runs[0].RunNowBy, runs[0].Outcome)
	// Output:
	// added: <nil>
	// true
	// paused: true next run: 2030-06-03 01:00:00
	// rotating the keys of billing
	// run now by bob succeeded
}
