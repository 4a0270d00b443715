package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeSystem runs jobs in memory on replicas that pull from one queue, and misbehaves on
// purpose: it acknowledges lose and never runs it, completes twice twice with the same attempt
// (a silent duplicate), and completes retry twice with attempts 1 and 2 (a recorded retry).
type fakeSystem struct {
	lose, twice, retry string

	queue chan Job
	out   chan Completion
	stop  chan struct{}
	wg    sync.WaitGroup

	mu     sync.Mutex
	alive  []bool
	events []string
	t0     time.Time
}

func newFakeSystem(lose, twice, retry string) *fakeSystem {
	return &fakeSystem{lose: lose, twice: twice, retry: retry, queue: make(chan Job, 1<<16),
		out: make(chan Completion), stop: make(chan struct{}), t0: time.Now()}
}

func (f *fakeSystem) Name() string { return "fake" }

func (f *fakeSystem) Start(_ context.Context, n int) error {
	f.alive = make([]bool, n)
	for i := range n {
		f.alive[i] = true
		f.wg.Go(func() { f.work(i) })
	}
	return nil
}

func (f *fakeSystem) isAlive(i int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.alive[i]
}

func (f *fakeSystem) work(i int) {
	for {
		if !f.isAlive(i) {
			select {
			case <-time.After(10 * time.Millisecond):
				continue
			case <-f.stop:
				return
			}
		}
		var j Job
		select {
		case j = <-f.queue:
		case <-f.stop:
			return
		}
		if j.ID == f.lose {
			continue
		}
		started := time.Now()
		time.Sleep(HandlerTime)
		runs := []int{1}
		switch j.ID {
		case f.twice:
			runs = []int{1, 1}
		case f.retry:
			runs = []int{1, 2}
		}
		for _, a := range runs {
			f.out <- Completion{ID: j.ID, Started: started, Instance: i, Attempt: a}
		}
	}
}

func (f *fakeSystem) setAlive(i int, alive bool, what string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.alive[i] = alive
	f.events = append(f.events, fmt.Sprintf("%s %d %v", what, i, time.Since(f.t0)))
	return nil
}

func (f *fakeSystem) Kill(_ context.Context, i int) error    { return f.setAlive(i, false, "kill") }
func (f *fakeSystem) Restart(_ context.Context, i int) error { return f.setAlive(i, true, "restart") }

func (f *fakeSystem) Enqueue(_ context.Context, j Job) error {
	if len(j.Payload) != PayloadSize {
		return fmt.Errorf("payload of %d bytes", len(j.Payload))
	}
	f.queue <- j
	return nil
}

func (f *fakeSystem) Completions() <-chan Completion { return f.out }

func (f *fakeSystem) Stop(context.Context) error {
	close(f.stop)
	f.wg.Wait()
	close(f.out)
	return nil
}

func TestRunCountsLostAndRunTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sys := newFakeSystem("j150", "j250", "j350")
		sc := Scenario{Name: "crash", Class: Chaos, RecoveryBound: 5 * time.Second, Phases: []Phase{
			{Label: "warmup", Kind: Warmup, Duration: time.Second},
			{Label: "baseline", Kind: Clean, Duration: 10 * time.Second},
			{Label: "kill", Kind: KillWorker, Duration: 2 * time.Second, Instance: 0},
			{Label: "restart", Kind: StartWorker, Duration: 2 * time.Second, Instance: 0},
			{Label: "pressure", Kind: HighLoad, Duration: 4 * time.Second},
			{Label: "recovery", Kind: Clean, Duration: 10 * time.Second},
		}}
		res, err := Run(t.Context(), sys, sc, Config{Rate: 100, DrainTimeout: 5 * time.Second})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		c := res.Counts
		if !slices.Equal(c.Lost, []string{"j150"}) {
			t.Errorf("lost %q, want [j150]", c.Lost)
		}
		if !slices.Equal(c.RunTwice, []string{"j250", "j350"}) {
			t.Errorf("run twice %q, want [j250 j350]", c.RunTwice)
		}
		if !slices.Equal(c.RecordedRetries, []string{"j350"}) {
			t.Errorf("recorded retries %q, want [j350]", c.RecordedRetries)
		}
		if c.Completed != c.Acknowledged-1 || c.Unknown != 0 || res.Rejected != 0 {
			t.Errorf("counts %+v, rejected %d", c, res.Rejected)
		}
		// One lost job never drains: the drain times out.
		if res.Drained {
			t.Error("Drained with a lost job")
		}
		if want := []string{"kill 0 11s", "restart 0 13s"}; !slices.Equal(sys.events, want) {
			t.Errorf("system events %q, want %q", sys.events, want)
		}
		// j150, j250 and j350 were enqueued at 1.51 s, 2.51 s and 3.51 s, in the baseline.
		if base, _ := res.Phase("baseline"); base.Lost != 1 || base.RunTwice != 2 {
			t.Errorf("baseline lost %d, run twice %d; want 1 and 2", base.Lost, base.RunTwice)
		}
		if _, ok := res.Phase("warmup"); ok || len(res.Phases) != 5 {
			t.Errorf("%d phase reports; warmup reported %v", len(res.Phases), ok)
		}
		base, _ := res.Phase("baseline")
		press, _ := res.Phase("pressure")
		// 100 jobs/s offered, 150 under high load; a job's ack and completion are 1 ms apart.
		if base.Throughput < 99 || base.Throughput > 101 || press.Throughput < 148 || press.Throughput > 151 {
			t.Errorf("throughput baseline %.1f, pressure %.1f; want 100 and 150", base.Throughput, press.Throughput)
		}
		if base.Pickup.N < 990 || base.Pickup.P99 > time.Millisecond {
			t.Errorf("baseline pickup %+v", base.Pickup)
		}
		if !res.Recovered || res.Recovery != 0 || res.CleanThroughput != base.Throughput {
			t.Errorf("recovered %v in %v, clean %.1f", res.Recovered, res.Recovery, res.CleanThroughput)
		}
		// The trace runs from the baseline's start to the recovery's end, a figure a second:
		// 100 a second in the baseline, 150 under high load.
		if len(res.Trace) != 28 || !res.TraceStart.Equal(base.Window.Start) {
			t.Errorf("trace of %d seconds from %v, want 28 from %v", len(res.Trace), res.TraceStart, base.Window.Start)
		} else if res.Trace[5] < 99 || res.Trace[5] > 101 || res.Trace[16] < 149 || res.Trace[16] > 151 {
			t.Errorf("trace %v: want 100 at second 5, 150 at second 16", res.Trace)
		}
		if res.CleanPickup != base.Pickup || res.WorstPickup.P95 < base.Pickup.P95 {
			t.Errorf("clean pickup %+v (baseline %+v), worst %+v", res.CleanPickup, base.Pickup, res.WorstPickup)
		}
		if cell := Judge(sc, res); cell.Pass || !slices.Equal(cell.Reasons, []string{"1 lost"}) {
			t.Errorf("Judge: pass %v, reasons %q", cell.Pass, cell.Reasons)
		}
	})
}

func TestRunRepeatedKill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sys := newFakeSystem("", "", "")
		sc := Scenario{Name: "repeated", Class: Chaos, RecoveryBound: 5 * time.Second, Phases: []Phase{
			{Label: "baseline", Kind: Clean, Duration: 2 * time.Second},
			{Label: "repeated", Kind: RepeatedKill, Duration: 5 * time.Second, Instance: 1, Period: 2 * time.Second},
			{Label: "recovery", Kind: Clean, Duration: 2 * time.Second},
		}}
		res, err := Run(t.Context(), sys, sc, Config{Rate: 50})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		want := []string{"kill 1 2s", "restart 1 3s", "kill 1 4s", "restart 1 5s", "kill 1 6s", "restart 1 7s"}
		if !slices.Equal(sys.events, want) {
			t.Errorf("system events %q, want %q", sys.events, want)
		}
		if !res.Drained || len(res.Counts.Lost) != 0 || !Judge(sc, res).Pass {
			t.Errorf("drained %v, lost %d, cell %+v", res.Drained, len(res.Counts.Lost), Judge(sc, res).Reasons)
		}
	})
}

func TestRunTimeoutFailsTheCell(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sys := newFakeSystem("", "", "")
		hang := &eventFault{t0: time.Now(), block: true}
		sc := Scenario{Name: "hang", Class: Chaos, RecoveryBound: 5 * time.Second, Timeout: 20 * time.Second, Phases: []Phase{
			{Label: "baseline", Kind: Clean, Duration: 5 * time.Second},
			{Label: "restart", Kind: PostgresRestart, Duration: 5 * time.Second},
			{Label: "recovery", Kind: Clean, Duration: 5 * time.Second},
		}}
		res, err := Run(t.Context(), sys, sc, Config{Rate: 20, Faults: map[Kind]Fault{PostgresRestart: hang}})
		if !errors.Is(err, ErrTimeout) || !res.Timeline.TimedOut {
			t.Fatalf("Run = %v, timed out %v; want ErrTimeout", err, res.Timeline.TimedOut)
		}
		if want := []string{"start restart 5s", "stop restart 20s"}; !slices.Equal(hang.events, want) {
			t.Errorf("fault events %q, want %q", hang.events, want)
		}
		// The jobs acknowledged before the abort still drain: the timeout alone fails the cell.
		c := Judge(sc, res)
		if c.Pass || len(c.Reasons) == 0 || c.Reasons[0] != "timed out after 20s" || len(res.Counts.Lost) != 0 {
			t.Errorf("Judge: pass %v, reasons %q, lost %d", c.Pass, c.Reasons, len(res.Counts.Lost))
		}
	})
}

func TestRunRecoveryAfterEachFault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sys := newFakeSystem("", "", "")
		sc := Scenario{Name: "alone", Class: Chaos, RecoveryBound: 5 * time.Second, Phases: []Phase{
			{Label: "baseline", Kind: Clean, Duration: 10 * time.Second},
			{Label: "kill", Kind: KillWorker, Duration: 5 * time.Second},
			{Label: "restart", Kind: StartWorker, Duration: 5 * time.Second},
			{Label: "recovery", Kind: Clean, Duration: 10 * time.Second},
		}}
		// One replica: killing it stops all work for 5 s; restarted, it runs the 500 jobs held
		// up in half a second.
		res, err := Run(t.Context(), sys, sc, Config{Replicas: 1, Rate: 100})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		kill, _ := res.Phase("kill")
		restart, _ := res.Phase("restart")
		if kill.Throughput > 1 || restart.Throughput < 190 {
			t.Errorf("throughput killed %.1f, restarted %.1f; want under 1 (the job in flight) and about 200", kill.Throughput, restart.Throughput)
		}
		// At the kill's end the 10 s window holds 5 s at 100/s and 5 s of nothing: below 90/s
		// until the held-up jobs have run.
		if !kill.Recovered || kill.Recovery <= 0 || kill.Recovery > time.Second {
			t.Errorf("recovery after the kill %v, %v; want within 1 s, not at once", kill.Recovery, kill.Recovered)
		}
		if !res.Recovered || res.Recovery != 0 || !restart.Recovered {
			t.Errorf("run recovery %v, %v; want 0 after the restart phase", res.Recovery, res.Recovered)
		}
		if restart.Pickup.P99 < 4*time.Second {
			t.Errorf("restart phase pickup %+v; want a p99 over 4 s from the jobs held up", restart.Pickup)
		}
	})
}
