package durable_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/internal/pgtest"
	"github.com/switchboard-go/switchboard/durable/postgres"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// The failover fleet's settings.
const (
	failoverInstances = 3
	failoverWorkers   = 4
	failoverRate      = 100                    // enqueues a second, by the test
	failoverLease     = 4 * time.Second        // an item whose claim was lost comes back after it
	failoverPoll      = 100 * time.Millisecond // the instances' PollInterval
	failoverEnqueue   = 2 * time.Second        // each enqueue's deadline
	failoverDrain     = time.Minute            // how long the queue may take to drain after the load
	// failoverSecondsEnv sets the seconds of load (default 6): the primary is killed a third
	// of the way through.
	failoverSecondsEnv = "SWITCHBOARD_FAILOVER_SECONDS"
	// The child's environment (mode "failover").
	failoverInstanceEnv = "SWITCHBOARD_DURABLE_CHILD_INSTANCE"
)

// runFailoverChild runs an instance of TestFleetSurvivesFailover: a scheduler of
// failoverWorkers workers on the DSN of childTargetEnv (both servers, read-write), whose
// handler works 5 ms and then appends "<item> <instance> <attempt>" to the file of
// childLogEnv: a record of every run that does not depend on the database that fails over.
// It logs warnings to stderr and stops gracefully on SIGTERM.
func runFailoverChild() int {
	instance := os.Getenv(failoverInstanceEnv)
	logger, err := zap.NewProduction(zap.IncreaseLevel(zap.WarnLevel))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	q, err := durable.Open(context.Background(), postgres.Open(os.Getenv(childTargetEnv), postgres.Config{}),
		durable.Config{Policy: fastPolicy, Logger: logger, InstanceID: instance})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	defer q.Close()
	registerTypes(q)
	runs, err := os.OpenFile(os.Getenv(childLogEnv), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	defer runs.Close()
	var mu sync.Mutex // one line per write, whole
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, w *Work) (mediator.Void, error) {
		d, _ := durable.FromContext(ctx, w)
		time.Sleep(5 * time.Millisecond) // simulated work, so that items are running at the kill
		mu.Lock()
		defer mu.Unlock()
		_, err := fmt.Fprintf(runs, "%d %s %d\n", d.ItemID, d.Instance, d.Attempt)
		return mediator.Void{}, err
	})
	if err := m.Build(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	return serveChild(q, m, durable.SchedulerConfig{
		InstanceID: instance, Workers: failoverWorkers, PollInterval: failoverPoll, Lease: failoverLease, Logger: logger,
	})
}

// failoverChild is a running instance of the failover test.
type failoverChild struct {
	name, runs, stderr string // its instance id, its file of runs, its file of what it logged
	cmd                *exec.Cmd
	ready              chan struct{}
	exited             chan struct{}
}

func startFailoverChild(t *testing.T, dir, dsn, name string) *failoverChild {
	t.Helper()
	c := &failoverChild{name: name, runs: filepath.Join(dir, name+".runs"), stderr: filepath.Join(dir, name+".log"),
		ready: make(chan struct{}), exited: make(chan struct{})}
	errFile, err := os.Create(c.stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = errFile.Close() }()
	c.cmd = exec.Command(os.Args[0])
	c.cmd.Env = append(os.Environ(), childEnv+"=failover", childTargetEnv+"="+dsn, childLogEnv+"="+c.runs, failoverInstanceEnv+"="+name)
	c.cmd.Stderr = errFile
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.exited)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "READY") {
				close(c.ready)
			}
		}
		_ = c.cmd.Wait()
	}()
	t.Cleanup(func() {
		select {
		case <-c.exited:
		default:
			_ = c.cmd.Process.Kill()
			<-c.exited
		}
	})
	return c
}

// stop stops the instance gracefully and fails the test if it did not stop cleanly.
func (c *failoverChild) stop(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not stop within 30 s of SIGTERM", c.name)
	}
	if !c.cmd.ProcessState.Success() {
		t.Errorf("%s did not stop cleanly: %v; it logged:\n%s", c.name, c.cmd.ProcessState, tailOf(readFile(t, c.stderr), 10))
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}

// tailOf returns the last n lines of text.
func tailOf(text string, n int) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// sent is one enqueue of the failover test: its token (given, so that an error's is known
// too), when it returned, and what it returned.
type sent struct {
	token string
	n     int
	at    time.Duration // since the load began, when it returned
	id    record.ItemID // acknowledged: the item
	err   error
}

// TestFleetSurvivesFailover: three instances (OS processes) run schedulers on a primary with a
// synchronous standby, reached by a multi-host DSN with target_session_attrs=read-write, while
// the test enqueues at a steady rate (failoverRate a second, each with a token of its own).
// After a third of the load the primary is SIGKILLed, and the standby is promoted an outage
// later: 1.5 s, shorter than the lease (failoverLease), and 6 s, longer; the load goes on for
// the two thirds left. Then the queue must drain on the new primary and:
//
//   - no acknowledged enqueue is lost (synchronous commit: each is on the standby);
//   - every enqueue that failed with a definite error stored nothing, and every one whose
//     outcome was unknown (*OutcomeUnknownError) is resolved by enqueueing again with its
//     token: stored once either way;
//   - every item succeeded within failoverDrain; none is stuck;
//   - an item whose handler ran more than once has, for each extra run, an abandoned or
//     interrupted attempt (its lease ran out and was swept): at-least-once, recorded;
//   - the instances come back by themselves: the first completion on the new primary is
//     measured from the kill (and from the promotion).
//
// The figures are logged for docs/durable.md. SWITCHBOARD_FAILOVER_SECONDS lengthens the load
// (6 s by default).
func TestFleetSurvivesFailover(t *testing.T) {
	t.Parallel()
	loadFor := 6 * time.Second
	if v := os.Getenv(failoverSecondsEnv); v != "" {
		s, err := strconv.Atoi(v)
		if err != nil || s < 3 {
			t.Fatalf("%s=%q: want a whole number of seconds, 3 or more", failoverSecondsEnv, v)
		}
		loadFor = time.Duration(s) * time.Second
	}
	for _, outage := range []time.Duration{1500 * time.Millisecond, 6 * time.Second} {
		t.Run(fmt.Sprintf("outage=%v", outage), func(t *testing.T) {
			t.Parallel()
			runFailover(t, loadFor, outage)
		})
	}
}

// runFailover runs the failover test with loadFor of load, a third before the kill and two
// thirds after the promotion, outage between them.
func runFailover(t *testing.T, loadFor, outage time.Duration) {
	r := pgtest.StartReplicated(t)
	ctx := context.Background()
	q, err := durable.Open(ctx, postgres.Open(r.DSN, postgres.Config{MaxConns: 4}), durable.Config{Policy: fastPolicy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	registerTypes(q)

	dir := t.TempDir()
	var children []*failoverChild
	for i := range failoverInstances {
		name := fmt.Sprintf("failover-%d", i+1)
		children = append(children, startFailoverChild(t, dir, must[string](t)(pgtest.WithParam(r.DSN, "application_name", name)), name))
	}
	for _, c := range children {
		select {
		case <-c.ready:
		case <-c.exited:
			t.Fatalf("%s exited before it was ready:\n%s", c.name, readFile(t, c.stderr))
		case <-time.After(time.Minute):
			t.Fatalf("%s not ready within a minute", c.name)
		}
	}
	// The standby, read directly: what it has of the succeeded items, through the failover.
	standby, err := pgx.Connect(ctx, r.Standby.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = standby.Close(context.Background()) })
	succeeded := func() int {
		var n int
		if err := standby.QueryRow(ctx, "SELECT count(*) FROM switchboard_items_all WHERE state = 'succeeded'").Scan(&n); err != nil {
			t.Fatalf("counting the succeeded items on the standby: %v", err)
		}
		return n
	}

	// The load: failoverRate enqueues a second, each with its own deadline, from two
	// goroutines (one enqueue waiting on a dead connection does not stop the other).
	begun := time.Now()
	var (
		mu   sync.Mutex
		all  []sent
		wg   sync.WaitGroup
		stop = make(chan struct{})
	)
	stopLoad := sync.OnceFunc(func() { close(stop) })
	t.Cleanup(func() { stopLoad(); wg.Wait() }) // before the queue closes, on a failure too
	const senders = 2
	for g := range senders {
		wg.Go(func() {
			tick := time.NewTicker(time.Second * senders / failoverRate)
			defer tick.Stop()
			for k := 0; ; k++ {
				select {
				case <-tick.C:
				case <-stop:
					return
				}
				n := k*senders + g
				token := fmt.Sprintf("failover-%06d", n)
				ectx, cancel := context.WithTimeout(ctx, failoverEnqueue)
				e, err := q.Enqueue(ectx, &Work{N: n}, durable.WithToken(token))
				cancel()
				mu.Lock()
				all = append(all, sent{token: token, n: n, at: time.Since(begun), id: e.ID, err: err})
				mu.Unlock()
			}
		})
	}

	// A third of the way through, the primary dies; the standby is promoted an outage later.
	time.Sleep(loadFor / 3) // the load runs meanwhile: this is its schedule, not a wait for a state
	before := succeeded()
	r.Primary.Kill()
	killed := time.Since(begun)
	atKill := succeeded() // what the standby had of the old primary's completions
	t.Logf("primary killed at %.2f s; the standby had %d succeeded items (%d a moment before)", killed.Seconds(), atKill, before)
	time.Sleep(outage) // the outage an operator's (or a tool's) promotion takes
	r.Standby.Promote()
	promoted := time.Since(begun)
	loadEnd := time.AfterFunc(loadFor*2/3, stopLoad)
	defer loadEnd.Stop()
	t.Logf("standby promoted at %.2f s", promoted.Seconds())
	var firstCompletion time.Duration
	deadline := time.Now().Add(30 * time.Second)
	for succeeded() == atKill {
		if time.Now().After(deadline) {
			t.Fatalf("no item completed on the new primary within 30 s of its promotion")
		}
		time.Sleep(5 * time.Millisecond) // polling the new primary, within the deadline
	}
	firstCompletion = time.Since(begun)
	t.Logf("first completion on the new primary at %.2f s: %.2f s after the kill, %.2f s after the promotion",
		firstCompletion.Seconds(), (firstCompletion - killed).Seconds(), (firstCompletion - promoted).Seconds())
	wg.Wait()

	// The callers' view: acknowledged, definite errors, unknown outcomes.
	var acked, definite, unknown []sent
	var firstOK time.Duration // the first acknowledged enqueue after the kill
	var errExamples []string
	for _, s := range all {
		switch _, isUnknown := errors.AsType[*durable.OutcomeUnknownError](s.err); {
		case s.err == nil:
			acked = append(acked, s)
			if s.at > killed && (firstOK == 0 || s.at < firstOK) {
				firstOK = s.at
			}
		case isUnknown:
			unknown = append(unknown, s)
		default:
			definite = append(definite, s)
		}
		if s.err != nil && len(errExamples) < 4 {
			errExamples = append(errExamples, s.err.Error())
		}
	}
	loaded := time.Since(begun)
	t.Logf("%d enqueues over %.1f s: %d acknowledged, %d definite errors, %d unknown outcomes; the first acknowledged after the kill returned %.2f s after it; e.g.\n  %s",
		len(all), loaded.Seconds(), len(acked), len(definite), len(unknown), (firstOK - killed).Seconds(), strings.Join(errExamples, "\n  "))
	if len(definite)+len(unknown) == 0 {
		t.Errorf("no enqueue failed: the failover happened outside the load")
	}

	// Every unknown outcome resolved by its token: enqueued again, it is stored once.
	var unknownStored int
	for _, s := range unknown {
		e, err := q.Enqueue(ctx, &Work{N: s.n}, durable.WithToken(s.token))
		if err != nil {
			t.Fatalf("enqueueing again the unknown outcome of %s: %v", s.token, err)
		}
		if e.Duplicate {
			unknownStored++
		}
		s.id = e.ID
		acked = append(acked, s)
	}
	t.Logf("of the %d unknown outcomes, %d had been stored (enqueued again: Duplicate) and %d had not (stored now)", len(unknown), unknownStored, len(unknown)-unknownStored)
	// A definite error stored nothing.
	for _, s := range definite {
		if it, err := q.ItemByToken(ctx, s.token); err == nil {
			t.Errorf("enqueue %s failed with a definite error (%v) but item %d holds its token", s.token, s.err, it.ID)
		} else if !errors.Is(err, durable.ErrNotFound) {
			t.Fatal(err)
		}
	}

	// The queue drains on the new primary; nothing acknowledged is lost.
	drainEnd := time.Now().Add(failoverDrain)
	for {
		st, err := q.Stats(ctx)
		if err == nil && st.Counts[record.StatePending]+st.Counts[record.StateRunning] == 0 {
			break
		}
		if time.Now().After(drainEnd) {
			t.Errorf("the queue did not drain within %v: %+v (%v)", failoverDrain, st.Counts, err)
			break
		}
		time.Sleep(20 * time.Millisecond) // polling the queue's counts, within the deadline
	}
	drained := time.Since(begun)
	for _, c := range children {
		c.stop(t)
	}
	var lost, stuck []string
	for _, s := range acked {
		it, err := q.ItemByToken(ctx, s.token)
		switch {
		case errors.Is(err, durable.ErrNotFound):
			lost = append(lost, s.token)
		case err != nil:
			t.Fatal(err)
		case it.ID != s.id:
			t.Errorf("token %s: item %d on the new primary, %d acknowledged", s.token, it.ID, s.id)
		case it.State != record.StateSucceeded:
			stuck = append(stuck, fmt.Sprintf("%d (%s, %d attempts)", it.ID, it.State, it.Attempts))
		}
	}

	// Runs: from the instances' files, which do not fail over.
	runs := map[record.ItemID][]string{}
	for _, c := range children {
		for l := range strings.Lines(readFile(t, c.runs)) {
			f := strings.Fields(l)
			id, err := strconv.ParseInt(f[0], 10, 64)
			if len(f) != 3 || err != nil {
				t.Fatalf("%s: a malformed run %q", c.runs, l)
			}
			runs[record.ItemID(id)] = append(runs[record.ItemID(id)], f[1]+"#"+f[2])
		}
	}
	var neverRan, twice, unexplained, sweptItems int
	for _, s := range acked {
		n := len(runs[s.id])
		as := attempts(t, q, s.id)
		swept := 0
		for _, a := range as {
			if a.Outcome == record.OutcomeAbandoned || a.Outcome == record.OutcomeInterrupted {
				swept++
			}
		}
		if swept > 0 {
			sweptItems++
		}
		switch {
		case n == 0:
			neverRan++
		case n > 1:
			twice++
			if n-1 > swept {
				unexplained++
				t.Errorf("item %d ran %d times (%v) with %d abandoned or interrupted attempts: %s", s.id, n, runs[s.id], swept, outcomes(as))
			}
		}
	}
	// What the instances logged: each failed database call, by operation.
	ops := map[string]int{}
	var logged int
	for _, c := range children {
		for l := range strings.Lines(readFile(t, c.stderr)) {
			logged++
			op := "other"
			if _, rest, ok := strings.Cut(l, `"op":"`); ok {
				op, _, _ = strings.Cut(rest, `"`)
			}
			ops[op]++
		}
	}
	t.Logf("after the failover: %d items, %d lost, %d stuck, %d ran more than once (%d of them without an abandoned attempt), %d had an attempt swept after its lease, %d never reached a handler; drained at %.2f s",
		len(acked), len(lost), len(stuck), twice, unexplained, sweptItems, neverRan, drained.Seconds())
	t.Logf("the instances logged %d lines, by operation: %v", logged, ops)
	if len(lost) > 0 {
		t.Errorf("%d acknowledged enqueues are not on the new primary, e.g. %v", len(lost), lost[:min(5, len(lost))])
	}
	if len(stuck) > 0 {
		t.Errorf("%d items did not succeed, e.g. %v", len(stuck), stuck[:min(5, len(stuck))])
	}
	if neverRan > 0 {
		t.Errorf("%d succeeded items never reached a handler", neverRan)
	}
}
