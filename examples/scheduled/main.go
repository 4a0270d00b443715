package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/mediator"
)

// RefreshRates reloads the exchange rates from Source. A schedule declared in code sends it:
// its request is built by a Go function at each run and never stored.
type RefreshRates struct {
	mediator.Command
	Source string
}

// SendReport mails the day's report. It is registered under a name, so that a schedule added
// at run time, whose request is a name and a JSON payload, can send it.
type SendReport struct {
	mediator.Command
	To string `json:"to"`
}

// The schedules' names, as the run log and the admin API show them.
const (
	ratesSchedule  = "rates.refresh"
	reportSchedule = "reports.nightly"
)

// rates is the handler of RefreshRates: its second run fails, as a rates source answering 503
// makes it, and its third waits for release before it returns, as a slow source makes it.
type rates struct {
	mu      sync.Mutex
	runs    int
	release chan struct{} // closed to let the slow run return
}

func (r *rates) refresh(ctx context.Context, _ *RefreshRates) (mediator.Void, error) {
	r.mu.Lock()
	r.runs++
	n := r.runs
	r.mu.Unlock()
	switch n {
	case 2:
		return mediator.Void{}, errors.New("rates source answered 503 Service Unavailable")
	case 3:
		select {
		case <-r.release:
		case <-ctx.Done():
			return mediator.Void{}, ctx.Err()
		}
	}
	return mediator.Void{}, nil
}

// summary is what the run logs said, for the test.
type summary struct {
	runs     map[string][]record.ScheduleRun // each schedule's run log, oldest first
	passed   time.Time                       // the due time of the rates schedule's run passed over while it was paused
	paused   time.Time                       // when it was paused, and resumed
	resumed  time.Time
	nightly  record.ScheduleInfo // the nightly schedule as it was added
	reports  []string            // whom SendReport mailed
	schedule []record.ScheduleInfo
}

func run(ctx context.Context, out io.Writer, dbPath string) (*summary, error) {
	queue, err := durable.Open(ctx, sqlite.Open(dbPath), durable.Config{InstanceID: "ops-1", PollInterval: 50 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	defer queue.Close()
	durable.Register[*SendReport](queue, "reports.send")
	// "@every 1s" is an interval; a five-field cron expression ("*/5 * * * *") names times.
	durable.Schedule(queue, ratesSchedule, "@every 1s", func() *RefreshRates { return &RefreshRates{Source: "ecb"} })

	r := &rates{release: make(chan struct{})}
	var mu sync.Mutex
	var reports []string
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, r.refresh)
	mediator.HandleFunc(m, func(_ context.Context, s *SendReport) (mediator.Void, error) {
		mu.Lock()
		defer mu.Unlock()
		reports = append(reports, s.To)
		return mediator.Void{}, nil
	})
	if err := m.Build(); err != nil {
		return nil, err
	}
	defer m.Close()
	if err := queue.Start(m); err != nil {
		return nil, err
	}
	defer queue.Shutdown(context.WithoutCancel(ctx)) // on an early return; a second call returns the first one's result
	defer closeOnce(r.release)                       // an early return must not leave the slow run waiting

	sum := &summary{runs: map[string][]record.ScheduleRun{}}
	// A schedule added at run time: its request is data (a registered name and a payload), so
	// every instance that registers the name can run it. 02:00 UTC every night.
	sum.nightly, err = queue.AddSchedule(ctx, durable.ScheduleSpec{
		Name: reportSchedule, Spec: "0 2 * * *", Request: "reports.send", Payload: []byte(`{"to": "finance@example.com"}`),
	}, "alice")
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "schedules: %s every second (declared in code); %s at %q, next run %s (added by alice)\n",
		ratesSchedule, reportSchedule, sum.nightly.Spec, sum.nightly.NextRun.UTC().Format(time.DateTime+" MST"))

	log := &runLog{queue: queue, out: out, sum: sum}
	fmt.Fprintln(out, "1. the rates schedule runs: a success, then a failure; the next run is due a second later all the same")
	if err := log.await(ctx, ratesSchedule, func(record.ScheduleRun) bool { return len(sum.runs[ratesSchedule]) == 2 }); err != nil {
		return nil, err
	}
	fmt.Fprintln(out, "2. the third run is slow: the run due while it goes is skipped, not queued behind it")
	if err := log.await(ctx, ratesSchedule, func(run record.ScheduleRun) bool { return run.Outcome == record.OutcomeSkipped }); err != nil {
		return nil, err
	}
	closeOnce(r.release)
	if err := log.await(ctx, ratesSchedule, func(run record.ScheduleRun) bool { return run.Outcome == record.OutcomeSucceeded }); err != nil {
		return nil, err
	}

	fmt.Fprintln(out, "3. alice pauses the rates schedule; bob asks for a run now, which runs, paused or not")
	info, err := queue.PauseSchedule(ctx, ratesSchedule, "alice", time.Time{})
	if err != nil {
		return nil, err
	}
	sum.paused = info.PausedAt
	fmt.Fprintf(out, "   paused by %s; next run due %s\n", info.PausedBy, info.NextRun.UTC().Format(time.TimeOnly))
	if _, err := queue.RunScheduleNow(ctx, ratesSchedule, "bob"); err != nil {
		return nil, err
	}
	if err := log.await(ctx, ratesSchedule, func(run record.ScheduleRun) bool { return run.RunNowBy == "bob" }); err != nil {
		return nil, err
	}
	// A paused schedule's due runs are passed over: its next run moves on, and nothing is logged.
	next, err := nextRunAfter(ctx, queue, ratesSchedule, info.NextRun)
	if err != nil {
		return nil, err
	}
	sum.passed = info.NextRun
	fmt.Fprintf(out, "   the run due %s is passed over, unlogged; the next is due %s\n", info.NextRun.UTC().Format(time.TimeOnly), next.UTC().Format(time.TimeOnly))
	info, err = queue.ResumeSchedule(ctx, ratesSchedule, "alice")
	if err != nil {
		return nil, err
	}
	sum.resumed = time.Now()
	fmt.Fprintf(out, "4. alice resumes it; the runs due while it was paused are not caught up: next run %s\n", info.NextRun.UTC().Format(time.TimeOnly))
	before := len(sum.runs[ratesSchedule])
	if err := log.await(ctx, ratesSchedule, func(record.ScheduleRun) bool { return len(sum.runs[ratesSchedule]) > before }); err != nil {
		return nil, err
	}

	fmt.Fprintln(out, "5. bob runs the nightly report now, hours before it is due")
	if _, err := queue.RunScheduleNow(ctx, reportSchedule, "bob"); err != nil {
		return nil, err
	}
	if err := log.await(ctx, reportSchedule, func(run record.ScheduleRun) bool { return run.RunNowBy == "bob" }); err != nil {
		return nil, err
	}

	if err := queue.Shutdown(ctx); err != nil { // waits for runs going and their log entries
		return nil, err
	}
	mu.Lock()
	sum.reports = slices.Clone(reports)
	mu.Unlock()
	sum.schedule, err = queue.Schedules(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(out, "6. the schedules and their run logs")
	for _, s := range sum.schedule {
		runs, err := queue.ScheduleRuns(ctx, s.Name, 0)
		if err != nil {
			return nil, err
		}
		byOutcome := map[record.Outcome]int{}
		for _, run := range runs {
			byOutcome[run.Outcome]++
		}
		fmt.Fprintf(out, "   %-15s runs logged: %d (%d succeeded, %d failed, %d skipped); last outcome %s; next run %s\n",
			s.Name, len(runs), byOutcome[record.OutcomeSucceeded], byOutcome[record.OutcomeFailed], byOutcome[record.OutcomeSkipped],
			s.LastOutcome, s.NextRun.UTC().Format(time.DateTime))
	}
	fmt.Fprintf(out, "   reports mailed to %v\n", sum.reports)
	return sum, nil
}

// runLog prints the entries of the run logs as they are logged, and keeps them in sum.runs.
type runLog struct {
	queue *durable.Queue
	out   io.Writer
	sum   *summary
	last  map[string]int64 // the id of the last entry printed, by schedule
}

// await polls name's run log, printing each new entry, until done reports true for one.
func (l *runLog) await(ctx context.Context, name string, done func(record.ScheduleRun) bool) error {
	if l.last == nil {
		l.last = map[string]int64{}
	}
	return poll(ctx, "a run of "+name, func(ctx context.Context) (bool, error) {
		runs, err := l.queue.ScheduleRuns(ctx, name, 0)
		if err != nil {
			return false, err
		}
		slices.Reverse(runs) // oldest first
		for _, run := range runs {
			if run.ID <= l.last[name] {
				continue
			}
			l.last[name] = run.ID
			l.sum.runs[name] = append(l.sum.runs[name], run)
			printRun(l.out, run)
			if done(run) {
				return true, nil
			}
		}
		return false, nil
	})
}

// printRun writes one run log entry.
func printRun(out io.Writer, run record.ScheduleRun) {
	fmt.Fprintf(out, "   %s due %s: %s", run.Name, run.DueAt.UTC().Format(time.TimeOnly), run.Outcome)
	if run.RunNowBy != "" {
		fmt.Fprintf(out, " (run now by %s)", run.RunNowBy)
	}
	if took := run.EndedAt.Sub(run.StartedAt); took >= 100*time.Millisecond {
		fmt.Fprintf(out, " after %v", took.Round(100*time.Millisecond))
	}
	if run.Error != "" {
		fmt.Fprintf(out, ": %s", run.Error)
	}
	fmt.Fprintln(out)
}

// nextRunAfter waits until the schedule name's next run is later than due, and returns it.
func nextRunAfter(ctx context.Context, queue *durable.Queue, name string, due time.Time) (next time.Time, err error) {
	err = poll(ctx, name+"'s next run to move past "+due.UTC().Format(time.TimeOnly), func(ctx context.Context) (bool, error) {
		infos, err := queue.Schedules(ctx)
		for _, s := range infos {
			if s.Name == name && s.NextRun.After(due) {
				next = s.NextRun
				return true, nil
			}
		}
		return false, err
	})
	return next, err
}

// poll calls check every 20 ms until it reports true or fails, for at most 10 seconds.
func poll(ctx context.Context, what string, check func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if ok, err := check(ctx); ok || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
}

func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}

func main() {
	keep := flag.String("db", "", "SQLite file to keep the queue in (default: a temporary file)")
	flag.Parse()
	// The work runs in a function, so that its deferred clean-up (the temporary directory)
	// runs before an exit with an error.
	err := func() error {
		path := *keep
		if path == "" {
			dir, err := os.MkdirTemp("", "switchboard-scheduled")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			path = filepath.Join(dir, "queue.db")
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		_, err := run(ctx, os.Stdout, path)
		return err
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
