package durable

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/switchboard-go/switchboard/durable/internal/store"
)

// Waking the schedulers of other instances (PostgreSQL). An Enqueue of an item due now wakes
// this instance's scheduler directly and asks the queue's notifier to tell the others: the
// notifier sends one NOTIFY at a time, on a connection of the pool and after the enqueue
// committed: at once when it is idle, otherwise notifyGap after the last one, a notification
// that tells every enqueue made since. So a burst of enqueues costs one notification per
// notifyGap, not one each, and no enqueue waits for one. Each scheduler keeps a connection listening (listenLoop); a notification makes it claim at
// once. When that connection fails the scheduler polls as always (PollInterval) and listens
// again; once it listens it claims at once, for what was enqueued meanwhile.

// notifyTimeout bounds one notification: it is a hint, and a database too slow to take it in
// this time leaves the other instances to their polls.
const notifyTimeout = 5 * time.Second

// notifyGap is the least time between two notifications of a queue. Each NOTIFY is a
// transaction that commits (with a flush of the log): one after every enqueue made enqueues
// one after another take 1.7 times as long; one per 2 ms costs the database little at any rate
// of enqueues and delays the wake of another instance by at most that much, while the first
// enqueue after a quiet spell is told at once.
const notifyGap = 2 * time.Millisecond

// notifier sends the notifications of a queue's enqueues, one at a time (see above).
type notifier struct {
	mu     sync.Mutex
	busy   bool // a goroutine is sending, or waiting out the gap after it sent
	again  bool // an enqueue asked while it was: send once more
	closed bool
	wg     sync.WaitGroup
	ctx    context.Context // ends at close
	cancel context.CancelFunc
	health dbHealth
}

// notifyDue tells the other instances that an item is due, unless the database cannot.
func (q *Queue) notifyDue() {
	if !q.notifies {
		return
	}
	n := &q.notify
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.closed:
	case n.busy:
		n.again = true
	default:
		n.busy = true
		n.wg.Go(func() { n.send(q.store, q.sender) })
	}
}

// send notifies, waits out notifyGap, and notifies again while enqueues asked for it
// meanwhile; then it returns, and the next enqueue finds the notifier idle.
func (n *notifier) send(st *store.Store, sender string) {
	for {
		ctx, cancel := context.WithTimeout(n.ctx, notifyTimeout)
		err := st.NotifyDue(ctx, sender)
		cancel()
		if err != nil && n.ctx.Err() == nil {
			n.health.failed("notify the other instances of an item due", err)
		} else if err == nil {
			n.health.ok()
		}
		select {
		case <-time.After(notifyGap):
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

// close stops the notifications, waiting for the one on its way (cancelled).
func (n *notifier) close() {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	n.cancel()
	n.wg.Wait()
}

// listenHooks are called by a scheduler's listening connection (tests).
type listenHooks struct {
	listening func(pid int64) // it listens, on the backend process pid
	notified  func()          // a notification woke the scheduler
	// relisten is called after the connection failed, before the wait to listen again; it
	// may block until ctx ends.
	relisten func(ctx context.Context)
}

// listenLoop keeps a connection listening for the notifications of items due (PostgreSQL),
// each of which wakes the claim loop; after the connection fails it listens again, waiting
// longer each time up to 30 s, and the claim loop polls meanwhile. It returns when the
// scheduler stops, at once on a database without notifications.
func (s *scheduler) listenLoop() {
	const first, most = 100 * time.Millisecond, 30 * time.Second
	ctx := s.listenCtx
	wait := first
	for {
		err := s.q.store.WatchDue(ctx, s.q.sender, func(pid int64) {
			wait = first
			s.noteStore("listen for items due", nil)
			if h := s.hooks.listening; h != nil {
				h(pid)
			}
			s.Wake() // what was enqueued while it was not listening
		}, func() {
			if h := s.hooks.notified; h != nil {
				h()
			}
			s.Wake()
		})
		if errors.Is(err, store.ErrNoNotifications) || ctx.Err() != nil {
			return
		}
		// Logged with the scheduler's other database calls: an outage is one failure, and one
		// recovery, whichever call meets it first.
		s.noteStore("listen for items due", err)
		if h := s.hooks.relisten; h != nil {
			h(ctx)
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

// newSenderName returns a name for a queue's notifications, unique among the instances.
func newSenderName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
