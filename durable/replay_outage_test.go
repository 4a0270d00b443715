package durable_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"go.uber.org/zap/zaptest"

	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/durabletest"
	"github.com/switchboard-go/switchboard/durable/postgres"
	"github.com/switchboard-go/switchboard/durable/record"
)

// stopImmediate stops the server as a crash would: pg_ctl stop -m immediate, no checkpoint,
// every connection dropped.
func (s *hungServer) stopImmediate() error {
	if out, err := s.run(60*time.Second, "pg_ctl", "-D", s.data, "-m", "immediate", "-w", "-t", "30", "stop"); err != nil {
		return fmt.Errorf("pg_ctl stop -m immediate: %v\n%s", err, out)
	}
	return nil
}

// restart starts the server again on its data directory and port, after stopImmediate.
func (s *hungServer) restart() error {
	if out, err := s.run(60*time.Second, "pg_ctl", "-D", s.data, "-l", filepath.Join(s.dir, "server.log"), "-w", "-t", "30", "start"); err != nil {
		return fmt.Errorf("pg_ctl start: %v\n%s", err, out)
	}
	pidFile, err := os.ReadFile(filepath.Join(s.data, "postmaster.pid"))
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(pidFile), "\n", 2)[0]))
	if err != nil {
		return fmt.Errorf("postmaster.pid: %v", err)
	}
	s.mu.Lock()
	s.pid = pid
	s.mu.Unlock()
	return nil
}

// watchConnector tells failed when a new connection cannot be made.
type watchConnector struct {
	driver.Connector
	failed func(error)
}

func (c *watchConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		c.failed(err)
	}
	return conn, err
}

// TestReplayManySurvivesPostgresRestart: a ReplayMany of 100 dead letters meets a PostgreSQL
// server stopped with pg_ctl stop -m immediate as the 50th handler runs, and started again on
// the same data directory and port once the queue's first connection attempt is refused. The
// handler of that letter succeeded; the write of its outcome met the stopped server. A replay's
// outcome must not be lost: afterwards no letter's status disagrees with what its handler did,
// and no handler has run twice, including after the letters still failed were replayed again
// once every lease could have run out. Every handler sees its letter's item id (and the letter
// and the replay) through durable.FromContext.
func TestReplayManySurvivesPostgresRestart(t *testing.T) {
	hungLeakCheck(t)
	ctx := context.Background()
	const n, stopAt = 100, 50
	o := newReplayOutage(t, n, 30*time.Second)
	srv, q, clock, itemOf, letterOf, ids := o.srv, o.q, o.clock, o.itemOf, o.letterOf, o.ids

	// The restart: armed when the server is stopped, started by the first connection refused
	// after that, in a goroutine of its own (the refused connection is the queue's, which must
	// not wait for it).
	var (
		armed       atomic.Bool
		restartOnce sync.Once
		restarted   = make(chan error, 1)
	)
	o.onRefused(func() {
		if armed.Load() {
			restartOnce.Do(func() { go func() { restarted <- srv.restart() }() })
		}
	})

	// The replay handler counts its successes per item and checks what FromContext says.
	var (
		mu        sync.Mutex
		runs      int
		succeeded = map[record.ItemID]int{}
		replays   = map[string]bool{}
		problems  []string
	)
	replayer := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
		id := itemOf[w.N]
		d, ok := durable.FromContext(ctx, w)
		mu.Lock()
		runs++
		run := runs
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("item %d: FromContext reports no dispatch during a replay", id))
		case d.ItemID != id || d.DeadLetter != letterOf[id] || d.Name != "test.work" || d.Replay == "" || replays[d.Replay]:
			problems = append(problems, fmt.Sprintf("item %d (letter %d): FromContext = %+v", id, letterOf[id], d))
		}
		replays[d.Replay] = true
		succeeded[id]++
		mu.Unlock()
		if run == stopAt {
			if err := srv.stopImmediate(); err != nil {
				mu.Lock()
				problems = append(problems, err.Error())
				mu.Unlock()
				return nil
			}
			armed.Store(true)
			t.Logf("server stopped as handler %d (item %d, letter %d) returns", run, id, letterOf[id])
		}
		return nil
	}})

	// check compares every letter's status with what its handler did.
	check := func(pass string) (failed []record.DeadLetterID) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		var disagree, twice []string
		for _, id := range itemOf {
			d, tl, err := q.DeadLetter(ctx, letterOf[id])
			if err != nil {
				t.Fatal(err)
			}
			ran := succeeded[id]
			if (ran > 0) != (d.Status == record.DeadLetterReplayed) {
				disagree = append(disagree, fmt.Sprintf("letter %d: status %s, handler succeeded %d times, timeline %s", d.ID, d.Status, ran, timeline(tl)))
			}
			if ran > 1 {
				twice = append(twice, fmt.Sprintf("letter %d: handler succeeded %d times, timeline %s", d.ID, ran, timeline(tl)))
			}
			if d.Status == record.DeadLetterFailed {
				failed = append(failed, d.ID)
			}
		}
		if len(disagree) > 0 {
			t.Errorf("%s: %d letters whose status disagrees with their handler:\n%s", pass, len(disagree), strings.Join(disagree, "\n"))
		}
		if len(twice) > 0 {
			t.Errorf("%s: %d handlers ran twice:\n%s", pass, len(twice), strings.Join(twice, "\n"))
		}
		return failed
	}
	summary := func(res []durable.BulkResult) string {
		counts := map[durable.Resolution]int{}
		for _, r := range res {
			counts[r.Resolution]++
		}
		return fmt.Sprint(counts)
	}

	res, err := q.ReplayMany(ctx, replayer, ids, "ops")
	if err != nil {
		t.Fatalf("ReplayMany: %v", err)
	}
	t.Logf("first ReplayMany: %s", summary(res))
	if !armed.Load() {
		t.Fatalf("the server was never stopped (%d handlers ran)", runs)
	}
	select {
	case err := <-restarted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("the server was not restarted: no connection was refused after it stopped")
	}
	still := check("after the first ReplayMany")

	// Every lease a replay left behind can run out now; the letters still failed are replayed
	// again, as an operator would.
	clock.Advance(2 * o.lease)
	res, err = q.ReplayMany(ctx, replayer, still, "ops")
	if err != nil {
		t.Fatalf("second ReplayMany: %v", err)
	}
	t.Logf("second ReplayMany of %d letters: %s", len(still), summary(res))
	if left := check("after the second ReplayMany"); len(left) != 0 {
		t.Errorf("%d letters still failed after the second ReplayMany", len(left))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Errorf("%d problems in the handlers:\n%s", len(problems), strings.Join(problems, "\n"))
	}
}

// replayOutage is a queue on a throwaway PostgreSQL server of the test's own, with n dead
// letters, one per item (Work{N: i}).
type replayOutage struct {
	srv      *hungServer
	q        *durable.Queue
	clock    *fakeClock
	lease    time.Duration
	itemOf   map[int]record.ItemID
	letterOf map[record.ItemID]record.DeadLetterID
	ids      []record.DeadLetterID
	refused  atomic.Pointer[func()]
}

func newReplayOutage(t *testing.T, n int, lease time.Duration) *replayOutage {
	t.Helper()
	ctx := context.Background()
	o := &replayOutage{srv: startHungServer(t), clock: newFakeClock(), lease: lease}
	pcfg, err := pgx.ParseConfig(o.srv.dsn)
	if err != nil {
		t.Fatal(err)
	}
	// The throwaway server trades durability for speed (synchronous_commit off); a crash would
	// then lose commits it had acknowledged, which no client can make up for.
	pcfg.RuntimeParams["synchronous_commit"] = "on"
	db := sql.OpenDB(&watchConnector{Connector: stdlib.GetConnector(*pcfg), failed: func(error) {
		if f := o.refused.Load(); f != nil {
			(*f)()
		}
	}})
	t.Cleanup(func() { _ = db.Close() })
	o.q = openQueue(t, postgres.New(db, postgres.Config{}), durable.Config{Clock: o.clock, ReplayLease: lease,
		Policy: retry.Policy{MaxAttempts: 1}, Logger: zaptest.NewLogger(t)})
	o.itemOf = make(map[int]record.ItemID, n)
	for i := range n {
		o.itemOf[i] = must[durable.Enqueued](t)(o.q.Enqueue(ctx, &Work{N: i})).ID
	}
	failing := mediatorFor(t, handlers{work: func(context.Context, *Work) error { return errPermanent }})
	if res := durabletest.Work(ctx, t, o.q, failing); res.Dead != n {
		t.Fatalf("making dead letters: %+v", res)
	}
	lp, err := o.q.DeadLetters(ctx, durable.DeadLetterFilter{Limit: n})
	letters, total := lp.Letters, lp.Total
	if err != nil || total != n {
		t.Fatalf("dead letters: %d, %v", total, err)
	}
	o.letterOf = make(map[record.ItemID]record.DeadLetterID, n)
	for _, d := range letters {
		o.letterOf[d.ItemID] = d.ID
		o.ids = append(o.ids, d.ID)
	}
	return o
}

// onRefused makes f run whenever the queue's pool cannot connect.
func (o *replayOutage) onRefused(f func()) { o.refused.Store(&f) }

// TestReplayOutcomeUnknownWhenLeaseIsGone: the server stops as a replay's handler returns and
// stays down longer than the replay's lease. Replay keeps trying to record the success while
// the lease may be its own, then gives up saying the outcome is unknown, not that the replay
// failed; once the server is back and the lease has run out, the timeline says the same
// (abandoned, outcome unknown) and the next replay's handler sees the same item id, so it can
// tell the repeat.
func TestReplayOutcomeUnknownWhenLeaseIsGone(t *testing.T) {
	hungLeakCheck(t)
	ctx := context.Background()
	o := newReplayOutage(t, 1, 300*time.Millisecond)
	id := o.ids[0]
	var (
		mu   sync.Mutex
		seen []durable.Dispatch
		stop = true
	)
	m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
		d, _ := durable.FromContext(ctx, w)
		mu.Lock()
		seen = append(seen, d)
		first := stop
		stop = false
		mu.Unlock()
		if first {
			return o.srv.stopImmediate()
		}
		return nil
	}})
	res, err := o.q.Replay(ctx, m, id, "ops")
	if res != "" || err == nil || !strings.Contains(err.Error(), "handler succeeded") || !strings.Contains(err.Error(), "outcome is unknown") || !errors.Is(err, durable.ErrOutcomeUnknown) {
		t.Errorf("Replay with the database gone for longer than the lease = %q, %v; want no resolution and an error saying the success was not recorded", res, err)
	}
	if err := o.srv.restart(); err != nil {
		t.Fatal(err)
	}
	o.clock.Advance(2 * o.lease)
	d, tl := must2[record.DeadLetter, []record.TimelineEntry](t)(o.q.DeadLetter(ctx, id))
	if d.Status != record.DeadLetterFailed || d.RetryCount != 0 || timeline(tl) != "attempt:failed(permanent failure)" {
		t.Errorf("after the lost outcome: %s, retries %d, timeline %s; want it failed, with no replay recorded as failed", d.Status, d.RetryCount, timeline(tl))
	}
	if res, err := o.q.Replay(ctx, m, id, "ops"); res != durable.Replayed || err != nil {
		t.Fatalf("second Replay = %q, %v", res, err)
	}
	d, tl = must2[record.DeadLetter, []record.TimelineEntry](t)(o.q.DeadLetter(ctx, id))
	if len(tl) != 3 || tl[1].Outcome != "abandoned" || !strings.HasPrefix(tl[1].Error, "outcome unknown") || tl[2].Outcome != "succeeded" ||
		d.Status != record.DeadLetterReplayed {
		t.Errorf("after the second replay: %s, timeline %s; want the first replay abandoned, outcome unknown, then replayed", d.Status, timeline(tl))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0].ItemID != o.itemOf[0] || seen[1].ItemID != seen[0].ItemID || seen[0].DeadLetter != id ||
		seen[0].Replay == "" || seen[1].Replay == seen[0].Replay {
		t.Errorf("FromContext in the two replays: %+v; want the same item and letter, two replay ids", seen)
	}
}

func must2[A, B any](t testing.TB) func(A, B, error) (A, B) {
	return func(a A, b B, err error) (A, B) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a, b
	}
}

// TestReplayCommitAnswerLost: the commit of a replay's outcome reaches the server, which
// commits it, and its answer is lost with its connection. The retry finds the lease cleared,
// sees its own event in the timeline, and reports the replay as replayed: not a conflict, not
// a second event.
func TestReplayCommitAnswerLost(t *testing.T) {
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	pg, q := hungSetup(t, dsn)
	t.Cleanup(pg.proxy.Thaw)
	direct, err := sql.Open("pgx", pg.direct)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = direct.Close() })
	ctx := context.Background()
	must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: 1}))
	if res := durabletest.Work(ctx, t, q, mediatorFor(t, handlers{work: func(context.Context, *Work) error { return errPermanent }})); res.Dead != 1 {
		t.Fatalf("making the dead letter: %+v", res)
	}
	lp, err := q.DeadLetters(ctx, durable.DeadLetterFilter{})
	letters := lp.Letters
	if err != nil || len(letters) != 1 {
		t.Fatalf("dead letters: %v, %v", letters, err)
	}
	id := letters[0].ID

	// Armed as the handler runs, after the lease's own commit: the next commit is the outcome's.
	armed := make(chan *hungTrigger, 1)
	m := mediatorFor(t, handlers{work: func(context.Context, *Work) error {
		armed <- pg.proxy.FreezeOnSend([]byte("commit"), hungToClient)
		return nil
	}})
	type result struct {
		res durable.Resolution
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := q.Replay(ctx, m, id, "ops")
		done <- result{res, err}
	}()
	trig := <-armed
	select {
	case <-trig.fired:
	case r := <-done:
		t.Fatalf("Replay returned %q, %v before its outcome's commit went out", r.res, r.err)
	}
	eventually(t, 10*time.Second, "the outcome's commit to land", func() bool {
		var status string
		if err := direct.QueryRow("SELECT status FROM switchboard_dead_letters WHERE id = $1", int64(id)).Scan(&status); err != nil {
			t.Fatal(err)
		}
		return status == string(record.DeadLetterReplayed)
	})
	trig.conn.kill() // the commit's answer is lost with its connection
	pg.proxy.Thaw()
	r := <-done
	if r.res != durable.Replayed || r.err != nil {
		t.Errorf("Replay whose commit's answer was lost = %q, %v; want replayed", r.res, r.err)
	}
	d, tl := must2[record.DeadLetter, []record.TimelineEntry](t)(q.DeadLetter(ctx, id))
	if d.Status != record.DeadLetterReplayed || d.RetryCount != 1 || timeline(tl) != "attempt:failed(permanent failure) replay:succeeded/ops" {
		t.Errorf("letter %s, retries %d, timeline %s; want one replay, replayed", d.Status, d.RetryCount, timeline(tl))
	}
	pg.drain(t, q)
}
