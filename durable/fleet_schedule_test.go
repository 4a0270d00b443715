package durable_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// runScheduleChild runs a scheduler whose Tick handler appends "<schedule> <instance>" to the
// log file, declares the schedule "marker" (@every 1s) in code, and takes commands on stdin,
// answering each on a line: "add <name> <spec>", "pause <name>", "resume <name>",
// "runnow <name>", "remove <name>", made on its own queue with actor ops-<instance>.
func runScheduleChild() int {
	ctx := context.Background()
	instance := os.Getenv(childInstanceEnv)
	q, err := durable.Open(ctx, targetDriver(os.Getenv(childBackendEnv), os.Getenv(childTargetEnv)), durable.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	defer q.Close()
	log, err := os.OpenFile(os.Getenv(childLogEnv), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	defer log.Close()
	durable.Register[*Tick](q, "tick")
	durable.Schedule(q, "marker", "@every 1s", tick("marker"))
	var mu sync.Mutex
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, k *Tick) (mediator.Void, error) {
		mu.Lock()
		defer mu.Unlock()
		_, err := fmt.Fprintf(log, "%s %s\n", k.Schedule, instance)
		return mediator.Void{}, err
	})
	if err := m.Build(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	if err := durable.StartWith(q, m, durable.SchedulerConfig{InstanceID: instance, PollInterval: 20 * time.Millisecond}); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	defer func() { _ = q.Shutdown(ctx) }()
	actor := "ops-" + instance
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) < 2 {
			fmt.Println("ERR want a command and a name")
			continue
		}
		var err error
		switch f[0] {
		case "add":
			_, err = q.AddSchedule(ctx, durable.ScheduleSpec{Name: f[1], Spec: strings.Join(f[2:], " "), Request: "tick",
				Payload: fmt.Appendf(nil, `{"Schedule": %q}`, f[1])}, actor)
		case "pause":
			_, err = q.PauseSchedule(ctx, f[1], actor, time.Time{})
		case "resume":
			_, err = q.ResumeSchedule(ctx, f[1], actor)
		case "runnow":
			_, err = q.RunScheduleNow(ctx, f[1], actor)
		case "remove":
			_, err = q.RemoveSchedule(ctx, f[1], actor)
		default:
			fmt.Println("ERR unknown command", f[0])
			continue
		}
		fmt.Println(okOr(err))
	}
	return 0
}

type scheduleChild struct{ *breakerChild }

func startScheduleChild(t *testing.T, b backend, name, logPath string) scheduleChild {
	t.Helper()
	return scheduleChild{startCommandChild(t, b, name, childEnv+"=schedule", childLogEnv+"="+logPath)}
}

func (c scheduleChild) must(t *testing.T, format string, args ...any) {
	t.Helper()
	if got := c.do(t, format, args...); got != "OK" {
		t.Fatalf("%s: %s: %s", c.name, fmt.Sprintf(format, args...), got)
	}
}

// handled counts the lines of the children's log per schedule.
func handled(t *testing.T, path string) map[string]int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if name, _, ok := strings.Cut(l, " "); ok {
			out[name]++
		}
	}
	return out
}

// Two OS processes on one database: a schedule added through one is run by the fleet, each due
// run once by one of them; a pause made through the other stops its runs in both; a run-now
// made through the first, of the paused schedule, runs once; a removal stops it for good. The
// handlers' own log counts each run that the run log has, no more.
func TestFleetScheduleControlsAcrossProcesses(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		if b.name != "postgres" {
			t.Skip("the fleet runs on PostgreSQL, the database instances of a fleet share")
		}
		logPath := t.TempDir() + "/runs.log"
		a := startScheduleChild(t, b, "a", logPath)
		c := startScheduleChild(t, b, "b", logPath)
		op := b.bare(t, durable.Config{})
		runs := func(name string) []record.ScheduleRun {
			return must[[]record.ScheduleRun](t)(op.ScheduleRuns(context.Background(), name, 1000))
		}
		waitCount := func(name string, n int) {
			t.Helper()
			eventually(t, 30*time.Second, fmt.Sprintf("%d runs of %s", n, name), func() bool { return len(runs(name)) >= n })
		}

		a.must(t, "add fleet @every 1s")
		waitCount("fleet", 3)

		c.must(t, "pause fleet")
		paused := time.Now()
		// Three more marker runs: every instance has read the table since the pause.
		waitCount("marker", len(runs("marker"))+3)
		for _, r := range runs("fleet") {
			if r.DueAt.After(paused) {
				t.Fatalf("a run due at %v after the pause at %v: %+v", r.DueAt, paused, r)
			}
		}
		before := len(runs("fleet"))

		a.must(t, "runnow fleet")
		eventually(t, 30*time.Second, "the run now", func() bool { return len(runs("fleet")) > before })
		waitCount("marker", len(runs("marker"))+3)
		var now []record.ScheduleRun
		for _, r := range runs("fleet") {
			if r.RunNowBy != "" {
				now = append(now, r)
			}
		}
		if len(now) != 1 || now[0].RunNowBy != "ops-a" || now[0].Outcome != record.OutcomeSucceeded || len(runs("fleet")) != before+1 {
			t.Fatalf("run now: %+v (%d runs, %d before)", now, len(runs("fleet")), before)
		}

		c.must(t, "resume fleet")
		waitCount("fleet", before+3)
		a.must(t, "remove fleet")
		removed := time.Now()
		waitCount("marker", len(runs("marker"))+3)
		fleet := runs("fleet")
		for _, r := range fleet {
			if r.DueAt.After(removed) {
				t.Fatalf("a run due at %v after the removal at %v: %+v", r.DueAt, removed, r)
			}
		}
		// Each due time once in the run log, and each logged run handled once.
		due := map[time.Time]int{}
		succeeded, instances := 0, map[string]int{}
		for _, r := range fleet {
			instances[r.Instance]++
			if r.RunNowBy == "" {
				due[r.DueAt]++
			}
			if r.Outcome == record.OutcomeSucceeded {
				succeeded++
			}
		}
		for d, n := range due {
			if n != 1 {
				t.Errorf("the run due at %v was logged %d times", d, n)
			}
		}
		a.stop()
		c.stop()
		if h := handled(t, logPath); h["fleet"] != succeeded {
			t.Fatalf("handled %d fleet runs; the run log has %d succeeded (%d in all)", h["fleet"], succeeded, len(fleet))
		}
		t.Logf("%d fleet runs, by instance %v", len(fleet), instances)
	})
}
