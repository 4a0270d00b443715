package durable_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

// countItems counts the rows of the items and attempts tables, by the item's state.
func countItems(t testing.TB, q *durable.Queue, state record.ItemState) (items, attempts int) {
	t.Helper()
	db := durable.StoreOf(q).DB()
	var p string
	if durable.StoreOf(q).Engine().String() == "postgres" {
		p = "$1"
	} else {
		p = "?"
	}
	if err := db.QueryRow("SELECT COUNT(*) FROM switchboard_items_all WHERE state = "+p, string(state)).Scan(&items); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("SELECT COUNT(*) FROM switchboard_attempts a JOIN switchboard_items_all i ON i.id = a.item_id WHERE i.state = "+p,
		string(state)).Scan(&attempts); err != nil {
		t.Fatal(err)
	}
	return items, attempts
}

// enqueueMany enqueues n items in one transaction of the application.
func enqueueMany(t testing.TB, q *durable.Queue, n int, opts ...durable.EnqueueOption) {
	t.Helper()
	ctx := context.Background()
	tx, err := durable.StoreOf(q).DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := q.EnqueueTx(ctx, tx, &Work{N: i}, opts...); err != nil {
			_ = tx.Rollback()
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// With a short retention, 5,000 items run over four rounds keep the table bounded: each round's
// succeeded items are pruned (in batches, over several passes) once they are older than the
// retention, while a dead item, a pending item and a running item, and their attempt rows, stay.
// The successes have rows of their own (Config.SuccessAttemptRows), which are pruned with them.
func TestRetentionKeepsTableBounded(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		durable.SetPruneInterval(t, 10*time.Millisecond)
		clock := newFakeClock()
		q := b.queue(t, durable.Config{Policy: fastPolicy, Clock: clock, Rand: func() float64 { return 0.5 }, SuccessAttemptRows: true})
		e := &env{store: durable.StoreOf(q), q: q, clock: clock}
		ctx := context.Background()
		release := make(chan struct{})
		var once sync.Once
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			switch w.N {
			case -1:
				return errPermanent
			case -2:
				<-release
			}
			return nil
		}})
		dead := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: -1})).ID
		running := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: -2})).ID
		pending := must[durable.Enqueued](t)(e.q.Enqueue(ctx, &Work{N: -3}, durable.WithDelay(1000*time.Hour))).ID
		rec := &logRecorder{}
		// A lease far longer than the clock moves, so the running item stays running.
		start(t, e.q, m, durable.SchedulerConfig{Workers: 8, BatchSize: 500, Retention: time.Hour, Lease: 1000 * time.Hour,
			Logger: rec.logger()})
		// Registered after start, so it runs before the scheduler's shutdown (cleanups run last
		// first), even when the test fails early.
		t.Cleanup(func() { once.Do(func() { close(release) }) })
		waitState(t, e.q, dead, record.StateDead)
		waitState(t, e.q, running, record.StateRunning)

		const rounds, perRound = 4, 1250
		for r := range rounds {
			enqueueMany(t, e.q, perRound)
			eventually(t, 60*time.Second, "the round's items to succeed", func() bool {
				n, _ := countItems(t, e.q, record.StateSucceeded)
				return n == perRound
			})
			if n, a := countItems(t, e.q, record.StateSucceeded); n != perRound || a != perRound {
				t.Fatalf("round %d: %d succeeded items with %d attempt rows before pruning: the table is not bounded", r, n, a)
			}
			e.clock.Advance(2 * time.Hour)
			eventually(t, 60*time.Second, "the round's items to be pruned", func() bool {
				n, _ := countItems(t, e.q, record.StateSucceeded)
				return n == 0
			})
			if n, a := countItems(t, e.q, record.StateSucceeded); n != 0 || a != 0 {
				t.Fatalf("round %d: %d succeeded items, %d attempt rows left", r, n, a)
			}
		}
		// A pass logs once its last batch is back: after the test has seen the items gone.
		eventually(t, 60*time.Second, "a logged prune pass per round", func() bool {
			return rec.count(0, -1, "durable: pruned succeeded items") >= rounds
		})
		for id, want := range map[record.ItemID]record.ItemState{dead: record.StateDead, running: record.StateRunning,
			pending: record.StatePending} {
			if it := item(t, e.q, id); it.State != want {
				t.Fatalf("item %d is %s, want %s", id, it.State, want)
			}
		}
		if as := attempts(t, e.q, dead); len(as) != 1 {
			t.Fatalf("dead item's attempts: %v", outcomes(as))
		}
		if rec.has("durable: database call failed") {
			t.Fatal("a database call failed")
		}
		once.Do(func() { close(release) })
	})
}

// A negative retention keeps succeeded items forever; the default keeps them 24 hours.
func TestRetentionNegativeAndDefault(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		durable.SetPruneInterval(t, time.Hour) // only the pass at start, and the ones the test runs
		e := newEnv(t, b)
		m := mediatorFor(t, handlers{})
		enqueueMany(t, e.q, 30)
		forever := start(t, e.q, m, durable.SchedulerConfig{Retention: -1})
		eventually(t, 20*time.Second, "the items to succeed", func() bool {
			n, _ := countItems(t, e.q, record.StateSucceeded)
			return n == 30
		})
		e.clock.Advance(100000 * time.Hour)
		if n := forever.Prune(); n != 0 {
			t.Fatalf("Retention -1 pruned %d items", n)
		}

		q2 := b.queue(t, durable.Config{Clock: e.clock})
		byDefault := must[*durable.Scheduler](t)(durable.NewScheduler(q2, m))
		e.clock.Advance(-100000 * time.Hour)
		e.clock.Advance(23 * time.Hour)
		if n := byDefault.Prune(); n != 0 {
			t.Fatalf("the default retention pruned %d items 23 h after their success", n)
		}
		e.clock.Advance(2 * time.Hour)
		if n := byDefault.Prune(); n != 30 {
			t.Fatalf("the default retention pruned %d items 25 h after their success, want 30", n)
		}
	})
}

// Two schedulers sharing a PostgreSQL database never prune at once: every prune statement
// (slowed by a trigger that sleeps, so that two passes without the lock would overlap) runs
// while no other one does.
func TestRetentionOnePrunerAtATime(t *testing.T) {
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	b := postgresBackend(t, dsn)
	e := newEnv(t, b)
	q2 := b.queue(t, durable.Config{Clock: e.clock})
	m := mediatorFor(t, handlers{})
	enqueueMany(t, e.q, 5000)
	durable.SetPruneInterval(t, time.Hour) // this scheduler prunes only at start, before the items are old
	start(t, e.q, m, durable.SchedulerConfig{Workers: 16, BatchSize: 500})
	eventually(t, 60*time.Second, "every item to succeed", func() bool { return countRemaining(t, e.q) == 5000 })
	db := durable.StoreOf(e.q).DB()
	for _, stmt := range []string{
		`CREATE TABLE prune_log (pid INT, phase TEXT, at TIMESTAMPTZ)`,
		`CREATE FUNCTION prune_log_start() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO prune_log VALUES (pg_backend_pid(), 'start', clock_timestamp()); PERFORM pg_sleep(0.02); RETURN NULL; END $$`,
		`CREATE FUNCTION prune_log_end() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO prune_log VALUES (pg_backend_pid(), 'end', clock_timestamp()); RETURN NULL; END $$`,
		`CREATE TRIGGER prune_log_start BEFORE DELETE ON switchboard_items FOR EACH STATEMENT EXECUTE FUNCTION prune_log_start()`,
		`CREATE TRIGGER prune_log_end AFTER DELETE ON switchboard_items FOR EACH STATEMENT EXECUTE FUNCTION prune_log_end()`,
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(48 * time.Hour)
	schedulers := []*durable.Scheduler{
		must[*durable.Scheduler](t)(durable.NewScheduler(e.q, m, durable.SchedulerConfig{InstanceID: "a"})),
		must[*durable.Scheduler](t)(durable.NewScheduler(q2, m, durable.SchedulerConfig{InstanceID: "b"})),
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for _, s := range schedulers {
		wg.Go(func() {
			for {
				n := s.Prune()
				mu.Lock()
				total += n
				done := countRemaining(t, q2) == 0
				mu.Unlock()
				if done {
					return
				}
			}
		})
	}
	wg.Wait()
	if total != 5000 {
		t.Fatalf("%d items pruned, want 5000", total)
	}
	rows, err := db.Query(`SELECT pid, phase FROM prune_log ORDER BY at`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	active, statements := 0, 0
	for rows.Next() {
		var pid int
		var phase string
		if err := rows.Scan(&pid, &phase); err != nil {
			t.Fatal(err)
		}
		if phase == "start" {
			active++
			statements++
			if active > 1 {
				t.Fatalf("backend %d began a prune statement while another ran", pid)
			}
		} else {
			active--
		}
	}
	if statements < 5000/500 {
		t.Fatalf("%d prune statements, want at least %d", statements, 5000/500)
	}
}

func countRemaining(t testing.TB, q *durable.Queue) int {
	n, _ := countItems(t, q, record.StateSucceeded)
	return n
}
