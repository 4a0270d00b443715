package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
)

// bulkLoop takes up the queue's unfinished bulk actions, one at a time, for a running
// scheduler (StartBulkAction).
type bulkLoop struct {
	s    *scheduler
	wake chan struct{}
	done chan struct{}

	mu  sync.Mutex
	cur *bulkRun // the action running, nil when none
}

// Waits of a bulk action: on a letter another replay holds, and at most on a breaker, between
// looks (a breaker's own remaining time is used when shorter).
const (
	bulkBusyWait    = 200 * time.Millisecond
	bulkBreakerWait = time.Second
)

// minBulkPoll is the shortest interval between a scheduler's looks for unfinished bulk
// actions (PollInterval when longer): a local StartBulkAction wakes it at once, an action
// another instance stored or left behind waits at most that long, and a scheduler polling its
// items every few milliseconds does not add a statement to each of its polls.
const minBulkPoll = time.Second

// newBulkLoop is made with the scheduler (StartBulkAction may wake it once the scheduler is
// the queue's running one); startBulk starts it.
func newBulkLoop(s *scheduler) *bulkLoop {
	return &bulkLoop{s: s, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

func (s *scheduler) startBulk() {
	go func() {
		defer close(s.bulk.done)
		s.bulk.loop()
	}()
}

func (s *scheduler) waitBulk() { <-s.bulk.done }

func (b *bulkLoop) loop() {
	s := b.s
	poll := time.NewTimer(0)
	defer poll.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-poll.C:
		case <-b.wake:
		}
		for !s.stopping() {
			now := s.q.clock.Now()
			ctx, cancel := s.storeCtx()
			row, found, err := s.q.store.ClaimBulkAction(ctx, s.cfg.InstanceID, now, now.Add(s.cfg.Lease))
			cancel()
			s.noteStore("claim bulk action", err)
			if err != nil || !found {
				break
			}
			b.run(row)
		}
		poll.Reset(max(s.cfg.PollInterval, minBulkPoll))
	}
}

// cancelled stops the local run of action id, if it is the one running.
func (b *bulkLoop) cancelled(id int64) {
	b.mu.Lock()
	r := b.cur
	b.mu.Unlock()
	if r != nil && r.row.ID == id {
		r.halt("")
	}
}

// bulkRun is one run of an action by this scheduler, under its lease.
type bulkRun struct {
	s      *scheduler
	row    store.BulkActionRow
	filter store.DeadLetterFilter
	ctx    context.Context // ends when the run must stop taking letters
	stop   context.CancelFunc

	cursor store.DeadLetterID // written by work alone

	mu       sync.Mutex
	progress store.BulkProgress
	failure  string // set when the action cannot go on: it ends failed
	next     time.Time
	waits    map[record.DeadLetterID]string // letters waiting, and the breaker key (empty: a lease)
}

func (b *bulkLoop) run(row store.BulkActionRow) {
	s := b.s
	var f bulkFilter
	if err := json.Unmarshal([]byte(row.Filter), &f); err != nil {
		b.end(row, store.BulkFailed, "its stored filter is not valid JSON: "+err.Error())
		return
	}
	r := &bulkRun{s: s, row: row, filter: store.DeadLetterFilter{Status: store.DeadLetterFailed, Source: f.Source, From: f.From, To: f.To,
		ErrorContains: f.ErrorContains}, cursor: row.Cursor, progress: store.BulkProgress{State: store.BulkRunning},
		waits: map[record.DeadLetterID]string{}}
	r.ctx, r.stop = context.WithCancel(s.base)
	defer r.stop()
	go func() {
		select {
		case <-s.stop:
			r.stop()
		case <-r.ctx.Done():
		}
	}()
	b.mu.Lock()
	b.cur = r
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.cur = nil
		b.mu.Unlock()
	}()
	s.cfg.Logger.Info("durable: bulk action taken up", zap.String("instance", s.cfg.InstanceID), zap.Int64("bulk_action", row.ID),
		zap.String("kind", row.Kind), zap.Int64("cursor", int64(row.Cursor)))
	if !r.save() {
		return
	}
	hbEnd := make(chan struct{})
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		t := time.NewTicker(s.cfg.HeartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-hbEnd:
				return
			case <-t.C:
				r.save()
			}
		}
	}()
	state, msg := r.work()
	close(hbEnd)
	<-hbDone
	switch {
	case state != "":
		b.end(row, state, msg)
	case r.ctx.Err() != nil && s.stopping():
		// Shutting down: give the action to the next instance at once.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(s.base), finishTimeout)
		err := s.q.store.ReleaseBulkAction(ctx, row.ID, s.cfg.InstanceID, s.q.clock.Now())
		cancel()
		s.noteStore("release bulk action", err)
	}
}

// end finishes the action in state with msg.
func (b *bulkLoop) end(row store.BulkActionRow, state, msg string) {
	s := b.s
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.base), finishTimeout)
	defer cancel()
	ok, err := s.q.store.FinishBulkAction(ctx, row.ID, s.cfg.InstanceID, state, msg, s.q.clock.Now())
	s.noteStore("finish bulk action", err)
	if err == nil && ok {
		s.cfg.Logger.Info("durable: bulk action ended", zap.String("instance", s.cfg.InstanceID), zap.Int64("bulk_action", row.ID),
			zap.String("state", state), zap.String("error", msg))
	}
}

// halt stops the run; a non-empty failure ends the action failed.
func (r *bulkRun) halt(failure string) {
	r.mu.Lock()
	if failure != "" && r.failure == "" {
		r.failure = failure
	}
	r.mu.Unlock()
	r.stop()
}

// save extends the lease and writes the progress; when the lease is gone (the action was
// cancelled or another instance took it) it stops the run and reports false.
func (r *bulkRun) save() bool {
	s := r.s
	r.mu.Lock()
	p := r.progress
	r.mu.Unlock()
	ctx, cancel := s.storeCtx()
	now := s.q.clock.Now()
	held, err := s.q.store.SaveBulkAction(ctx, r.row.ID, s.cfg.InstanceID, now.Add(s.cfg.Lease), now, p)
	cancel()
	s.noteStore("save bulk action", err)
	if err == nil && !held {
		s.cfg.Logger.Info("durable: bulk action no longer held (cancelled, or taken over); stopping it", zap.String("instance", s.cfg.InstanceID),
			zap.Int64("bulk_action", r.row.ID))
		r.stop()
		return false
	}
	return true
}

// setWait records that letter id waits (on breaker key, or on another replay's lease when key
// is empty), or no longer does (done), and writes the state when it changed.
func (r *bulkRun) setWait(id record.DeadLetterID, key string, waiting bool) {
	r.mu.Lock()
	if waiting {
		r.waits[id] = key
	} else {
		delete(r.waits, id)
	}
	st, wk := store.BulkRunning, ""
	for _, k := range r.waits {
		switch {
		case k != "":
			st, wk = store.BulkPausedOnBreaker, k
		case st == store.BulkRunning:
			st = store.BulkWaiting
		}
	}
	changed := st != r.progress.State || wk != r.progress.WaitingKey
	r.progress.State, r.progress.WaitingKey = st, wk
	r.progress.Error = ""
	if st == store.BulkPausedOnBreaker {
		r.progress.Error = fmt.Sprintf("the breaker of %q refuses calls; the letters of that key wait, failed and untouched, until it lets them through", wk)
	}
	r.mu.Unlock()
	if changed {
		r.save()
	}
}

// work settles the letters batch by batch; it returns the final state (and its message), or
// "" when the run stopped before the end (shutdown, lost lease, cancel).
func (r *bulkRun) work() (state, msg string) {
	s := r.s
	for r.ctx.Err() == nil {
		ctx, cancel := s.storeCtx()
		letters, err := s.q.store.BulkLetters(ctx, r.row.ID, r.filter, r.cursor, r.row.MaxLetter, bulkBatchSize)
		cancel()
		s.noteStore("read bulk action letters", err)
		if err != nil {
			r.pause(bulkBusyWait)
			continue
		}
		if len(letters) == 0 {
			return store.BulkDone, ""
		}
		sem := make(chan struct{}, r.row.InFlight)
		var wg sync.WaitGroup
		settled := make([]bool, len(letters))
	batch:
		for i, d := range letters {
			select {
			case sem <- struct{}{}:
			case <-r.ctx.Done():
				break batch
			}
			wg.Go(func() {
				defer func() { <-sem }()
				settled[i] = r.settle(d)
			})
		}
		wg.Wait()
		r.mu.Lock()
		failure := r.failure
		r.mu.Unlock()
		if failure != "" {
			return store.BulkFailed, failure
		}
		for _, ok := range settled {
			if !ok {
				return "", "" // stopped before the batch was settled: the cursor stays
			}
		}
		if !r.advance(letters[len(letters)-1].ID) {
			return "", ""
		}
	}
	return "", ""
}

// advance moves the cursor past a settled batch, rolling its outcomes into the stored totals,
// trying again while the database fails; false when the run stops first or lost the action.
func (r *bulkRun) advance(to store.DeadLetterID) bool {
	s := r.s
	for {
		ctx, cancel := s.storeCtx()
		held, err := s.q.store.AdvanceBulkAction(ctx, r.row.ID, s.cfg.InstanceID, r.cursor, to, s.q.clock.Now())
		cancel()
		s.noteStore("advance bulk action", err)
		switch {
		case err == nil && held:
			r.cursor = to
			return true
		case err == nil:
			r.stop() // cancelled, or taken over
			return false
		case !r.pause(bulkBusyWait):
			return false
		}
	}
}

// pause waits d, or until the run stops; it reports whether the run goes on.
func (r *bulkRun) pause(d time.Duration) bool {
	wait, stop := r.s.q.clock.After(d)
	defer stop()
	select {
	case <-wait:
		return true
	case <-r.ctx.Done():
		return false
	}
}

// throttle waits for the letter's turn under the action's rate.
func (r *bulkRun) throttle() bool {
	now := r.s.q.clock.Now()
	r.mu.Lock()
	at := r.next
	if at.Before(now) {
		at = now
	}
	r.next = at.Add(time.Duration(float64(time.Second) / r.row.Rate))
	r.mu.Unlock()
	if d := at.Sub(now); d > 0 {
		return r.pause(d)
	}
	return r.ctx.Err() == nil
}

// settle works on letter d until it is settled (true) or the run stops (false).
func (r *bulkRun) settle(d store.DeadLetter) bool {
	s := r.s
	id := record.DeadLetterID(d.ID)
	defer r.setWait(id, "", false)
	for r.throttle() {
		var (
			res  Resolution
			err  error
			held []string
		)
		if r.row.Kind == string(record.BulkDiscard) {
			res, err = s.q.discard(r.ctx, id, r.row.Actor, r.row.Reason, r.row.ID)
		} else {
			if reg, key := s.guardOfLetter(d); reg != nil && key != "" {
				ref, refused := s.ask([]*breaker.Registry{reg}, key, &held)
				if refused {
					r.setWait(id, key, true)
					if !r.pause(breakerWait(ref.remaining)) {
						return false
					}
					continue
				}
			}
			// The replay itself runs past the run's stop (a shutdown's grace ends it), so a
			// handler that started gets its outcome recorded.
			res, err = s.q.replay(s.life, s.sender, id, r.row.Actor, r.row.ID)
			s.unhold(held)
		}
		switch {
		case res == Replayed || res == StillFailed || res == Discarded || res == NotFound:
			return true
		case res == Refused:
			key, remaining := refusalOf(err)
			r.setWait(id, key, true)
			if !r.pause(breakerWait(remaining)) {
				return false
			}
		case res == Conflict:
			ctx, cancel := s.storeCtx()
			cur, found, lerr := s.q.store.DeadLetter(ctx, d.ID)
			cancel()
			if lerr == nil && (!found || cur.Status != store.DeadLetterFailed) {
				return true // settled by another: counted as skipped when the action ends
			}
			r.setWait(id, "", true)
			if !r.pause(bulkBusyWait) {
				return false
			}
		case errors.Is(err, ErrOutcomeUnknown):
			ctx, cancel := context.WithTimeout(context.WithoutCancel(s.base), finishTimeout)
			cerr := s.q.store.CountBulkUnknown(ctx, r.row.ID, s.q.clock.Now())
			cancel()
			s.noteStore("count bulk action outcome", cerr)
			return true
		case err != nil && (errors.Is(err, ErrUnknownRequest) || s.q.cannotRun(err, d.Name)):
			r.halt(fmt.Sprintf("dead letter %d: this instance cannot run its request %q: %v", id, d.Name, err))
			return false
		case s.life.Err() != nil || r.ctx.Err() != nil:
			return false
		default:
			// The database failed before the letter was taken (or after it was freed): try
			// again.
			s.cfg.Logger.Warn("durable: bulk action letter not settled; trying again", zap.String("instance", s.cfg.InstanceID),
				zap.Int64("bulk_action", r.row.ID), zap.Int64("dead_letter", int64(id)), zap.Error(err))
			if !r.pause(bulkBusyWait) {
				return false
			}
		}
	}
	return false
}

// breakerWait is how long a letter refused by a breaker waits before it asks again.
func breakerWait(remaining time.Duration) time.Duration {
	if remaining <= 0 {
		return bulkBusyWait // the probes are out: their verdict comes soon
	}
	return min(remaining, bulkBreakerWait)
}

// guardOfLetter returns the registry and key of the breaker that guards letter d's request,
// as guardOf does for an item (nil when none does or it cannot be decoded).
func (s *scheduler) guardOfLetter(d store.DeadLetter) (*breaker.Registry, string) {
	if len(s.breakers) == 0 {
		return nil, ""
	}
	req, err := s.q.reg.decode(d.Name, d.Payload)
	if err != nil {
		return nil, ""
	}
	c := store.Claimed{Item: store.Item{ID: d.ItemID, Name: d.Name}}
	return s.guardOf(&c, req)
}
