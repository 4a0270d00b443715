package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
)

// BulkActionSpec says what a bulk action does (Queue.StartBulkAction).
type BulkActionSpec struct {
	Kind record.BulkActionKind // required: record.BulkReplay or record.BulkDiscard
	// Filter selects the letters: only failed ones can be replayed or discarded, so its Status
	// must be empty or failed; Limit and Offset must be zero (the action takes every match).
	// The letters that die after the action started are not swept in.
	Filter DeadLetterFilter
	// Reason says why; required for a discard (each letter's discard records it) unless it is
	// a dry run, optional for a replay. The audit entry keeps it.
	Reason string
	// Rate is the most letters per second the action settles. Zero means 50: an endpoint that
	// just recovered takes a backlog of thousands within minutes, without the burst of a tight
	// loop that could knock it over again. At most 100,000, which no action reaches (a letter
	// takes a handler call and a few database round trips): set it that high to run unthrottled.
	// At least one letter a day (about 1.16e-5): slower is a schedule's pace, not a throttle's.
	Rate float64
	// MaxInFlight is the most letters replayed at once; zero means 4, at most 64. While the
	// breaker of a letter's key is half-open, no more letters of that key run than it has free
	// probe slots.
	MaxInFlight int
}

// Defaults and limits of BulkActionSpec.
const (
	defaultBulkRate     = 50
	defaultBulkInFlight = 4
	maxBulkInFlight     = 64
	// maxBulkRate bounds Rate: a letter takes a handler call and a few database round trips,
	// so a higher rate is never reached; it is what "unthrottled" means, and refusing more
	// keeps a stored rate a finite number.
	maxBulkRate = 100000
	// minBulkRate is one letter a day: below it the time between two letters is longer than a
	// day, and below about 1e-10 a second it overflows a time.Duration (an action then ran
	// unthrottled). A slower pace is a schedule's job, not a throttle's.
	minBulkRate       = 1.0 / (24 * 60 * 60)
	bulkSampleSize    = 10  // the letters a dry run shows
	bulkBatchSize     = 100 // letters read at once; the cursor moves when a batch is settled
	maxBulkActionList = 100
)

// BulkAction is a bulk action on dead letters as stored: what it does, where it stands and
// its totals per outcome.
type BulkAction struct {
	ID     record.BulkActionID // 0 for a dry run
	Kind   record.BulkActionKind
	Filter DeadLetterFilter
	Reason string
	Actor  string // who started it
	State  record.BulkActionState
	// Rate and MaxInFlight are the throttle it runs under (defaults applied).
	Rate        float64
	MaxInFlight int
	// ResetBreaker is the breaker key reset when it started (ResetBreakerFirst); empty if none.
	ResetBreaker string
	// Matched is how many letters the filter selected when it started (for a dry run: now).
	Matched int64
	// Cursor is the highest letter id below which every selected letter is settled.
	Cursor record.DeadLetterID
	Totals record.BulkActionTotals
	// WaitingKey is the breaker key it waits on (State BulkPausedOnBreaker, or BulkPaused on a
	// paused key); empty otherwise.
	WaitingKey string
	// Error says why it failed, or what it waits for; empty otherwise.
	Error string
	// Instance is the scheduler running it; empty when none holds it.
	Instance                         string
	CreatedAt, UpdatedAt, FinishedAt time.Time
	// Sample is, for a dry run, the newest letters the filter selects (at most 10); nil
	// otherwise.
	Sample []record.DeadLetter
}

// BulkActionOption tweaks one StartBulkAction or StartItemBulkAction call.
type BulkActionOption func(*bulkOptions)

type bulkOptions struct {
	dryRun  bool
	reg     breakerResetter
	resetOf string
}

// breakerResetter is what ResetBreakerFirst needs of a registry (a *breaker.Registry).
type breakerResetter interface{ Reset(key string) error }

// DryRun makes StartBulkAction (StartItemBulkAction) validate the spec and answer how many
// letters (items) it would take and a sample of them, storing and doing nothing.
func DryRun() BulkActionOption { return func(o *bulkOptions) { o.dryRun = true } }

// ResetBreakerFirst makes StartBulkAction reset the breaker of key in reg (a
// *breaker.Registry) before the action starts ("reset the breaker and replay its letters" as
// one audited action), so its first replays are not refused. An unknown key is an error
// (breaker.ErrUnknown) and nothing is done.
func ResetBreakerFirst(reg interface{ Reset(key string) error }, key string) BulkActionOption {
	return func(o *bulkOptions) { o.reg, o.resetOf = reg, key }
}

// bulkFilter is DeadLetterFilter as an action stores it.
type bulkFilter struct {
	Source        string    `json:"source,omitempty"`
	From          time.Time `json:"from,omitzero"`
	To            time.Time `json:"to,omitzero"`
	ErrorContains string    `json:"error_contains,omitempty"`
}

func storeFilter(f DeadLetterFilter) store.DeadLetterFilter {
	return store.DeadLetterFilter{Status: store.DeadLetterFailed, Source: f.Source, From: f.From, To: f.To, ErrorContains: f.ErrorContains}
}

// validate checks sp and applies its defaults; every problem is named.
func (sp *BulkActionSpec) validate(actor string, o bulkOptions) error {
	var errs []error
	if strings.TrimSpace(actor) == "" {
		errs = append(errs, errors.New("actor is required: the audit log records who started it"))
	}
	switch sp.Kind {
	case record.BulkReplay:
	case record.BulkDiscard:
		if strings.TrimSpace(sp.Reason) == "" && !o.dryRun {
			errs = append(errs, errors.New("Reason is required for a discard: each letter's timeline records why"))
		}
	case "":
		errs = append(errs, errors.New("Kind is required: replay or discard"))
	default:
		errs = append(errs, fmt.Errorf("Kind %q is not replay or discard", sp.Kind))
	}
	f := sp.Filter
	if f.Status != "" && f.Status != record.DeadLetterFailed {
		errs = append(errs, fmt.Errorf("Filter.Status %q: only failed letters can be replayed or discarded", f.Status))
	}
	if f.Limit != 0 || f.Offset != 0 {
		errs = append(errs, errors.New("Filter.Limit and Filter.Offset must be zero: an action takes every letter the filter selects"))
	}
	errs = append(errs, f.problems("Filter.")...)
	switch {
	case sp.Rate < 0 || sp.Rate != sp.Rate || sp.Rate > maxBulkRate:
		errs = append(errs, fmt.Errorf("Rate %v is not a number of letters per second between 0 and %d", sp.Rate, maxBulkRate))
	case sp.Rate > 0 && sp.Rate < minBulkRate:
		errs = append(errs, fmt.Errorf("Rate %v is below one letter a day (%.3g a second)", sp.Rate, minBulkRate))
	}
	if sp.MaxInFlight < 0 || sp.MaxInFlight > maxBulkInFlight {
		errs = append(errs, fmt.Errorf("MaxInFlight %d is not between 0 and %d", sp.MaxInFlight, maxBulkInFlight))
	}
	if o.resetOf != "" || o.reg != nil {
		switch {
		case o.reg == nil:
			errs = append(errs, errors.New("ResetBreakerFirst: the registry is nil"))
		case o.resetOf == "":
			errs = append(errs, errors.New("ResetBreakerFirst: the key is empty"))
		case sp.Kind != record.BulkReplay:
			errs = append(errs, errors.New("ResetBreakerFirst goes with a replay, not a discard"))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("durable: StartBulkAction: %w: %w", ErrInvalidBulkAction, errors.Join(errs...))
	}
	sp.Filter.Status = record.DeadLetterFailed
	if sp.Rate == 0 {
		sp.Rate = defaultBulkRate
	}
	if sp.MaxInFlight == 0 {
		sp.MaxInFlight = defaultBulkInFlight
	}
	return nil
}

// StartBulkAction stores a bulk action that replays or discards every failed letter
// spec.Filter selects, audited as one action with its own id, and returns it queued. A
// running scheduler of the queue (Queue.Start, on any instance) takes it up under a lease and
// works through the letters in id order, throttled (spec.Rate, spec.MaxInFlight), each replay as
// Queue.Replay makes it (so handlers must be idempotent), its timeline naming the action.
// Before each replay it asks the breaker of the letter's key: while the breaker refuses, the
// action waits (record.BulkPausedOnBreaker) and the letter stays failed, untouched; so it
// does while the letter's request name or breaker key is paused (Queue.Pause; record.BulkPaused).
// An instance that cannot run a letter's request hands the action back to the others. The
// action survives its instance: if the process dies, another takes it over when its lease has
// run out and goes on from where it stood. actor, required, names who started it.
//
// With DryRun it only counts the letters and returns a sample. With ResetBreakerFirst the
// breaker is reset first.
func (q *Queue) StartBulkAction(ctx context.Context, spec BulkActionSpec, actor string, opts ...BulkActionOption) (BulkAction, error) {
	var o bulkOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := spec.validate(actor, o); err != nil {
		return BulkAction{}, err
	}
	f := storeFilter(spec.Filter)
	matched, maxID, err := q.store.CountDeadLetters(ctx, f)
	if err != nil {
		return BulkAction{}, err
	}
	now := q.clock.Now()
	a := BulkAction{Kind: spec.Kind, Filter: spec.Filter, Reason: spec.Reason, Actor: actor, Rate: spec.Rate, MaxInFlight: spec.MaxInFlight,
		ResetBreaker: o.resetOf, Matched: matched, CreatedAt: now, UpdatedAt: now}
	if o.dryRun {
		// The dry run answers what the action would meet: a breaker the registry does not know
		// is refused now, not after the operator confirmed.
		if g, ok := o.reg.(interface {
			Get(key string) (breaker.Snapshot, error)
		}); ok {
			if _, err := g.Get(o.resetOf); err != nil {
				return BulkAction{}, fmt.Errorf("durable: StartBulkAction: reset breaker %q: %w", o.resetOf, err)
			}
		}
		f.Limit = bulkSampleSize
		sample, _, err := q.store.DeadLetters(ctx, f)
		if err != nil {
			return BulkAction{}, err
		}
		a.Sample = make([]record.DeadLetter, len(sample))
		for i, d := range sample {
			a.Sample[i] = q.letterOf(d)
		}
		return a, nil
	}
	if o.reg != nil {
		if err := o.reg.Reset(o.resetOf); err != nil {
			return BulkAction{}, fmt.Errorf("durable: StartBulkAction: reset breaker %q: %w", o.resetOf, err)
		}
	}
	fj, err := json.Marshal(bulkFilter{Source: spec.Filter.Source, From: spec.Filter.From, To: spec.Filter.To, ErrorContains: spec.Filter.ErrorContains})
	if err != nil {
		return BulkAction{}, err
	}
	action := record.AuditBulkReplay
	if spec.Kind == record.BulkDiscard {
		action = record.AuditBulkDiscard
	}
	detail := fmt.Sprintf("filter %s; %d letters", fj, matched)
	if o.resetOf != "" {
		detail += fmt.Sprintf("; breaker %q reset first", o.resetOf)
	}
	if spec.Reason != "" {
		detail += "; reason: " + spec.Reason
	}
	id, err := q.store.InsertBulkAction(ctx, store.BulkActionRow{Kind: string(spec.Kind), Filter: string(fj), Reason: spec.Reason, Actor: actor,
		State: store.BulkQueued, Rate: spec.Rate, InFlight: spec.MaxInFlight, ResetBreaker: o.resetOf, MaxLetter: maxID, Matched: matched, CreatedAt: now},
		store.AuditRow{At: now, Actor: actor, Action: string(action), TargetKind: string(record.AuditTargetBulkAction), Detail: detail, Outcome: record.AuditDone})
	if errors.Is(err, ErrBulkActionActive) {
		return BulkAction{}, fmt.Errorf("durable: StartBulkAction: %w", err)
	}
	if err != nil {
		return BulkAction{}, err
	}
	if s := q.running.Load(); s != nil && s.bulk != nil {
		signal(s.bulk.wake)
	}
	a.ID, a.State = record.BulkActionID(id), record.BulkQueued
	return a, nil
}

func bulkActionOf(b store.BulkActionRow) BulkAction {
	var f bulkFilter
	_ = json.Unmarshal([]byte(b.Filter), &f) // written by StartBulkAction
	return BulkAction{ID: record.BulkActionID(b.ID), Kind: record.BulkActionKind(b.Kind),
		Filter: DeadLetterFilter{Status: record.DeadLetterFailed, Source: f.Source, From: f.From, To: f.To, ErrorContains: f.ErrorContains},
		Reason: b.Reason, Actor: b.Actor, State: record.BulkActionState(b.State), Rate: b.Rate, MaxInFlight: b.InFlight, ResetBreaker: b.ResetBreaker,
		Matched: b.Matched, Cursor: record.DeadLetterID(b.Cursor),
		Totals:     record.BulkActionTotals{Replayed: b.Replayed, StillFailed: b.StillFailed, Discarded: b.Discarded, Unknown: b.Unknown, Skipped: b.Skipped},
		WaitingKey: b.WaitingKey, Error: b.Error, Instance: b.LeaseOwner, CreatedAt: b.CreatedAt, UpdatedAt: b.UpdatedAt, FinishedAt: b.FinishedAt}
}

// BulkAction returns the action on dead letters id; an unknown id, or one of an action on items
// (ItemBulkAction), gets ErrNotFound.
func (q *Queue) BulkAction(ctx context.Context, id record.BulkActionID) (BulkAction, error) {
	b, found, err := q.store.BulkAction(ctx, int64(id))
	if err != nil {
		return BulkAction{}, err
	}
	if !found || record.BulkActionKind(b.Kind).OnItems() {
		return BulkAction{}, bulkNotFound(id)
	}
	return bulkActionOf(b), nil
}

// BulkActions lists the actions on dead letters with ids below before (all when 0), newest first, at most
// limit: zero means 20, at most 100.
func (q *Queue) BulkActions(ctx context.Context, before record.BulkActionID, limit int) ([]BulkAction, error) {
	if limit < 0 || limit > maxBulkActionList {
		return nil, fmt.Errorf("durable: BulkActions: limit %d is not between 0 and %d", limit, maxBulkActionList)
	}
	if limit == 0 {
		limit = 20
	}
	rows, err := q.store.BulkActions(ctx, int64(before), limit, false)
	if err != nil {
		return nil, err
	}
	out := make([]BulkAction, len(rows))
	for i, b := range rows {
		out[i] = bulkActionOf(b)
	}
	return out, nil
}

// CancelBulkAction stops the action on dead letters id: the letters it settled stay settled, a
// letter being replayed finishes (its handler is not interrupted), and no other is taken. actor
// is required; reason is recorded in the audit entry. An action already finished is left as it
// is (the entry says no change); an unknown id, or one of an action on items
// (CancelItemBulkAction), gets ErrNotFound.
func (q *Queue) CancelBulkAction(ctx context.Context, id record.BulkActionID, actor, reason string) (BulkAction, error) {
	if actor == "" {
		return BulkAction{}, errors.New("durable: CancelBulkAction: actor is required: the audit log records who cancelled")
	}
	if _, err := q.BulkAction(ctx, id); err != nil {
		return BulkAction{}, err
	}
	b, err := q.cancelBulkAction(ctx, id, actor, reason)
	if err != nil {
		return BulkAction{}, err
	}
	return bulkActionOf(b), nil
}

// cancelBulkAction ends action id (of either kind) as cancelled, audited, and stops its local
// run; an item action's entry carries its totals.
func (q *Queue) cancelBulkAction(ctx context.Context, id record.BulkActionID, actor, reason string) (store.BulkActionRow, error) {
	now := q.clock.Now()
	b, found, cancelled, err := q.store.CancelBulkAction(ctx, int64(id), now, func(cancelled bool, b store.BulkActionRow) store.AuditRow {
		r := store.AuditRow{At: now, Actor: actor, Action: string(record.AuditCancelBulkAction), TargetKind: string(record.AuditTargetBulkAction),
			Target: fmt.Sprint(id), Detail: reason, Outcome: record.AuditDone}
		if !cancelled {
			r.Outcome, r.Detail = record.AuditNoChange, strings.TrimPrefix(reason+"; ", "; ")+"the action had already ended: "+b.State
		}
		if record.BulkActionKind(b.Kind).OnItems() {
			r.Detail = strings.TrimPrefix(r.Detail+"; ", "; ") + itemBulkTotals(b)
		}
		return r
	})
	if err != nil {
		return store.BulkActionRow{}, err
	}
	if !found {
		return store.BulkActionRow{}, bulkNotFound(id)
	}
	if s := q.running.Load(); cancelled && s != nil && s.bulk != nil {
		s.bulk.cancelled(int64(id))
	}
	return b, nil
}

// bulkNotFound says there is no bulk action of that id.
func bulkNotFound(id record.BulkActionID) error {
	return &NotFoundError{What: "bulk action", Key: strconv.FormatInt(int64(id), 10)}
}
