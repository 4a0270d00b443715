package notify

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/switchboard-go/switchboard/durable/internal/dbhealth"
	"github.com/switchboard-go/switchboard/durable/internal/store"
)

// Timeout bounds one notification: it is a hint, and a database too slow to take it in this
// time leaves the other instances to their polls.
const Timeout = 5 * time.Second

// Gap is the least time between two notifications of a queue. Each NOTIFY is a transaction that
// commits (with a flush of the log): one after every enqueue made enqueues one after another
// take 1.7 times as long; one per 2 ms costs the database little at any rate of enqueues and
// delays the wake of another instance by at most that much, while the first enqueue after a
// quiet spell is told at once.
const Gap = 2 * time.Millisecond

// Store is what notifications need of the database.
type Store interface {
	NotifyDue(ctx context.Context, sender string) error
	WatchDue(ctx context.Context, self string, listening func(pid int64), notified func()) error
}

// Notifier sends the notifications of a queue's enqueues, one at a time (see the package doc).
type Notifier struct {
	st     Store
	sender string
	health *dbhealth.Health

	mu     sync.Mutex
	busy   bool // a goroutine is sending, or waiting out the gap after it sent
	again  bool // an enqueue asked while it was: send once more
	closed bool
	wg     sync.WaitGroup
	ctx    context.Context // ends at Close
	cancel context.CancelFunc
}

// NewNotifier returns the notifier of a queue whose notifications are sent under the name
// sender (its own schedulers ignore them).
func NewNotifier(st Store, sender string, health *dbhealth.Health) *Notifier {
	n := &Notifier{st: st, sender: sender, health: health}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	return n
}

// Due tells the other instances that an item is due.
func (n *Notifier) Due() {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.closed:
	case n.busy:
		n.again = true
	default:
		n.busy = true
		n.wg.Go(n.send)
	}
}

// send notifies, waits out Gap, and notifies again while enqueues asked for it meanwhile; then
// it returns, and the next enqueue finds the notifier idle.
func (n *Notifier) send() {
	for {
		ctx, cancel := context.WithTimeout(n.ctx, Timeout)
		err := n.st.NotifyDue(ctx, n.sender)
		cancel()
		if err == nil || n.ctx.Err() == nil {
			n.health.Note("notify the other instances of an item due", err)
		}
		select {
		case <-time.After(Gap):
		case <-n.ctx.Done():
		}
		n.mu.Lock()
		if !n.again || n.closed {
			n.busy = false
			n.mu.Unlock()
			return
		}
		n.again = false
		n.mu.Unlock()
	}
}

// Idle waits until the notifier has sent what its enqueues asked for (tests).
func (n *Notifier) Idle() { n.wg.Wait() }

// Close stops the notifications, waiting for the one on its way (cancelled).
func (n *Notifier) Close() {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	n.cancel()
	n.wg.Wait()
}

// Hooks are called by a listener's connection (tests).
type Hooks struct {
	Listening func(pid int64) // it listens, on the backend process pid
	Notified  func()          // a notification woke the claim loop
	// Relisten is called after the connection failed, before the wait to listen again; it
	// may block until ctx ends.
	Relisten func(ctx context.Context)
}

// Listen keeps a connection listening for the notifications of items due, each of which calls
// wake; after the connection fails it listens again, waiting longer each time up to 30 s (the
// claim loop polls meanwhile). It returns when ctx ends, at once on a database without
// notifications. self is the queue's own sender name, whose notifications it ignores; health
// gets the connection's failures with the instance's other database calls, so that an outage
// is one failure and one recovery, whichever call meets it first.
func Listen(ctx context.Context, st Store, self string, health *dbhealth.Health, wake func(), h Hooks) {
	const first, most = 100 * time.Millisecond, 30 * time.Second
	wait := first
	for {
		err := st.WatchDue(ctx, self, func(pid int64) {
			wait = first
			health.Note("listen for items due", nil)
			if h.Listening != nil {
				h.Listening(pid)
			}
			wake() // what was enqueued while it was not listening
		}, func() {
			if h.Notified != nil {
				h.Notified()
			}
			wake()
		})
		if errors.Is(err, store.ErrNoNotifications) || ctx.Err() != nil {
			return
		}
		health.Note("listen for items due", err)
		if h.Relisten != nil {
			h.Relisten(ctx)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, most)
	}
}
