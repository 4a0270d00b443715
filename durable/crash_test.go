package durable_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

// The crash test: real OS processes, one item whose handler kills its process.
const (
	crashItems       = 100             // Work items enqueued, N = 1…crashItems
	crashPoison      = 13              // Work.N of the item whose handler kills its process
	crashMaxAttempts = 3               // the policy's MaxAttempts in the children
	crashLease       = 2 * time.Second // the children's lease: a crashed child's items are swept after it
	crashMaxRuns     = 20              // children started at most before the test gives up
	crashRunBound    = time.Minute     // how long one child may take to crash or to clean the queue
)

// TestCrashPoisonItemIsTheOnlyDeadLetter enqueues 100 items, one of which (N = 13) crashes
// its process (SIGKILL) whenever its handler runs, and starts child processes running a
// scheduler on the queue, one after the other, each one as soon as the last one died, until
// no item is pending or running. With Workers = 1 and 2, on SQLite and PostgreSQL:
//
//   - every child but the last dies of the poison, and the last stops cleanly;
//   - the poison is the only dead letter, one attempt per crash, every row "abandoned",
//     numbered in crash order. With Workers = 1 every claim runs alone, so every crash counts:
//     MaxAttempts attempts. With Workers = 2 the first crash happened beside another item and
//     counts as Unattributed, then MaxAttempts crashes under isolated claims count: MaxAttempts
//   - 1 attempts. The claim after the last one finds the attempts exhausted and dead-letters
//     it without an attempt;
//   - every other item succeeded, none is lost or stuck;
//   - with Workers = 1 every other item has exactly one attempt, "1:succeeded", and its
//     handler ran once;
//   - with Workers = 2 at most Workers − 1 = 1 other item has more than one attempt: it ran
//     beside the poison when the first child crashed, and its rows are exactly
//     "1:abandoned 2:succeeded" with the abandoned row naming the first crashed instance.
//     Every later crash happens while the poison runs alone and charges nobody else.
func TestCrashPoisonItemIsTheOnlyDeadLetter(t *testing.T) {
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			t.Parallel()
			eachBackend(t, func(t *testing.T, b backend) { crashTest(t, b, workers) })
		})
	}
}

// crashTest runs the crash test on one backend with workers workers per child.
func crashTest(t *testing.T, b backend, workers int) {
	begin := time.Now()
	ctx := context.Background()
	q := b.queue(t, durable.Config{Policy: fastPolicy})
	ids := make([]record.ItemID, crashItems)
	for i := range ids {
		ids[i] = must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: i + 1})).ID
	}
	poison := ids[crashPoison-1]
	logPath := t.TempDir() + "/handled.log"
	reported := false
	t.Cleanup(func() {
		// Runs after the children's cleanups have killed them: what a failure left behind.
		if !reported {
			r := summarise(t, q, ids, poison, logPath)
			t.Logf("%s workers=%d: state at the failure: %s; %s", b.name, workers, r, r.details())
		}
	})
	childEnv := []string{
		childLeaseEnv + "=" + crashLease.String(),
		childLogEnv + "=" + logPath,
		childPoisonEnv + "=" + strconv.Itoa(crashPoison),
		childWorkersEnv + "=" + strconv.Itoa(workers),
		childMaxAttemptsEnv + "=" + strconv.Itoa(crashMaxAttempts),
	}

	// Restart until clean.
	var crashes []poisonLine // one per child that died, in order
	runs := 0
	for {
		runs++
		if runs > crashMaxRuns {
			t.Fatalf("the queue is not clean after %d children", crashMaxRuns)
		}
		c := startPoisonChild(t, b, childEnv...)
		var clean bool
		eventually(t, crashRunBound, "the child to crash or the queue to be clean", func() bool {
			if c.exited() {
				return true
			}
			st := stats(t, q)
			clean = st.Counts[record.StatePending]+st.Counts[record.StateRunning] == 0
			return clean
		})
		if !clean {
			// It died: of the poison, and of nothing else.
			c.wait()
			ws, _ := c.state.Sys().(syscall.WaitStatus)
			if !ws.Signaled() || ws.Signal() != syscall.SIGKILL || c.poison == nil {
				t.Fatalf("child %d ended with %v (%v), not killed by the poison (printed %v)", runs, c.err, c.state, c.poison)
			}
			crashes = append(crashes, *c.poison)
			continue
		}
		if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		c.wait()
		if c.err != nil || c.poison != nil {
			t.Fatalf("last child did not stop cleanly: %v (poison line %v)", c.err, c.poison)
		}
		break
	}
	r := summarise(t, q, ids, poison, logPath)
	reported = true
	t.Logf("%s workers=%d: %d children (%d crashed) in %v: %s; %s", b.name, workers, runs, len(crashes),
		time.Since(begin).Round(time.Millisecond), r, r.details())

	// Counts first, so that a failure (on the old scheduler, for one) says what happened.
	if r.lost != 0 || r.stuck != 0 || len(r.dead) != 1 || r.dead[0] != poison || r.succeeded != crashItems-1 {
		t.Errorf("want exactly 1 dead item (the poison, item %d) and %d succeeded, none lost or stuck; got %s",
			poison, crashItems-1, r)
	}

	// The poison: one attempt per crash, each abandoned, numbered in crash order; MaxAttempts of
	// them counted, plus (with two workers) the first, made beside another item, which is
	// Unattributed.
	unattributed := 0
	if workers > 1 {
		unattributed = 1
	}
	pit := item(t, q, poison)
	prows := attempts(t, q, poison)
	if pit.State != record.StateDead || pit.Attempts != crashMaxAttempts+unattributed || pit.Unattributed != unattributed ||
		pit.Interruptions != 0 || pit.Counted() != crashMaxAttempts ||
		!strings.HasPrefix(pit.LastError, fmt.Sprintf("attempts exhausted (%d)", crashMaxAttempts)) {
		t.Errorf("poison item %d: state %s, attempts %d, unattributed %d, interruptions %d, counted %d, last error %q; want dead, %d attempts, %d unattributed, %d counted, attempts exhausted",
			poison, pit.State, pit.Attempts, pit.Unattributed, pit.Interruptions, pit.Counted(), pit.LastError,
			crashMaxAttempts+unattributed, unattributed, crashMaxAttempts)
	}
	// Its letter says its attempts were spent: abandoned ones count.
	lp, err := q.DeadLetters(context.Background(), durable.DeadLetterFilter{})
	letters := lp.Letters
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range letters {
		if l.ItemID == poison && l.Cause != record.DeadAttemptsSpent {
			t.Errorf("poison item %d's letter: cause %q, want %q", poison, l.Cause, record.DeadAttemptsSpent)
		}
	}
	if ran := r.handled[poison]; len(ran) != 0 {
		t.Errorf("poison item %d: handler completed at attempts %v", poison, ran)
	}
	var want []string
	for i := range crashMaxAttempts + unattributed {
		want = append(want, fmt.Sprintf("%d:abandoned", i+1))
	}
	if len(prows) != len(crashes) || outcomes(prows) != strings.Join(want, " ") {
		t.Errorf("poison item %d: rows %q for %d crashes, want %q", poison, outcomes(prows), len(crashes), strings.Join(want, " "))
	}
	for i, cr := range crashes {
		if cr.item != poison || cr.attempt != i+1 || i >= len(prows) || prows[i].Instance != cr.instance {
			t.Errorf("crash %d: poison line %+v, poison rows %s", i+1, cr, outcomes(prows))
		}
	}

	// Every other item: succeeded; with one worker at its first attempt, with more at most
	// Workers − 1 of them run again, each abandoned once, by the first crash.
	var firstCrash string
	if len(crashes) > 0 {
		firstCrash = crashes[0].instance
	}
	var wrong []string
	for _, id := range ids {
		if id == poison {
			continue
		}
		it := item(t, q, id)
		rows := attempts(t, q, id)
		switch {
		case it.State != record.StateSucceeded:
			wrong = append(wrong, fmt.Sprintf("item %d is %s: rows %s, last error %q", id, it.State, outcomes(rows), it.LastError))
		case len(rows) == 1 && outcomes(rows) == "1:succeeded":
		case workers > 1 && len(rows) == 2 && outcomes(rows) == "1:abandoned 2:succeeded" && rows[0].Instance == firstCrash:
		default:
			wrong = append(wrong, fmt.Sprintf("item %d: rows %s (instances %v), first crash %s", id, outcomes(rows), instances(rows), firstCrash))
		}
		if ran := r.handled[id]; !slices.Contains(ran, it.Attempts) || len(ran) > len(rows) {
			wrong = append(wrong, fmt.Sprintf("item %d: handler completed at attempts %v, rows %s", id, ran, outcomes(rows)))
		}
	}
	if len(wrong) > 0 {
		t.Errorf("%d problems with innocent items, the first ones:\n\t%s", len(wrong), strings.Join(wrong[:min(len(wrong), 5)], "\n\t"))
	}
	if workers == 1 && (r.runTwice != 0 || r.handledTwice != 0) {
		t.Errorf("one worker: %d innocent items were attempted twice, %d ran their handler twice", r.runTwice, r.handledTwice)
	}
	if r.runTwice > workers-1 {
		t.Errorf("%d innocent items were attempted more than once, want at most %d", r.runTwice, workers-1)
	}
}

// crashReport counts the outcome of a crash test.
type crashReport struct {
	succeeded    int
	dead         []record.ItemID
	lost         int // enqueued, neither succeeded nor dead (missing, pending or running)
	stuck        int // pending or running
	runTwice     int // items other than the poison with more than one attempt
	handledTwice int // items other than the poison whose handler completed more than once
	handled      map[record.ItemID][]int
	other        []string // the items that are neither succeeded at their first attempt nor the dead poison
}

func (r crashReport) String() string {
	dead := fmt.Sprint(r.dead)
	if len(r.dead) > 10 {
		dead = fmt.Sprint(r.dead[:10]) + "…"
	}
	return fmt.Sprintf("dead=%d %s succeeded=%d lost=%d runTwice=%d handledTwice=%d stuck=%d",
		len(r.dead), dead, r.succeeded, r.lost, r.runTwice, r.handledTwice, r.stuck)
}

// details lists the first items that did not simply succeed at their first attempt.
func (r crashReport) details() string {
	other := r.other
	if len(other) > 10 {
		other = append(other[:10:10], "…")
	}
	return strings.Join(other, "; ")
}

func summarise(t *testing.T, q *durable.Queue, ids []record.ItemID, poison record.ItemID, logPath string) crashReport {
	t.Helper()
	r := crashReport{handled: readHandled(t, logPath)}
	for _, id := range ids {
		it, err := q.Item(context.Background(), id)
		if err != nil {
			r.lost++
			r.other = append(r.other, fmt.Sprintf("item %d: %v", id, err))
			continue
		}
		rows := attempts(t, q, id)
		switch it.State {
		case record.StateSucceeded:
			r.succeeded++
		case record.StateDead:
			r.dead = append(r.dead, id)
		case record.StatePending, record.StateRunning:
			r.stuck++
		}
		if it.State != record.StateSucceeded && it.State != record.StateDead {
			r.lost++
		}
		if id != poison && len(rows) > 1 {
			r.runTwice++
		}
		if id != poison && len(r.handled[id]) > 1 {
			r.handledTwice++
		}
		if (id == poison && it.State != record.StateDead) || (id != poison && outcomes(rows) != "1:succeeded") {
			r.other = append(r.other, fmt.Sprintf("item %d %s rows %q", id, it.State, outcomes(rows)))
		}
	}
	return r
}

// readHandled reads the children's log: the attempts at which each item's handler completed.
func readHandled(t *testing.T, path string) map[record.ItemID][]int {
	t.Helper()
	out := map[record.ItemID][]int{}
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return out
	}
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.Lines(string(data)) {
		f := strings.Fields(l)
		if len(f) != 2 {
			t.Fatalf("log line %q", l)
		}
		id, err1 := strconv.ParseInt(f[0], 10, 64)
		n, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil {
			t.Fatalf("log line %q", l)
		}
		out[record.ItemID(id)] = append(out[record.ItemID(id)], n)
	}
	return out
}

func instances(as []record.Attempt) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.Instance
	}
	return out
}

// poisonLine is what a child prints just before the poison kills it.
type poisonLine struct {
	item     record.ItemID
	instance string
	attempt  int
}

// poisonChild is a child in mode poison, watched until it exits.
type poisonChild struct {
	*child
	done chan struct{} // closed once the child has exited and been waited for

	// Set before done is closed.
	poison *poisonLine
	err    error
	state  *os.ProcessState
}

// startPoisonChild starts a child in mode poison. A goroutine reads its output to the end and
// then waits for the process, so the test can wait on its exit.
func startPoisonChild(t *testing.T, b backend, env ...string) *poisonChild {
	t.Helper()
	c := &poisonChild{child: startChild(t, b, "poison", env...), done: make(chan struct{})}
	var bad []string // read once done is closed
	go func() {
		defer close(c.done)
		for l := range c.lines {
			f := strings.Fields(l)
			if len(f) == 0 || f[0] != "POISON" {
				continue
			}
			if len(f) != 4 {
				bad = append(bad, l)
				continue
			}
			id, err1 := strconv.ParseInt(f[1], 10, 64)
			n, err2 := strconv.Atoi(f[3])
			if err1 != nil || err2 != nil {
				bad = append(bad, l)
				continue
			}
			c.poison = &poisonLine{item: record.ItemID(id), instance: f[2], attempt: n}
		}
		c.err = c.cmd.Wait()
		c.state = c.cmd.ProcessState
	}()
	// Registered after startChild's cleanup, so it runs first: the process is killed and waited
	// for here, and startChild's cleanup finds it finished.
	t.Cleanup(func() {
		if !c.exited() {
			_ = c.cmd.Process.Kill()
		}
		<-c.done
		if len(bad) > 0 {
			t.Errorf("child printed malformed lines: %q", bad)
		}
	})
	return c
}

func (c *poisonChild) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *poisonChild) wait() { <-c.done }
