package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable/internal/gate"
	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
)

// bulkLoop takes up the queue's unfinished bulk actions, one at a time, for a running
// scheduler (StartBulkAction).
type bulkLoop struct {
	s    *scheduler
	wake chan struct{}
	done chan struct{}

	mu     sync.Mutex
	cur    *bulkRun // the action running, nil when none
	result error    // what a shutdown gave up on, for Shutdown's outcome
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

// waitBulk waits for the bulk loop to stop (once the replays in flight returned, or at the
// end of the shutdown grace: the loop does not wait for a handler past it) and adds what it
// gave up on to Shutdown's outcome.
func (s *scheduler) waitBulk() {
	<-s.bulk.done
	s.bulk.mu.Lock()
	err := s.bulk.result
	s.bulk.mu.Unlock()
	if err != nil {
		s.mu.Lock()
		s.result = errors.Join(s.result, err)
		s.mu.Unlock()
	}
}

func (b *bulkLoop) loop() {
	s := b.s
	select {
	case <-s.stop:
		return
	case <-s.pausesRead: // a restart holds the paused keys' letters back as before
	}
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
		r.stop()
	}
}

// bulkRun is one run of an action by this scheduler, under its lease.
type bulkRun struct {
	s      *scheduler
	row    store.BulkActionRow
	filter store.DeadLetterFilter // an action on dead letters: the letters it selects
	items  store.ItemQuery        // an action on items: the pending items it selects
	ctx    context.Context        // ends when the run must stop taking letters
	stop   context.CancelFunc

	cursor store.DeadLetterID // written by work alone (workItems: an item id)

	mu       sync.Mutex
	progress store.BulkProgress
	handBack string // set when this instance cannot go on with it: another may
	next     time.Time
	waits    map[record.DeadLetterID]bulkWait // letters waiting, and on what

	namesMu sync.Mutex                // held while the paused names are read: one read for all letters
	names   map[string]store.PauseRow // the paused request names, read at namesAt
	namesAt time.Time
}

// bulkWait is what a letter of a bulk action waits on: state is the action's state it shows
// (waiting, paused_on_breaker, paused), key the breaker key (empty for a replay's lease or a
// request name), why what the action's Error says.
type bulkWait struct {
	state, key, why string
}

// bulkWaitRank orders the states a waiting letter shows: the action shows the highest.
var bulkWaitRank = map[string]int{store.BulkWaiting: 1, store.BulkPausedOnBreaker: 2, store.BulkPaused: 3}

func (b *bulkLoop) run(row store.BulkActionRow) {
	s := b.s
	onItems := record.BulkActionKind(row.Kind).OnItems()
	var f bulkFilter
	var fi itemBulkFilter
	err := json.Unmarshal([]byte(row.Filter), &f)
	if onItems {
		err = json.Unmarshal([]byte(row.Filter), &fi)
	}
	if err != nil {
		b.end(row, store.BulkFailed, "its stored filter is not valid JSON: "+err.Error())
		return
	}
	r := &bulkRun{s: s, row: row, filter: store.DeadLetterFilter{Status: store.DeadLetterFailed, Source: f.Source, From: f.From, To: f.To,
		ErrorContains: f.ErrorContains}, items: itemQueryOf(fi.itemFilter()), cursor: row.Cursor, progress: store.BulkProgress{State: store.BulkRunning},
		waits: map[record.DeadLetterID]bulkWait{}}
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
	work := r.work
	if onItems {
		work = r.workItems
	}
	state, msg := work()
	close(hbEnd)
	<-hbDone
	r.mu.Lock()
	handBack := r.handBack
	r.mu.Unlock()
	switch {
	case state != "":
		b.end(row, state, msg)
	case handBack != "":
		// Another instance (of another version, in a rolling deploy) may run the request: the
		// action is left to whichever takes it up first once Config.Recheck has passed, as an
		// item of an unknown request is.
		ctx, cancel := context.WithTimeout(s.base, finishTimeout)
		now := s.q.clock.Now()
		until := now.Add(s.q.recheck)
		err := s.q.store.DeferBulkAction(ctx, row.ID, s.cfg.InstanceID, until, now, store.BulkProgress{State: store.BulkWaiting,
			Error: handBack + "; the action waits for an instance that can, from " + until.UTC().Format(time.RFC3339)})
		cancel()
		s.noteStore("hand back bulk action", err)
		s.cfg.Logger.Warn("durable: bulk action handed back: this instance cannot run a letter's request", zap.String("instance", s.cfg.InstanceID),
			zap.Int64("bulk_action", row.ID), zap.String("why", handBack))
	case r.ctx.Err() != nil && s.stopping():
		if s.base.Err() != nil {
			// The grace is over: the action keeps its lease until it runs out, then another
			// instance takes it over.
			return
		}
		// Shutting down: give the action to the next instance at once, within what is left of
		// the grace.
		ctx, cancel := context.WithTimeout(s.base, finishTimeout)
		err := s.q.store.ReleaseBulkAction(ctx, row.ID, s.cfg.InstanceID, s.q.clock.Now())
		cancel()
		s.noteStore("release bulk action", err)
	}
}

// end finishes the action in state with msg (within what is left of a shutdown's grace).
func (b *bulkLoop) end(row store.BulkActionRow, state, msg string) {
	s := b.s
	ctx, cancel := context.WithTimeout(s.base, finishTimeout)
	defer cancel()
	var audit func(store.BulkActionRow) *store.AuditRow
	if record.BulkActionKind(row.Kind).OnItems() {
		audit = s.q.itemBulkEndAudit(state, msg)
	}
	ok, err := s.q.store.FinishBulkAction(ctx, row.ID, s.cfg.InstanceID, state, msg, s.q.clock.Now(), audit)
	s.noteStore("finish bulk action", err)
	if err == nil && ok {
		s.cfg.Logger.Info("durable: bulk action ended", zap.String("instance", s.cfg.InstanceID), zap.Int64("bulk_action", row.ID),
			zap.String("state", state), zap.String("error", msg))
	}
}

// giveBack stops the run, handing the action back: this instance cannot go on with it (why).
func (r *bulkRun) giveBack(why string) {
	r.mu.Lock()
	if r.handBack == "" {
		r.handBack = why
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

// setWait records that letter id waits on w, or no longer waits (waiting false), and writes the
// state when it changed: the action shows the wait of the highest rank (a pause, then a
// breaker, then another replay's lease), of its lowest letter among those.
func (r *bulkRun) setWait(id record.DeadLetterID, w bulkWait, waiting bool) {
	r.mu.Lock()
	if waiting {
		r.waits[id] = w
	} else {
		delete(r.waits, id)
	}
	shown, first := bulkWait{state: store.BulkRunning}, record.DeadLetterID(0)
	for lid, lw := range r.waits {
		if rk, cur := bulkWaitRank[lw.state], bulkWaitRank[shown.state]; rk > cur || rk == cur && lid < first {
			shown, first = lw, lid
		}
	}
	changed := shown.state != r.progress.State || shown.key != r.progress.WaitingKey || shown.why != r.progress.Error
	r.progress.State, r.progress.WaitingKey, r.progress.Error = shown.state, shown.key, shown.why
	r.mu.Unlock()
	if changed {
		r.save()
	}
}

// breakerWaitOf is the wait of a letter refused by the breaker of key.
func breakerWaitOf(key string) bulkWait {
	return bulkWait{state: store.BulkPausedOnBreaker, key: key,
		why: fmt.Sprintf("the breaker of %q refuses calls; the letters of that key wait, failed and untouched, until it lets them through", key)}
}

// refusalWaitOf is the wait of a letter whose replay the pipeline refused with err: a
// breaker's (key its key), or another refusing behavior's (a rate limiter, a bulkhead), which
// the action shows as waiting, named with its key.
func refusalWaitOf(err error, key string) bulkWait {
	if key != "" {
		return breakerWaitOf(key)
	}
	info := behaviors.RefusalInfo{By: "a behavior"}
	if r, ok := errors.AsType[behaviors.Refusal](err); ok {
		info = r.Refusal()
	}
	return bulkWait{state: store.BulkWaiting, key: info.Key,
		why: fmt.Sprintf("%q refuses calls of key %q (%v); the letters wait, failed and untouched, until it lets them through", info.By, info.Key, err)}
}

// leaseWait is the wait of a letter another replay holds.
var leaseWait = bulkWait{state: store.BulkWaiting}

// pausedNames returns the paused request names: read at the start of each batch (fresh is
// true), and otherwise at most once per pauseCheck for all the batch's letters. A failed read
// keeps the last view.
func (r *bulkRun) pausedNames(fresh bool) map[string]store.PauseRow {
	s := r.s
	r.namesMu.Lock()
	defer r.namesMu.Unlock()
	if !fresh && r.names != nil && time.Since(r.namesAt) < gate.LookInterval {
		return r.names
	}
	ctx, cancel := s.storeCtx()
	rows, err := s.q.store.Pauses(ctx, store.PauseName)
	cancel()
	s.noteStore("read the paused request names", err)
	if err != nil {
		return r.names
	}
	r.names, r.namesAt = make(map[string]store.PauseRow, len(rows)), time.Now()
	for _, p := range rows {
		r.names[p.Target] = p
	}
	return r.names
}

// pausedBy reports the pause that holds letter d back at now, if one does: a pause of its
// request name, or of its breaker key (key, as its breaker check uses it) or of the key the
// action reset first (a reset-and-replay replays that breaker's letters, whatever key their
// own breaker check finds), and how long the letter waits before it looks again.
func (r *bulkRun) pausedBy(d store.DeadLetter, key string, now time.Time) (bulkWait, time.Duration, bool) {
	recheck := func(until time.Time) time.Duration {
		if until.IsZero() {
			return bulkBreakerWait
		}
		return max(min(until.Sub(now), bulkBreakerWait), time.Millisecond)
	}
	if p, ok := r.pausedNames(false)[d.Name]; ok && (p.Until.IsZero() || p.Until.After(now)) {
		why := fmt.Sprintf("request name %q is paused by %s %s", d.Name, p.Actor, untilText(p.Until))
		if p.Reason != "" {
			why += " (reason: " + p.Reason + ")"
		}
		return bulkWait{state: store.BulkPaused, why: why + "; its letters wait, failed and untouched, until the pause ends"}, recheck(p.Until), true
	}
	for _, k := range []string{key, r.row.ResetBreaker} {
		if until, paused := r.s.gate.Pauses().Paused(k, now); paused {
			return bulkWait{state: store.BulkPaused, key: k,
				why: fmt.Sprintf("breaker key %q is paused %s; the letters of that key wait, failed and untouched, until the pause ends", k, untilText(until))}, recheck(until), true
		}
	}
	return bulkWait{}, 0, false
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
		if r.row.Kind == string(record.BulkReplay) {
			r.pausedNames(true) // one read of the paused names per batch
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
		if !r.await(&wg, sem) {
			return "", "" // the shutdown grace is over: the cursor stays
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

// await waits for the letters of a batch in flight to be settled; at the end of a shutdown's
// grace it gives up on those still running (their handlers ignore cancellation), records that
// for Shutdown's outcome and reports false.
func (r *bulkRun) await(wg *sync.WaitGroup, sem chan struct{}) bool {
	s := r.s
	settled := make(chan struct{})
	go func() {
		wg.Wait()
		close(settled)
	}()
	select {
	case <-settled:
		return true
	case <-s.graceEnd:
	}
	select {
	case <-settled: // they returned as the grace ended
		return true
	default:
	}
	left := len(sem)
	s.cfg.Logger.Warn("durable: shutdown gave up on bulk action replays still in flight", zap.String("instance", s.cfg.InstanceID),
		zap.Int64("bulk_action", r.row.ID), zap.Int("replays", left), zap.Duration("grace", s.cfg.ShutdownGrace))
	b := s.bulk
	b.mu.Lock()
	b.result = errors.Join(b.result, fmt.Errorf("durable: shutdown gave up on %d bulk action replays still in flight at the end of ShutdownGrace (%v) after their cancellation (a handler that had not returned, or an outcome the database did not take); their letters stay failed, and the action goes on from its cursor once its lease runs out",
		left, s.cfg.ShutdownGrace))
	b.mu.Unlock()
	return false
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
	defer r.setWait(id, bulkWait{}, false)
	for r.throttle() {
		var (
			res     Resolution
			err     error
			release = func() {}
		)
		if r.row.Kind == string(record.BulkDiscard) {
			res, err = s.q.discard(r.ctx, id, r.row.Actor, r.row.Reason, r.row.ID)
		} else {
			reg, key := s.guardOfLetter(d)
			if w, wait, paused := r.pausedBy(d, key, s.q.clock.Now()); paused {
				// Held back as the scheduler holds back the items of a paused name or key: not
				// replayed, untouched.
				r.setWait(id, w, true)
				if !r.pause(wait) {
					return false
				}
				continue
			}
			if reg != nil && key != "" {
				rel, remaining, ok := s.gate.Probe(reg, key)
				if !ok {
					r.setWait(id, breakerWaitOf(key), true)
					if !r.pause(breakerWait(remaining)) {
						return false
					}
					continue
				}
				release = rel
			}
			// The replay itself runs past the run's stop (a shutdown's cancellation ends it), so
			// a handler that started gets its outcome recorded, within the shutdown's grace.
			res, err = s.q.replay(s.life, s.base, s.sender, id, r.row.Actor, r.row.ID)
			release()
		}
		switch {
		case res == Replayed || res == StillFailed || res == Discarded || res == NotFound:
			return true
		case res == Refused:
			key, remaining := gate.RefusalOf(err)
			r.setWait(id, refusalWaitOf(err, key), true)
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
			r.setWait(id, leaseWait, true)
			if !r.pause(bulkBusyWait) {
				return false
			}
		case errors.Is(err, ErrOutcomeUnknown):
			ctx, cancel := context.WithTimeout(s.base, finishTimeout)
			cerr := s.q.store.CountBulkUnknown(ctx, r.row.ID, s.q.clock.Now())
			cancel()
			s.noteStore("count bulk action outcome", cerr)
			return true
		case err != nil && (errors.Is(err, ErrUnknownRequest) || s.q.cannotRun(err, d.Name)):
			// Not run, nothing recorded: another instance (a rolling deploy) may run it.
			r.giveBack(fmt.Sprintf("dead letter %d: instance %s cannot run its request %q: %v", id, s.cfg.InstanceID, d.Name, err))
			return false
		case s.life.Err() != nil || r.ctx.Err() != nil:
			return false
		default:
			// The database failed before the letter was taken (or after it was freed): try
			// again. Told through the scheduler's health, which logs an outage once and then
			// at most every 30 s, not once per try of every letter in flight.
			s.noteStore(fmt.Sprintf("settle a dead letter of bulk action %d", r.row.ID), err)
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
// as the gate finds them for an item (nil when none does or it cannot be decoded).
func (s *scheduler) guardOfLetter(d store.DeadLetter) (*breaker.Registry, string) {
	if !s.gate.HasBreakers() {
		return nil, ""
	}
	req, err := s.q.reg.decode(d.Name, d.Payload)
	if err != nil {
		return nil, ""
	}
	c := store.Claimed{ItemRow: store.Item{ID: d.ItemID, Name: d.Name}}
	return s.gate.GuardOf(&c, req)
}
