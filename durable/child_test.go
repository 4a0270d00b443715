package durable_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	istore "github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// Child processes: TestMain re-executes the test binary with childEnv set, and the child runs
// a scheduler against the database its parent describes, until it is killed.
const (
	childEnv        = "SWITCHBOARD_DURABLE_CHILD"
	childBackendEnv = "SWITCHBOARD_DURABLE_CHILD_BACKEND"
	childTargetEnv  = "SWITCHBOARD_DURABLE_CHILD_TARGET"
	childLeaseEnv   = "SWITCHBOARD_DURABLE_CHILD_LEASE"
	childLogEnv     = "SWITCHBOARD_DURABLE_CHILD_LOG"
	// Mode poison only.
	childPoisonEnv      = "SWITCHBOARD_DURABLE_CHILD_POISON"       // Work.N of the item that crashes the process
	childWorkersEnv     = "SWITCHBOARD_DURABLE_CHILD_WORKERS"      // SchedulerConfig.Workers
	childMaxAttemptsEnv = "SWITCHBOARD_DURABLE_CHILD_MAX_ATTEMPTS" // the policy's MaxAttempts
)

// runChild runs a child process. Modes:
//
//	hold: prints "STARTED <item> <owner> <attempt>" when a Work item starts, then blocks it
//	      forever (the parent kills the process mid-item);
//	run:  processes items, simulating a little work per item and appending each succeeded
//	      item id to the log file; stops gracefully on SIGTERM.
//	poison: like run, but the handler of the Work item whose N is childPoisonEnv prints
//	      "POISON <item> <owner> <attempt>" and kills its own process with SIGKILL (a real
//	      crash: no deferred function, no shutdown, no outcome written). Every other item
//	      sleeps a millisecond and appends "<item> <attempt>" to the log file. Workers
//	      (childWorkersEnv), Lease and the policy's MaxAttempts (childMaxAttemptsEnv) come
//	      from the environment; BatchSize is the default.
func runChild(mode string) int {
	if mode == "replay" {
		return runReplayChild() // deadletters_child_test.go
	}
	if mode == "breaker" {
		return runBreakerChild() // fleet_breaker_test.go
	}
	if mode == "ratelimit" {
		return runRateLimitChild() // fleet_ratelimit_test.go
	}
	if mode == "keyrates" {
		return runKeyRatesChild() // fleet_keyrates_test.go
	}
	if mode == "schedule" {
		return runScheduleChild() // fleet_schedule_test.go
	}
	if mode == "bulk" {
		return runBulkChild() // bulkaction_fleet_test.go
	}
	if mode == "limit" {
		return runLimitChild() // limit_fleet_test.go
	}
	if mode == "relay" {
		return runRelayChild() // relay_fleet_test.go
	}
	if mode == "budget" {
		return runBudgetChild() // connbudget_child_test.go
	}
	if mode == "failover" {
		return runFailoverChild() // failover_fleet_test.go
	}
	ctx := context.Background()
	var qcfg durable.Config
	kind := os.Getenv(childBackendEnv)
	switch kind {
	case "sqlite", "postgres", "pgbouncer":
	default:
		fmt.Fprintln(os.Stderr, "child: no backend")
		return 2
	}
	policy := fastPolicy
	cfg := durable.SchedulerConfig{Workers: 2, BatchSize: 10, PollInterval: 5 * time.Millisecond}
	poison := -1
	if mode == "poison" {
		var errs [3]error
		poison, errs[0] = strconv.Atoi(os.Getenv(childPoisonEnv))
		cfg.Workers, errs[1] = strconv.Atoi(os.Getenv(childWorkersEnv))
		policy.MaxAttempts, errs[2] = strconv.Atoi(os.Getenv(childMaxAttemptsEnv))
		cfg.BatchSize = 0
		if err := errors.Join(errs[:]...); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 2
		}
	}
	qcfg.Policy = policy
	q, err := durable.Open(ctx, targetDriver(kind, os.Getenv(childTargetEnv)), qcfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	defer q.Close()
	durable.Register[*Work](q, "test.work")
	durable.Register[*Keyed](q, "test.keyed")
	cfg.Lease, _ = time.ParseDuration(os.Getenv(childLeaseEnv))
	var logFile *os.File
	if p := os.Getenv(childLogEnv); p != "" {
		if logFile, err = os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 2
		}
		defer logFile.Close()
	}
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, w *Work) (mediator.Void, error) {
		d, _ := durable.FromContext(ctx, w)
		switch mode {
		case "hold":
			fmt.Printf("STARTED %d %s %d\n", d.ItemID, d.Instance, d.Attempt)
			select {} // until SIGKILL
		case "run":
			// Simulated work, so the parent can kill the process while items are in flight.
			time.Sleep(2 * time.Millisecond)
			if logFile != nil {
				if _, err := fmt.Fprintf(logFile, "%d\n", d.ItemID); err != nil {
					return mediator.Void{}, err
				}
			}
		case "poison":
			if w.N == poison {
				fmt.Printf("POISON %d %s %d\n", d.ItemID, d.Instance, d.Attempt)
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal is on its way
			}
			time.Sleep(time.Millisecond)
			if logFile != nil {
				if _, err := fmt.Fprintf(logFile, "%d %d\n", d.ItemID, d.Attempt); err != nil {
					return mediator.Void{}, err
				}
			}
		}
		return mediator.Void{}, nil
	})
	mediator.HandleFunc(m, func(ctx context.Context, k *Keyed) (mediator.Void, error) {
		// Logged as a Work item of mode run is: the pause tests need a second request name.
		d, _ := durable.FromContext(ctx, k)
		if logFile != nil {
			if _, err := fmt.Fprintf(logFile, "%d\n", d.ItemID); err != nil {
				return mediator.Void{}, err
			}
		}
		return mediator.Void{}, nil
	})
	if err := m.Build(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	return serveChild(q, m, cfg)
}

// serveChild runs a scheduler of q on m with cfg, prints "READY <instance>", and stops it
// gracefully on SIGTERM; it returns the child's exit code.
func serveChild(q *durable.Queue, m mediator.Sender, cfg durable.SchedulerConfig) int {
	s, err := durable.NewScheduler(q, m, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	if err := s.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	fmt.Println("READY", s.InstanceID())
	<-sig
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(sctx); err != nil {
		fmt.Fprintln(os.Stderr, "child: shutdown:", err)
		return 1
	}
	return 0
}

// child is a running child process.
type child struct {
	cmd   *exec.Cmd
	lines chan string
}

func startChild(t *testing.T, b backend, mode string, extraEnv ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(append(os.Environ(), childEnv+"="+mode), b.env...), extraEnv...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 16)}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return c
}

// line waits for the next line the child prints that starts with prefix.
func (c *child) line(t *testing.T, prefix string) []string {
	t.Helper()
	timeout := time.NewTimer(60 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("child exited before printing %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return strings.Fields(l)
			}
		case <-timeout.C:
			t.Fatalf("child printed no %q line", prefix)
		}
	}
}

func (c *child) kill(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = c.cmd.Wait()
	for range c.lines {
	}
}

func (c *child) stop(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("child did not stop cleanly: %v", err)
	}
	for range c.lines {
	}
}

func TestKilledWorkerIsReclaimedAndItsLateCompletionRejected(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		q := b.queue(t, durable.Config{Policy: fastPolicy})
		ctx := context.Background()
		id := must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: 1})).ID

		lease := 30 * time.Second
		c := startChild(t, b, "hold", childLeaseEnv+"="+lease.String())
		f := c.line(t, "STARTED")
		if f[1] != strconv.FormatInt(int64(id), 10) || f[3] != "1" {
			t.Fatalf("child started %v", f)
		}
		deadOwner := f[2]
		it := item(t, q, id)
		if it.State != record.StateRunning || it.LeaseOwner != deadOwner || it.Attempts != 1 {
			t.Fatalf("held item %+v", it)
		}
		c.kill(t)

		// Another instance, whose clock is past the dead worker's lease, sweeps and retries it.
		clock := newFakeClock()
		clock.Set(it.LeaseUntil.Add(time.Second))
		q2 := b.queue(t, durable.Config{Policy: fastPolicy, Clock: clock})
		s := start(t, q2, mediatorFor(t, handlers{}), durable.SchedulerConfig{InstanceID: "survivor"})
		done := waitState(t, q, id, record.StateSucceeded)
		as := attempts(t, q, id)
		if done.Attempts != 2 || outcomes(as) != "1:abandoned 2:succeeded" || as[0].Instance != deadOwner || as[1].Instance != s.InstanceID() {
			t.Fatalf("item %+v rows %s %+v", done, outcomes(as), as)
		}
		// The dead worker's completion, arriving late, is rejected by the fence.
		now := clock.Now()
		res := must[[]error](t)(durable.StoreOf(q).Complete(ctx, []istore.Completion{{
			Fence: istore.Fence{ItemID: istore.ItemID(id), Owner: deadOwner, Attempt: 1}, State: istore.StateSucceeded,
			Outcome: istore.OutcomeSucceeded, StartedAt: now, EndedAt: now,
		}}))
		if !errors.Is(res[0], istore.ErrLeaseLost) {
			t.Fatalf("late completion: %v", res[0])
		}
		if after := attempts(t, q, id); len(after) != 2 {
			t.Fatalf("late completion wrote a row: %s", outcomes(after))
		}
	})
}

func TestSQLiteProcessRestartLosesNothing(t *testing.T) {
	b := sqliteBackend(t)
	q := b.queue(t, durable.Config{Policy: fastPolicy})
	ctx := context.Background()
	const n = 400
	for i := range n {
		must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: i}))
	}
	logPath := t.TempDir() + "/succeeded.log"
	lease := 500 * time.Millisecond
	extra := []string{childLeaseEnv + "=" + lease.String(), childLogEnv + "=" + logPath}

	first := startChild(t, b, "run", extra...)
	first.line(t, "READY")
	eventually(t, 60*time.Second, "the first process to make progress", func() bool {
		return stats(t, q).Counts[record.StateSucceeded] >= n/5
	})
	first.kill(t)
	mid := stats(t, q)
	if mid.Counts[record.StateSucceeded] == n {
		t.Fatalf("the first process finished before it was killed: %+v", mid.Counts)
	}
	t.Logf("killed with %+v", mid.Counts)

	second := startChild(t, b, "run", extra...)
	second.line(t, "READY")
	eventually(t, 60*time.Second, "every item to succeed", func() bool {
		return stats(t, q).Counts[record.StateSucceeded] == n
	})
	second.stop(t)

	final := stats(t, q)
	if final.Counts[record.StatePending]+final.Counts[record.StateRunning]+final.Counts[record.StateDead] != 0 {
		t.Fatalf("final %+v", final.Counts)
	}
	logged, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, l := range strings.Fields(string(logged)) {
		seen[l] = true
	}
	items := must[[]record.Item](t)(q.List(ctx, durable.Filter{Limit: n + 1}))
	if len(items) != n {
		t.Fatalf("%d items, want %d", len(items), n)
	}
	for _, it := range items {
		if !seen[strconv.FormatInt(int64(it.ID), 10)] {
			t.Errorf("item %d succeeded in the store but its handler never completed", it.ID)
		}
		checkAttemptRows(t, q, it, "abandoned")
	}
}

// checkAttemptRows checks that a succeeded item's rows are numbered 1..Attempts, that the
// last succeeded and that every earlier one has an outcome in allowed.
func checkAttemptRows(t testing.TB, q *durable.Queue, it record.Item, allowed ...string) {
	t.Helper()
	as := attempts(t, q, it.ID)
	if len(as) != it.Attempts || len(as) == 0 {
		t.Errorf("item %d: %d attempts, rows %s", it.ID, it.Attempts, outcomes(as))
		return
	}
	for i, a := range as {
		last := i == len(as)-1
		ok := a.Number == i+1 && a.ItemID == it.ID && !a.EndedAt.Before(a.StartedAt)
		if last {
			ok = ok && a.Outcome == record.OutcomeSucceeded
		} else {
			ok = ok && strings.Contains(" "+strings.Join(allowed, " ")+" ", " "+string(a.Outcome)+" ")
		}
		if !ok {
			t.Errorf("item %d: rows %s", it.ID, outcomes(as))
			return
		}
	}
}
