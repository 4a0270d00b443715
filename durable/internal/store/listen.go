package store

import (
	"context"
	"sync"
)

// listenChannels are the channels a store's notification connection listens on: every
// notification its instance may want, so that one connection serves them all.
var listenChannels = []string{ItemsChannel, BreakerChannel}

// hub is a store's one notification connection, shared by every watcher (WatchDue and each
// WatchBreakers): the first watcher opens it, the last one to leave closes it, and when it
// fails every watcher's call returns its error (each watches again after its own wait, and the
// first to do so opens a new one). An instance therefore holds one listening connection
// however many fleet stores it runs.
type hub struct {
	mu  sync.Mutex
	cur *hubSession // the connection open or opening; nil: none
}

// hubSession is one notification connection and its watchers.
type hubSession struct {
	cancel    context.CancelFunc
	done      chan struct{} // closed when the connection has ended
	err       error         // why it ended (set before done is closed)
	pid       int64
	listening bool
	watchers  map[*watcher]struct{}
}

// watcher is one watch call's channel and callbacks, called with the hub's lock held (they
// must not watch).
type watcher struct {
	channel   string
	listening func(pid int64)
	notified  func(payload string)
}

// listen adds a watcher of channel to the store's notification connection (opening it when
// none is) until ctx ends or the connection fails: listening is called once the connection
// listens (at once when it already does), with its backend's pid, and notified with each
// payload on channel after. It returns ctx's error, or the error that ended the connection.
func (s *Store) listen(ctx context.Context, e *postgresEngine, channel string, listening func(pid int64), notified func(payload string)) error {
	w := &watcher{channel: channel, listening: listening, notified: notified}
	h := &s.hub
	h.mu.Lock()
	ss := h.cur
	if ss == nil {
		ss = s.openHub(e)
	}
	ss.watchers[w] = struct{}{}
	if ss.listening {
		w.listening(ss.pid)
	}
	h.mu.Unlock()
	select {
	case <-ss.done:
		return ss.err
	case <-ctx.Done():
	}
	h.mu.Lock()
	delete(ss.watchers, w)
	last := len(ss.watchers) == 0
	if last && h.cur == ss {
		h.cur = nil
	}
	h.mu.Unlock()
	if last {
		ss.cancel()
		<-ss.done // the connection is back in the pool (or closed) before the caller goes on
	}
	return ctx.Err()
}

// openHub starts a notification connection; the hub's lock is held.
func (s *Store) openHub(e *postgresEngine) *hubSession {
	ctx, cancel := context.WithCancel(context.Background())
	ss := &hubSession{cancel: cancel, done: make(chan struct{}), watchers: map[*watcher]struct{}{}}
	s.hub.cur = ss
	go func() {
		err := s.runHub(ctx, e, ss)
		s.hub.mu.Lock()
		if s.hub.cur == ss {
			s.hub.cur = nil
		}
		ss.err = err
		s.hub.mu.Unlock()
		close(ss.done)
	}()
	return ss
}

// runHub holds the notification connection of ss until ctx ends or it fails.
func (s *Store) runHub(ctx context.Context, e *postgresEngine, ss *hubSession) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var pid int64
	if err := conn.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		return err
	}
	h := &s.hub
	return e.drv.Listen(ctx, conn, listenChannels, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		ss.pid, ss.listening = pid, true
		for w := range ss.watchers {
			w.listening(pid)
		}
	}, func(channel, payload string) {
		h.mu.Lock()
		defer h.mu.Unlock()
		for w := range ss.watchers {
			if w.channel == channel {
				w.notified(payload)
			}
		}
	})
}
