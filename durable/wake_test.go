package durable_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

// listener is a scheduler whose listening connection tells the test what it does.
type listener struct {
	listening chan int64    // the backend pid, each time it listens
	notified  chan struct{} // each notification that woke it
	waiting   chan struct{} // its connection failed: it waits at the gate to listen again
	gate      chan struct{} // closed: it may listen again
}

// pgBackend returns a backend of its own schema on the test server, skipping without one.
func pgBackend(t *testing.T) backend {
	t.Helper()
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	return postgresBackend(t, dsn)
}

// startListener starts a scheduler of q with cfg, once it listens and its first claim has
// been made (with PollInterval an hour, it claims next when woken).
func startListener(t *testing.T, q *durable.Queue, cfg durable.SchedulerConfig) *listener {
	t.Helper()
	l := &listener{listening: make(chan int64, 10), notified: make(chan struct{}, 100), waiting: make(chan struct{}, 10), gate: make(chan struct{})}
	claimed := make(chan struct{}, 100)
	cfg.OnClaim = append(cfg.OnClaim, func(time.Duration, int, error) {
		select {
		case claimed <- struct{}{}:
		default:
		}
	})
	s := must[*durable.Scheduler](t)(durable.NewScheduler(q, mediatorFor(t, handlers{}), cfg))
	durable.SetListenHooks(s, durable.ListenHooks{
		Listening: func(pid int64) { l.listening <- pid },
		Notified:  func() { l.notified <- struct{}{} },
		Relisten: func(ctx context.Context) {
			l.waiting <- struct{}{}
			select {
			case <-l.gate:
			case <-ctx.Done():
			}
		},
	})
	startScheduler(t, s)
	<-claimed
	return l
}

// On PostgreSQL an item enqueued due now by one instance wakes the schedulers of the others
// (LISTEN/NOTIFY): it is claimed at once, not at their next poll.
func TestEnqueueWakesOtherInstances(t *testing.T) {
	b := pgBackend(t)
	producer, worker := b.queue(t, durable.Config{}), b.queue(t, durable.Config{})
	l := startListener(t, worker, durable.SchedulerConfig{PollInterval: time.Hour})
	<-l.listening
	id := must[durable.Enqueued](t)(producer.Enqueue(context.Background(), &Work{N: 1})).ID
	waitState(t, worker, id, record.StateSucceeded) // within waitState's bound, an hour before the poll
}

// An item enqueued due now in a transaction wakes the schedulers of every instance when the
// transaction commits, its own instance's included; one rolled back wakes none.
func TestEnqueueTxWakesOnCommit(t *testing.T) {
	q := pgBackend(t).queue(t, durable.Config{})
	l := startListener(t, q, durable.SchedulerConfig{PollInterval: time.Hour})
	<-l.listening
	ctx := context.Background()
	db := durable.StoreOf(q).DB()

	tx := must[*sql.Tx](t)(db.BeginTx(ctx, nil))
	must[durable.Enqueued](t)(q.EnqueueTx(ctx, tx, &Work{N: 1}))
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	tx = must[*sql.Tx](t)(db.BeginTx(ctx, nil))
	var ids []record.ItemID
	for n := range 3 {
		ids = append(ids, must[durable.Enqueued](t)(q.EnqueueTx(ctx, tx, &Work{N: n})).ID)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		waitState(t, q, id, record.StateSucceeded)
	}
	if n := len(l.notified); n != 1 {
		t.Fatalf("%d notifications woke the scheduler; want one, of the transaction that committed", n)
	}
}

// When the scheduler's listening connection is cut (pg_terminate_backend of its backend), the
// scheduler goes on polling, and listens again.
func TestListenConnectionDropped(t *testing.T) {
	b := pgBackend(t)
	producer, worker := b.queue(t, durable.Config{}), b.queue(t, durable.Config{})
	l := startListener(t, worker, durable.SchedulerConfig{PollInterval: 100 * time.Millisecond})
	first := <-l.listening
	ctx := context.Background()
	var cut bool
	if err := b.pool(t).QueryRowContext(ctx, "SELECT pg_terminate_backend($1)", first).Scan(&cut); err != nil || !cut {
		t.Fatalf("terminate the listening backend %d: %v, %v", first, cut, err)
	}
	<-l.waiting // the scheduler saw its connection fail, and does not listen

	id := must[durable.Enqueued](t)(producer.Enqueue(ctx, &Work{N: 1})).ID
	waitState(t, worker, id, record.StateSucceeded) // by its poll
	if n := len(l.notified); n != 0 {
		t.Fatalf("%d notifications reached a scheduler that was not listening", n)
	}

	close(l.gate)
	if again := <-l.listening; again == first {
		t.Fatalf("listening again on the backend %d that was terminated", again)
	}
	id = must[durable.Enqueued](t)(producer.Enqueue(ctx, &Work{N: 2})).ID
	select {
	case <-l.notified:
	case <-time.After(20 * time.Second):
		t.Fatal("no notification woke the scheduler after it listened again")
	}
	waitState(t, worker, id, record.StateSucceeded)
}
