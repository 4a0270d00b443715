package durable

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/durable/internal/executor"
	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// DeadLetterFilter selects the letters Queue.DeadLetters lists.
type DeadLetterFilter struct {
	Status   record.DeadLetterStatus // zero means record.DeadLetterFailed, the letters waiting for an operator
	Source   string                  // when not empty, only letters of that source
	From, To time.Time               // when not zero, only letters created in [From, To)
	// ErrorContains, when not empty, keeps only the letters whose error contains it, ignoring
	// case.
	ErrorContains string
	// Limit caps the letters returned: zero means 50, a dashboard's page; at most 500, so a
	// listing's payloads stay a bounded response.
	Limit, Offset int
}

// DeadLetterPage is a page of the letters a DeadLetterFilter selects, and how many it selects.
type DeadLetterPage struct {
	Letters []record.DeadLetter
	// Total is how many letters the filter selects, counted up to ExactCountLimit or to the
	// page's end (Offset+Limit), whichever is further; past it the count stops, as Queue.Stats'
	// does: letters are never deleted, and a count of them all, at every refresh
	// of a dashboard, would read every one.
	Total int
	// Over says the count stopped: more than Total letters match. A page past Total is still
	// read: page on with Offset until a page comes back short.
	Over bool
}

// Listing limits of DeadLetterFilter.
const (
	defaultDeadLetterLimit = 50
	maxDeadLetterLimit     = 500
)

// maxBulk is the most ids ReplayMany and DiscardMany take in one call: a bulk replay runs its
// handlers one after another while the caller waits, so a call stays short enough for an HTTP
// request, and a mistaken selection does bounded harm.
const maxBulk = 100

// Resolution is what a replay or discard of one dead letter came to.
type Resolution string

// The resolutions of Replay and Discard.
const (
	Replayed    Resolution = "replayed"     // the replay's handler succeeded; the letter is replayed
	StillFailed Resolution = "still_failed" // the handler failed; the letter stays failed, its replay counted
	Discarded   Resolution = "discarded"    // the letter is discarded
	NotFound    Resolution = "not_found"    // there is no letter with that id (ErrNotFound)
	Conflict    Resolution = "conflict"     // not failed, or another replay runs (ErrConflict); nothing done
	// Refused: a breaker (or another refusing behavior) turned the replay away before it
	// reached its endpoint; the letter stays failed, no replay counted or recorded. Replay it
	// once the breaker lets calls through (its reset, or its probe's success).
	Refused Resolution = "refused"
)

// BulkResult is the outcome of one id of ReplayMany or DiscardMany.
type BulkResult struct {
	ID         record.DeadLetterID
	Resolution Resolution // empty when it could not be worked on, as Error says
	Error      string     // the replay's error, or why nothing was done
}

// deadLetters is the queue's dead-letter configuration.
type deadLetters struct {
	onDead []func(ctx context.Context, d record.DeadLetter)
	// deadObservers are the DeadObservers of the mediator Start was given (observer.go).
	deadObservers atomic.Pointer[[]DeadObserver]
	log           *zap.Logger
	replayLease   time.Duration
}

func (q *Queue) deadLetterConfig(cfg Config) {
	q.onDead, q.log, q.replayLease = slices.Clone(cfg.OnDead), cfg.Logger, cfg.ReplayLease
	if q.log == nil {
		q.log = zap.L()
	}
	if q.replayLease == 0 {
		q.replayLease = time.Minute
	}
}

func letterOf(d store.DeadLetter) record.DeadLetter {
	return record.DeadLetter{ID: record.DeadLetterID(d.ID), ItemID: record.ItemID(d.ItemID), Source: d.Source, Name: d.Name, Key: d.Key,
		GuardKey: d.GuardKey, Payload: d.Payload, Error: d.Error, Cause: d.Cause, Status: record.DeadLetterStatus(d.Status), RetryCount: d.RetryCount,
		CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt, Metadata: decodeMetadata(d.Metadata)}
}

// letterOf is the package function letterOf, with the endpoint of a letter whose item did not
// name one (WithBreakerKey) found as the scheduler finds it: the key its registration's
// WithBreaker, or Config.Breakers, gives its request. So a letter says what it was for
// whichever way its item was guarded. A payload that no longer decodes, or a key function that
// panics, leaves it empty.
func (q *Queue) letterOf(d store.DeadLetter) (out record.DeadLetter) {
	out = letterOf(d)
	if out.GuardKey != "" || out.ItemID == 0 {
		return out
	}
	reg, key := q.reg.guardOf(out.Name)
	if reg == nil {
		if q.schedCfg.Breakers == nil {
			return out
		}
		key = q.schedCfg.Breakers.KeyOf
	}
	defer func() {
		if recover() != nil {
			out.GuardKey = ""
		}
	}()
	req, err := q.reg.decode(out.Name, d.Payload)
	if err == nil {
		out.GuardKey = key(req)
	}
	return out
}

// announce logs a new dead letter and calls Config.OnDead and the DeadObservers with it.
func (q *Queue) announce(ctx context.Context, d record.DeadLetter) {
	fields := []zap.Field{zap.Int64("dead_letter", int64(d.ID)), zap.Int64("item", int64(d.ItemID)),
		zap.String("source", d.Source), zap.String("name", d.Name), zap.String("error", d.Error)}
	if d.Key != "" {
		fields = append(fields, zap.String("key", d.Key))
	}
	q.log.Warn("durable: dead letter", fields...)
	for _, on := range q.onDead {
		q.tellDead(ctx, d, on)
	}
	if p := q.deadObservers.Load(); p != nil {
		for _, o := range *p {
			q.tellDead(ctx, d, o.OnDead)
		}
	}
}

// tellDead calls one OnDead observer, recovering and logging its panic so the next one runs.
func (q *Queue) tellDead(ctx context.Context, d record.DeadLetter, on func(context.Context, record.DeadLetter)) {
	defer func() {
		if p := recover(); p != nil {
			q.log.Error("durable: OnDead panicked", zap.Int64("dead_letter", int64(d.ID)), zap.Int64("item", int64(d.ItemID)),
				zap.String("panic", fmt.Sprint(p)))
		}
	}()
	on(ctx, d)
}

// notifyDead announces the dead letters of the items a written batch completed as dead. It
// runs after the completions committed, outside their transaction.
func (s *scheduler) notifyDead(batch []store.Completion, results []error) {
	var ids []store.ItemID
	for i, c := range batch {
		if results[i] == nil && c.State == store.StateDead {
			ids = append(ids, c.Fence.ItemID)
		}
	}
	if len(ids) == 0 {
		return
	}
	ctx, cancel := s.storeCtx()
	letters, err := s.q.store.DeadLettersOfItems(ctx, ids)
	cancel()
	if err != nil {
		s.q.log.Error("durable: dead letters stored but not announced", zap.String("instance", s.cfg.InstanceID),
			zap.Int("items", len(ids)), zap.Error(err))
		return
	}
	s.recordExpired(batch, results, letters)
	for _, d := range letters {
		s.q.announce(s.base, s.q.letterOf(d))
	}
}

// recordExpired appends an expired entry to the timelines of the letters of the items in batch
// that their deadlines ended. Should it fail, the letter's error still says so.
func (s *scheduler) recordExpired(batch []store.Completion, results []error, letters []store.DeadLetter) {
	var byItem map[store.ItemID]store.Completion
	for i, c := range batch {
		if results[i] == nil && c.Expired {
			if byItem == nil {
				byItem = map[store.ItemID]store.Completion{}
			}
			byItem[c.Fence.ItemID] = c
		}
	}
	for _, d := range letters {
		c, ok := byItem[d.ItemID]
		if !ok {
			continue
		}
		ctx, cancel := s.storeCtx()
		err := s.q.store.AddEvent(ctx, d.ID, store.Event{Kind: store.EventExpired, StartedAt: c.EndedAt, EndedAt: c.EndedAt,
			Outcome: store.EventOutcome(record.OutcomeExpired), Error: c.Error})
		cancel()
		if err != nil {
			s.q.log.Warn("durable: the expiry of a dead letter's item was not added to its timeline (its error says it)", zap.String("instance", s.cfg.InstanceID),
				zap.Int64("dead_letter", int64(d.ID)), zap.Error(err))
		}
	}
}

// deadLetterCounts counts the letters by status as Stats counts items: up to countLimit at
// every call, a status with more in full every so often (letterCounts), with that count's age.
func (q *Queue) deadLetterCounts(ctx context.Context, now time.Time) (map[record.DeadLetterStatus]int, map[record.DeadLetterStatus]time.Duration, error) {
	counts, over, err := q.store.DeadLetterCounts(ctx, q.countLimit)
	if err != nil {
		return nil, nil, err
	}
	statuses := overKeys(over)
	if len(statuses) == 0 {
		return counts, nil, nil
	}
	full, age, err := q.letterCounts.get(ctx, func(ctx context.Context, statuses []record.DeadLetterStatus) (map[record.DeadLetterStatus]int64, error) {
		n, err := q.store.CountLetterStatuses(ctx, statuses)
		out := make(map[record.DeadLetterStatus]int64, len(n))
		for k, v := range n {
			out[k] = int64(v)
		}
		return out, err
	}, statuses, now)
	if err != nil {
		return counts, nil, err
	}
	ages := make(map[record.DeadLetterStatus]time.Duration, len(statuses))
	for _, st := range statuses {
		counts[st], ages[st] = int(full[st]), age
	}
	return counts, ages, nil
}

// DeadLetters lists the letters f selects, newest first, and how many it selects (see
// DeadLetterPage).
func (q *Queue) DeadLetters(ctx context.Context, f DeadLetterFilter) (DeadLetterPage, error) {
	if f.Status == "" {
		f.Status = record.DeadLetterFailed
	}
	var errs []error
	switch f.Status {
	case record.DeadLetterFailed, record.DeadLetterReplayed, record.DeadLetterDiscarded:
	default:
		errs = append(errs, fmt.Errorf("Status %q is not failed, replayed or discarded", f.Status))
	}
	if f.Limit < 0 || f.Limit > maxDeadLetterLimit {
		errs = append(errs, fmt.Errorf("Limit %d is not between 0 and %d", f.Limit, maxDeadLetterLimit))
	}
	if f.Offset < 0 {
		errs = append(errs, fmt.Errorf("Offset %d is negative", f.Offset))
	}
	errs = append(errs, f.problems("")...)
	if len(errs) > 0 {
		return DeadLetterPage{}, fmt.Errorf("durable: DeadLetters: invalid filter: %w", errors.Join(errs...))
	}
	if f.Limit == 0 {
		f.Limit = defaultDeadLetterLimit
	}
	bound := max(q.countLimit, min(f.Offset, math.MaxInt/2)+f.Limit) // no overflow for any Offset
	ls, total, err := q.store.DeadLetters(ctx, store.DeadLetterFilter{Status: store.DeadLetterStatus(f.Status), Source: f.Source,
		From: f.From, To: f.To, ErrorContains: f.ErrorContains, Limit: f.Limit, Offset: f.Offset, CountLimit: bound})
	if err != nil {
		return DeadLetterPage{}, err
	}
	out := make([]record.DeadLetter, len(ls))
	for i, d := range ls {
		out[i] = q.letterOf(d)
	}
	return DeadLetterPage{Letters: out, Total: min(total, bound), Over: total > bound}, nil
}

// DeadLetter returns a letter and its timeline: its item's attempts, then the
// replays and the discard; an unknown id gets ErrNotFound.
func (q *Queue) DeadLetter(ctx context.Context, id record.DeadLetterID) (record.DeadLetter, []record.TimelineEntry, error) {
	d, found, err := q.store.DeadLetter(ctx, store.DeadLetterID(id))
	if err != nil {
		return record.DeadLetter{}, nil, err
	}
	if !found {
		return record.DeadLetter{}, nil, notFound(id)
	}
	var tl []record.TimelineEntry
	if d.ItemID != 0 {
		as, err := q.store.Attempts(ctx, d.ItemID)
		if err != nil {
			return record.DeadLetter{}, nil, err
		}
		for _, a := range as {
			tl = append(tl, record.TimelineEntry{Kind: record.TimelineAttempt, Number: a.Number, StartedAt: a.StartedAt, EndedAt: a.EndedAt,
				Instance: a.Instance, Outcome: record.Outcome(a.Outcome), Error: a.Error})
		}
	}
	evs, err := q.store.Events(ctx, store.DeadLetterID(id))
	if err != nil {
		return record.DeadLetter{}, nil, err
	}
	for _, e := range evs {
		tl = append(tl, record.TimelineEntry{Kind: record.TimelineKind(e.Kind), StartedAt: e.StartedAt, EndedAt: e.EndedAt, Actor: e.Actor,
			Outcome: eventOutcome[e.Outcome], Error: e.Error, Reason: e.Reason, BulkAction: record.BulkActionID(e.BulkAction)})
	}
	return q.letterOf(d), tl, nil
}

// eventOutcome maps a stored event's outcome to the Outcome of its dispatch (none for a
// discard).
var eventOutcome = map[store.EventOutcome]record.Outcome{
	store.OutcomeReplayed:                      record.OutcomeSucceeded,
	store.OutcomeStillFailed:                   record.OutcomeFailed,
	store.EventOutcome(store.OutcomeAbandoned): record.OutcomeAbandoned,
	store.EventOutcome(record.OutcomeExpired):  record.OutcomeExpired,
}

func notFound(id record.DeadLetterID) error {
	return &NotFoundError{What: "dead letter", Key: strconv.FormatInt(int64(id), 10)}
}

func conflict(d store.DeadLetter, now time.Time) error {
	if d.Status == store.DeadLetterFailed && d.ReplayUntil.After(now) {
		return fmt.Errorf("durable: dead letter %d is being replayed (lease until %s): %w", d.ID, d.ReplayUntil.Format(time.RFC3339), ErrConflict)
	}
	if d.Status == store.DeadLetterFailed {
		// The lease was released between the refused update and this read: another replay ran
		// (and failed) at the same moment.
		return fmt.Errorf("durable: dead letter %d was being replayed at the same moment: %w", d.ID, ErrConflict)
	}
	return fmt.Errorf("durable: dead letter %d is %s, not failed: %w", d.ID, d.Status, ErrConflict)
}

// finishTimeout bounds each write of a replay's or discard's outcome, which is made past the
// caller's cancellation: what the handler did is recorded.
const finishTimeout = 10 * time.Second

// The backoff between writes of a replay's outcome that failed: short at first (a connection
// dropped under a live database is replaced at once), then at most a second apart, so a
// database that restarts takes the outcome within a second of being back, without a storm of
// statements while it is down.
const (
	recordRetryFirst = 20 * time.Millisecond
	recordRetryMax   = time.Second
)

// Replay runs the request of failed letter id again through sender while the caller waits, as
// the scheduler runs an item (one attempt, mediator.Unattended, SingleAttempt and Stored), so its
// handler must be idempotent. actor, required, names who replays. Success returns Replayed; a
// failure StillFailed with the handler's error; a letter not failed or being replayed Conflict
// (ErrConflict); an unknown id NotFound (ErrNotFound). When ctx ends while the handler runs, the
// letter stays failed, the timeline gets an abandoned replay, and ctx's error is returned. When
// this instance cannot run the request, nothing is recorded.
//
// The outcome is written past ctx's end and through database failures, under the replay's lease
// (Config.ReplayLease); if the lease is lost first, Replay returns ErrOutcomeUnknown and the
// timeline shows an abandoned replay, never a failure. Concurrent replays of a letter run its
// handler once. No transaction is held while the handler runs, so it may use the database.
func (q *Queue) Replay(ctx context.Context, sender mediator.Sender, id record.DeadLetterID, actor string) (Resolution, error) {
	if err := checkSender("Replay", sender); err != nil {
		return "", err
	}
	if actor == "" {
		return "", errors.New("durable: Replay: actor is required: the timeline records who replayed")
	}
	return q.replay(ctx, context.WithoutCancel(ctx), sender, id, actor, 0)
}

// replay is Replay, as a part of bulk action bulk when it is not 0: the events it appends name
// the action, and the transaction that settles the letter counts it in the action's totals.
// finish bounds the writes made past ctx's end (the outcome, the letter's release), each also
// bounded by finishTimeout: Replay's outlive its caller's cancellation, a bulk action's end with
// its scheduler's shutdown grace.
func (q *Queue) replay(ctx, finish context.Context, sender mediator.Sender, id record.DeadLetterID, actor string, bulk int64) (Resolution, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	owner := replayToken()
	now := q.clock.Now()
	d, res, err := q.store.LeaseReplay(ctx, store.DeadLetterID(id), owner, actor, now, now.Add(q.replayLease))
	switch {
	case err != nil:
		return "", err
	case res == store.Missing:
		return NotFound, notFound(id)
	case res == store.Busy:
		return Conflict, conflict(d, now)
	}
	lease := q.holdReplay(ctx, d.ID, owner)
	defer lease.stop()
	started := q.clock.Now()
	herr := q.runReplay(ctx, sender, d, owner)
	ended := q.clock.Now()
	if herr != nil && (errors.Is(herr, ErrUnknownRequest) || q.cannotRun(herr, d.Name)) {
		// This instance cannot run the request (another may): no handler ran. Free the letter
		// and record nothing.
		done, cancel := context.WithTimeout(finish, finishTimeout)
		defer cancel()
		if err := q.store.ReleaseReplay(done, d.ID, owner); err != nil {
			return "", errors.Join(herr, err)
		}
		return "", herr
	}
	if herr != nil && ctx.Err() == nil && behaviors.IsRefusal(herr) {
		// Turned away before the endpoint (its breaker is open): nothing ran that could have
		// failed, so nothing is recorded and no replay is counted.
		done, cancel := context.WithTimeout(finish, finishTimeout)
		defer cancel()
		if err := q.store.ReleaseReplay(done, d.ID, owner); err != nil {
			return "", errors.Join(herr, err)
		}
		return Refused, herr
	}
	if herr != nil && ctx.Err() != nil {
		// The caller gave up while the handler ran: the request did not fail, so the letter
		// stays as it was (no retry counted), but the handler may have had effects, so the
		// timeline says a replay ran whose outcome is not known.
		done, cancel := context.WithTimeout(finish, finishTimeout)
		defer cancel()
		ev := store.Event{Kind: store.EventReplay, Actor: actor, StartedAt: started, EndedAt: ended, BulkAction: bulk,
			Outcome: store.EventOutcome(store.OutcomeAbandoned), Error: "outcome unknown: the replay's caller gave up while its handler ran (" + ctx.Err().Error() + "); the handler may have had effects; it returned: " + herr.Error()}
		if err := q.store.AbandonReplay(done, d.ID, owner, ev); err != nil {
			return "", errors.Join(herr, err)
		}
		return "", fmt.Errorf("durable: replay of dead letter %d cancelled: %w (the handler returned: %w)", id, ctx.Err(), herr)
	}
	ev := store.Event{Kind: store.EventReplay, Actor: actor, StartedAt: started, EndedAt: ended, Outcome: store.OutcomeReplayed, BulkAction: bulk}
	if herr != nil {
		ev.Outcome, ev.Error = store.OutcomeStillFailed, herr.Error()
	}
	applied, err := q.recordReplay(finish, lease, herr == nil, ev)
	switch {
	case err != nil:
		did := "its handler succeeded"
		if herr != nil {
			did = fmt.Sprintf("its handler failed (%v)", herr)
		}
		return "", fmt.Errorf("durable: dead letter %d: the replay ran and %s, but its outcome could not be recorded before its lease was gone, so the outcome is unknown to the queue: the letter stays failed, and its timeline will show the replay as abandoned, outcome unknown, once the lease runs out: %w: %w",
			id, did, ErrOutcomeUnknown, err)
	case !applied:
		return Conflict, fmt.Errorf("durable: dead letter %d: the replay ran (error: %v) but its lease ran out first and another replay or discard took the letter; nothing was recorded: %w",
			id, herr, ErrConflict)
	case herr != nil:
		return StillFailed, herr
	}
	return Replayed, nil
}

// cannotRun reports whether herr, a replay's error, says the sender has no handler for the
// request of letter name (or was not built): the handler did not run.
func (q *Queue) cannotRun(herr error, name string) bool {
	if herr == mediator.ErrNotBuilt { // compared, not matched in the chain: a handler that wrapped one did run
		return true
	}
	e, ok := errors.AsType[*mediator.NoHandlerError](herr)
	if !ok {
		return false
	}
	reg := q.reg.lookupType(e.Type)
	return reg != nil && reg.name == name
}

// recordReplay writes the outcome of a replay that ran (see Store.FinishReplay), trying again
// with backoff while the write fails and the replay's lease may still be held. It returns the
// last error once the lease is gone, or once ctx, which bounds the writes, has ended. A write
// whose answer was lost may have committed: when a later one finds the lease cleared, the
// timeline says whether it did.
func (q *Queue) recordReplay(ctx context.Context, lease *replayHold, ok bool, ev store.Event) (bool, error) {
	delay := recordRetryFirst
	for attempt := 1; ; attempt++ {
		// A try that hangs ends when the lease may: the caller waits at most about ReplayLease
		// for the outcome, whatever finishTimeout allows one write.
		wctx, cancel := context.WithTimeout(ctx, min(finishTimeout, max(lease.left(), minRecordTry)))
		applied, err := q.store.FinishReplay(wctx, lease.id, lease.owner, ok, ev)
		if err == nil && !applied && attempt > 1 {
			applied, err = q.store.ReplayRecorded(wctx, lease.id, ev)
		}
		cancel()
		if err == nil {
			if attempt > 1 {
				q.log.Info("durable: replay outcome recorded", zap.Int64("dead_letter", int64(lease.id)), zap.Int("tries", attempt))
			}
			return applied, nil
		}
		if lease.gone() {
			q.log.Error("durable: replay outcome not recorded: its lease is gone; the outcome is unknown", zap.Int64("dead_letter", int64(lease.id)),
				zap.String("outcome", string(ev.Outcome)), zap.Int("tries", attempt), zap.Error(err))
			return false, err
		}
		if ctx.Err() != nil {
			q.log.Error("durable: replay outcome not recorded: its scheduler stopped (shutdown grace over); the outcome is unknown", zap.Int64("dead_letter", int64(lease.id)),
				zap.String("outcome", string(ev.Outcome)), zap.Int("tries", attempt), zap.Error(err))
			return false, err
		}
		if attempt == 1 {
			q.log.Warn("durable: replay outcome not recorded; trying again under the replay lease", zap.Int64("dead_letter", int64(lease.id)),
				zap.String("outcome", string(ev.Outcome)), zap.Error(err))
		}
		wait, stop := q.clock.After(delay)
		select {
		case <-wait:
		case <-ctx.Done():
		}
		stop()
		delay = min(2*delay, recordRetryMax)
	}
}

// replayHold keeps a replay's lease on its letter extended, every third of ReplayLease, while
// the handler runs and its outcome is written.
type replayHold struct {
	q     *Queue
	id    store.DeadLetterID
	owner string
	end   chan struct{}
	ended chan struct{}

	mu    sync.Mutex
	until time.Time // when the lease runs out unless extended (real time: it bounds a wait)
	lost  bool      // an extension found the lease held by another replay, or the letter settled
}

// holdReplay starts extending owner's lease on letter id, just taken; stop ends it.
func (q *Queue) holdReplay(ctx context.Context, id store.DeadLetterID, owner string) *replayHold {
	h := &replayHold{q: q, id: id, owner: owner, end: make(chan struct{}), ended: make(chan struct{}),
		until: time.Now().Add(q.replayLease)}
	ctx = context.WithoutCancel(ctx)
	go func() {
		defer close(h.ended)
		t := time.NewTicker(q.replayLease / 3)
		defer t.Stop()
		for {
			select {
			case <-h.end:
				return
			case <-t.C:
				h.extend(ctx)
			}
		}
	}()
	return h
}

func (h *replayHold) extend(ctx context.Context) {
	ectx, cancel := context.WithTimeout(ctx, h.q.replayLease/3)
	defer cancel()
	sent := time.Now()
	held, err := h.q.store.ExtendReplay(ectx, h.id, h.owner, h.q.clock.Now().Add(h.q.replayLease))
	if err != nil {
		h.q.log.Warn("durable: replay lease not extended", zap.Int64("dead_letter", int64(h.id)), zap.Error(err))
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if held {
		h.until = sent.Add(h.q.replayLease)
	} else {
		h.lost = true
	}
}

// gone reports whether the lease is lost to this replay: another took it, or it has run out.
// left returns how long the lease runs unless extended: 0 once it is gone.
func (h *replayHold) left() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lost {
		return 0
	}
	return max(time.Until(h.until), 0)
}

// minRecordTry is the shortest time one write of a replay's outcome is given, so a lease about
// to run out still gets one real try (the write is fenced by owner: it lands if no other
// replay took the letter).
const minRecordTry = 250 * time.Millisecond

func (h *replayHold) gone() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lost || !time.Now().Before(h.until)
}

func (h *replayHold) stop() {
	close(h.end)
	<-h.ended
}

// runReplay decodes the letter's request and sends it, FromContext telling the handler which
// item, letter and replay it runs.
func (q *Queue) runReplay(ctx context.Context, sender mediator.Sender, d store.DeadLetter, owner string) error {
	req, err := q.reg.decode(d.Name, d.Payload)
	if err != nil {
		return err
	}
	ctx = q.withMetadata(ctx, d.Metadata, q.log, record.ItemID(d.ItemID), d.Name)
	ctx = q.withDispatch(ctx, req, Dispatch{ItemID: record.ItemID(d.ItemID), Name: d.Name, DeadLetter: record.DeadLetterID(d.ID), Replay: owner}, q.log)
	return executor.Send(mediator.WithMarks(ctx, req, mediator.Unattended|mediator.SingleAttempt|mediator.Stored), sender, req)
}

func replayToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "replay-" + hex.EncodeToString(b[:])
}

// Discard retires failed letter id unreplayed; actor and reason are required (an
// audit says who and why). Conflict and NotFound as for Replay.
func (q *Queue) Discard(ctx context.Context, id record.DeadLetterID, actor, reason string) (Resolution, error) {
	var errs []error
	if actor == "" {
		errs = append(errs, errors.New("actor is required: the timeline records who discarded"))
	}
	if reason == "" {
		errs = append(errs, errors.New("reason is required: the timeline records why the letter was discarded"))
	}
	if len(errs) > 0 {
		return "", fmt.Errorf("durable: Discard: %w", errors.Join(errs...))
	}
	return q.discard(ctx, id, actor, reason, 0)
}

// discard is Discard, as a part of bulk action bulk when it is not 0 (see replay).
func (q *Queue) discard(ctx context.Context, id record.DeadLetterID, actor, reason string, bulk int64) (Resolution, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	now := q.clock.Now()
	res, err := q.store.Discard(ctx, store.DeadLetterID(id), store.Event{Kind: store.EventDiscard, Actor: actor, StartedAt: now,
		EndedAt: now, Outcome: store.OutcomeDiscarded, Reason: reason, BulkAction: bulk})
	switch {
	case err != nil:
		return "", err
	case res == store.Missing:
		return NotFound, notFound(id)
	case res == store.Busy:
		d, found, err := q.store.DeadLetter(ctx, store.DeadLetterID(id))
		if err != nil || !found {
			return Conflict, fmt.Errorf("durable: dead letter %d: %w", id, ErrConflict)
		}
		return Conflict, conflict(d, now)
	}
	return Discarded, nil
}

// ReplayMany replays ids in turn (see Replay), one result per id in order; one
// failure never stops the others. Over 100 ids get ErrTooMany, doing nothing.
// When ctx ends, the letters not yet replayed get its error, returned too.
func (q *Queue) ReplayMany(ctx context.Context, sender mediator.Sender, ids []record.DeadLetterID, actor string) ([]BulkResult, error) {
	if err := checkSender("ReplayMany", sender); err != nil {
		return nil, err
	}
	if actor == "" {
		return nil, errors.New("durable: ReplayMany: actor is required: the timeline records who replayed")
	}
	return bulk(ctx, "ReplayMany", ids, func(id record.DeadLetterID) (Resolution, error) { return q.Replay(ctx, sender, id, actor) })
}

// DiscardMany discards ids (see Discard), one result per id in order; one
// failure never stops the others. Over 100 ids get ErrTooMany, doing nothing.
func (q *Queue) DiscardMany(ctx context.Context, ids []record.DeadLetterID, actor, reason string) ([]BulkResult, error) {
	if actor == "" || reason == "" {
		_, err := q.Discard(ctx, 0, actor, reason)
		return nil, err
	}
	return bulk(ctx, "DiscardMany", ids, func(id record.DeadLetterID) (Resolution, error) { return q.Discard(ctx, id, actor, reason) })
}

func bulk(ctx context.Context, op string, ids []record.DeadLetterID, one func(record.DeadLetterID) (Resolution, error)) ([]BulkResult, error) {
	if len(ids) > maxBulk {
		return nil, fmt.Errorf("durable: %s: %d ids, at most %d at once: %w", op, len(ids), maxBulk, ErrTooMany)
	}
	seen := make(map[record.DeadLetterID]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			// Replaying a letter twice in one call would run its request twice.
			return nil, fmt.Errorf("durable: %s: dead letter %d appears more than once; nothing was done", op, id)
		}
		seen[id] = true
	}
	out := make([]BulkResult, len(ids))
	for i, id := range ids {
		out[i].ID = id
		if err := ctx.Err(); err != nil {
			for j := i; j < len(ids); j++ {
				out[j] = BulkResult{ID: ids[j], Error: err.Error()}
			}
			return out, err
		}
		res, err := one(id)
		out[i].Resolution = res
		if err != nil {
			out[i].Error = err.Error()
		}
	}
	return out, nil
}
