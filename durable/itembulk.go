package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
)

// ItemBulkActionSpec says what a bulk action on pending items does (Queue.StartItemBulkAction).
type ItemBulkActionSpec struct {
	// Kind is required: record.BulkCancelItems, record.BulkRunItemsNow or
	// record.BulkSetItemPriority.
	Kind record.BulkActionKind
	// Filter selects the items as it does for Queue.Items (Name, Key, Parked, From, To). Only
	// pending items can be cancelled, run now or given a priority, so its State must be empty or
	// pending; After and Limit must be zero (the action takes every match). The items enqueued
	// after the action started are not swept in.
	Filter ItemFilter
	// Priority is the priority a set_priority action gives each item, 0 to MaxPriority (0, the
	// lowest, is valid: it undoes a raise). It must be zero for the other kinds.
	Priority int
	// Reason says why; required for a cancel (as Queue.Cancel requires one) unless it is a dry
	// run, optional otherwise. The audit entry keeps it.
	Reason string
	// Rate is the most items per second the action changes: zero means 50, as for an action on
	// dead letters (BulkActionSpec.Rate), so that a run-now of thousands of parked items reaches
	// their endpoint as a stream, not as one burst; the same limits apply (at most 100,000,
	// which is unthrottled; at least one item a day).
	Rate float64
}

// ItemBulkAction is a bulk action on pending items as stored: what it does, where it stands and
// its totals.
type ItemBulkAction struct {
	ID       record.BulkActionID // 0 for a dry run
	Kind     record.BulkActionKind
	Filter   ItemFilter
	Priority int // the priority a set_priority action gives; 0 for the other kinds
	Reason   string
	Actor    string // who started it
	State    record.BulkActionState
	Rate     float64 // items per second at most (the default applied)
	// Matched is how many pending items the filter selected when it started (for a dry run: now).
	Matched int64
	// Cursor is the id of the last item the action reached: it works in id order, so every
	// selected item with an id up to it is changed or skipped.
	Cursor record.ItemID
	// MaxItem is the highest item id when it started: the items enqueued later are not swept in.
	MaxItem record.ItemID
	// Changed counts the items it cancelled, made due or gave the priority, each in the
	// transaction that changed it.
	Changed int64
	// Skipped counts the items it matched that it did not change: claimed (a running handler is
	// never interrupted), finished or cancelled by others before it reached them, or, for a
	// run-now, held back by a pause (Queue.Pause; a run-now does not bypass a pause).
	Skipped int64
	// Error says why it failed; empty otherwise.
	Error string
	// Instance is the scheduler running it; empty when none holds it.
	Instance                         string
	CreatedAt, UpdatedAt, FinishedAt time.Time
	// Sample is, for a dry run, the first items (in id order) the filter selects, at most 10;
	// nil otherwise.
	Sample []record.Item
}

// itemBulkFilter is ItemFilter as an item action stores it.
type itemBulkFilter struct {
	Name   string    `json:"name,omitempty"`
	Key    string    `json:"key,omitempty"`
	Parked bool      `json:"parked,omitempty"`
	From   time.Time `json:"from,omitzero"`
	To     time.Time `json:"to,omitzero"`
}

func (f itemBulkFilter) itemFilter() ItemFilter {
	return ItemFilter{State: record.StatePending, Name: f.Name, Key: f.Key, Parked: f.Parked || f.Key != "", From: f.From, To: f.To}
}

// validate checks sp and applies its defaults; every problem is named.
func (sp *ItemBulkActionSpec) validate(actor string, o bulkOptions) error {
	var errs []error
	if strings.TrimSpace(actor) == "" {
		errs = append(errs, errors.New("actor is required: the audit log records who started it"))
	}
	switch sp.Kind {
	case record.BulkCancelItems:
		if strings.TrimSpace(sp.Reason) == "" && !o.dryRun {
			errs = append(errs, errors.New("Reason is required for a cancel: the audit log records why"))
		}
	case record.BulkRunItemsNow:
	case record.BulkSetItemPriority:
		if sp.Priority < 0 || sp.Priority > MaxPriority {
			errs = append(errs, fmt.Errorf("Priority %d is out of range 0..%d", sp.Priority, MaxPriority))
		}
	case "":
		errs = append(errs, errors.New("Kind is required: cancel, run_now or set_priority"))
	default:
		errs = append(errs, fmt.Errorf("Kind %q is not cancel, run_now or set_priority", sp.Kind))
	}
	if sp.Kind != record.BulkSetItemPriority && sp.Priority != 0 {
		errs = append(errs, fmt.Errorf("Priority %d is set with Kind %q: only set_priority gives a priority", sp.Priority, sp.Kind))
	}
	f := sp.Filter
	if f.State != "" && f.State != record.StatePending {
		errs = append(errs, fmt.Errorf("Filter.State %q: only pending items can be cancelled, run now or given a priority", f.State))
	}
	if f.After != "" || f.Limit != 0 {
		errs = append(errs, errors.New("Filter.After and Filter.Limit must be zero: an action takes every item the filter selects"))
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		errs = append(errs, fmt.Errorf("Filter.From %s is not before Filter.To %s: the range is empty", f.From.Format(time.RFC3339), f.To.Format(time.RFC3339)))
	}
	switch {
	case sp.Rate < 0 || sp.Rate != sp.Rate || sp.Rate > maxBulkRate:
		errs = append(errs, fmt.Errorf("Rate %v is not a number of items per second between 0 and %d", sp.Rate, maxBulkRate))
	case sp.Rate > 0 && sp.Rate < minBulkRate:
		errs = append(errs, fmt.Errorf("Rate %v is below one item a day (%.3g a second)", sp.Rate, minBulkRate))
	}
	if o.reg != nil || o.resetOf != "" {
		errs = append(errs, errors.New("ResetBreakerFirst goes with a replay of dead letters, not an action on items"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("durable: StartItemBulkAction: %w: %w", ErrInvalidBulkAction, errors.Join(errs...))
	}
	sp.Filter.State, sp.Filter.Parked = record.StatePending, f.Parked || f.Key != ""
	if sp.Rate == 0 {
		sp.Rate = defaultBulkRate
	}
	return nil
}

// itemQueryOf is the store query of an item action's filter.
func itemQueryOf(f ItemFilter) store.ItemQuery {
	return store.ItemQuery{State: store.StatePending, Parked: f.Parked || f.Key != "", Name: f.Name, Key: f.Key, From: f.From, To: f.To}
}

// StartItemBulkAction stores a bulk action that cancels, runs now or gives a priority to every
// pending item spec.Filter selects, audited as one action with its own id, and returns it
// queued. It is a bulk action as StartBulkAction's are, run by the same loop: a running
// scheduler of the queue (on any instance) takes it up under a lease and works through the
// items in id order, throttled by spec.Rate, surviving its instance. Each item is changed as
// Queue.Cancel or Queue.RunNow changes one (a set_priority as WithPriority would have given
// it), in one transaction with the action's progress, and only while it is pending: an item a
// scheduler claimed meanwhile runs on and is counted as skipped, as is one a pause holds back
// from a run-now. The items enqueued after it started are not swept in. The per-item audit
// entries of Cancel and RunNow are not written: the action's entries (when it started, with the
// filter and the items matched, and when it ended, with its totals) stand for them. An
// unfinished action of the same kind and filter refuses it (ErrBulkActionActive). actor,
// required, names who started it.
//
// With DryRun it only counts the items and returns a sample; ResetBreakerFirst does not apply.
// Queue.ItemBulkAction follows its progress; Queue.CancelItemBulkAction stops it.
func (q *Queue) StartItemBulkAction(ctx context.Context, spec ItemBulkActionSpec, actor string, opts ...BulkActionOption) (ItemBulkAction, error) {
	var o bulkOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := spec.validate(actor, o); err != nil {
		return ItemBulkAction{}, err
	}
	sq := itemQueryOf(spec.Filter)
	matched, maxID, err := q.store.CountBulkItems(ctx, sq)
	if err != nil {
		return ItemBulkAction{}, err
	}
	now := q.clock.Now()
	a := ItemBulkAction{Kind: spec.Kind, Filter: spec.Filter, Priority: spec.Priority, Reason: spec.Reason, Actor: actor, Rate: spec.Rate,
		Matched: matched, MaxItem: maxID, CreatedAt: now, UpdatedAt: now}
	if o.dryRun {
		sample, err := q.store.BulkItems(ctx, sq, 0, maxID, bulkSampleSize)
		if err != nil {
			return ItemBulkAction{}, err
		}
		a.Sample = make([]record.Item, len(sample))
		for i, it := range sample {
			a.Sample[i] = itemOf(it)
		}
		return a, nil
	}
	f := spec.Filter
	fj, err := json.Marshal(itemBulkFilter{Name: f.Name, Key: f.Key, Parked: f.Parked, From: f.From, To: f.To})
	if err != nil {
		return ItemBulkAction{}, err
	}
	action := map[record.BulkActionKind]record.AuditAction{record.BulkCancelItems: record.AuditBulkCancelItems,
		record.BulkRunItemsNow: record.AuditBulkRunItemsNow, record.BulkSetItemPriority: record.AuditBulkSetItemPriority}[spec.Kind]
	detail := fmt.Sprintf("filter %s; %d pending items", fj, matched)
	if spec.Kind == record.BulkSetItemPriority {
		detail += fmt.Sprintf("; priority %d", spec.Priority)
	}
	if spec.Reason != "" {
		detail += "; reason: " + spec.Reason
	}
	id, err := q.store.InsertBulkAction(ctx, store.BulkActionRow{Kind: string(spec.Kind), Filter: string(fj), Reason: spec.Reason, Actor: actor,
		State: store.BulkQueued, Rate: spec.Rate, InFlight: 1, Priority: spec.Priority, MaxItem: maxID, Matched: matched, CreatedAt: now},
		store.AuditRow{At: now, Actor: actor, Action: string(action), TargetKind: string(record.AuditTargetBulkAction), Detail: detail, Outcome: record.AuditDone})
	if errors.Is(err, ErrBulkActionActive) {
		return ItemBulkAction{}, fmt.Errorf("durable: StartItemBulkAction: %w", err)
	}
	if err != nil {
		return ItemBulkAction{}, err
	}
	if s := q.running.Load(); s != nil && s.bulk != nil {
		signal(s.bulk.wake)
	}
	a.ID, a.State = record.BulkActionID(id), record.BulkQueued
	return a, nil
}

func itemBulkActionOf(b store.BulkActionRow) ItemBulkAction {
	var f itemBulkFilter
	_ = json.Unmarshal([]byte(b.Filter), &f) // written by StartItemBulkAction
	return ItemBulkAction{ID: record.BulkActionID(b.ID), Kind: record.BulkActionKind(b.Kind), Filter: f.itemFilter(), Priority: b.Priority,
		Reason: b.Reason, Actor: b.Actor, State: record.BulkActionState(b.State), Rate: b.Rate, Matched: b.Matched,
		Cursor: record.ItemID(b.Cursor), MaxItem: b.MaxItem, Changed: b.Changed, Skipped: b.Skipped, Error: b.Error, Instance: b.LeaseOwner,
		CreatedAt: b.CreatedAt, UpdatedAt: b.UpdatedAt, FinishedAt: b.FinishedAt}
}

// ItemBulkAction returns the action on items id; an unknown id, or one of an action on dead
// letters, gets ErrNotFound.
func (q *Queue) ItemBulkAction(ctx context.Context, id record.BulkActionID) (ItemBulkAction, error) {
	b, found, err := q.store.BulkAction(ctx, int64(id))
	if err != nil {
		return ItemBulkAction{}, err
	}
	if !found || !record.BulkActionKind(b.Kind).OnItems() {
		return ItemBulkAction{}, bulkNotFound(id)
	}
	return itemBulkActionOf(b), nil
}

// ItemBulkActions lists the actions on items with ids below before (all when 0), newest first,
// at most limit: zero means 20, at most 100.
func (q *Queue) ItemBulkActions(ctx context.Context, before record.BulkActionID, limit int) ([]ItemBulkAction, error) {
	if limit < 0 || limit > maxBulkActionList {
		return nil, fmt.Errorf("durable: ItemBulkActions: limit %d is not between 0 and %d", limit, maxBulkActionList)
	}
	if limit == 0 {
		limit = 20
	}
	rows, err := q.store.BulkActions(ctx, int64(before), limit, true)
	if err != nil {
		return nil, err
	}
	out := make([]ItemBulkAction, len(rows))
	for i, b := range rows {
		out[i] = itemBulkActionOf(b)
	}
	return out, nil
}

// CancelItemBulkAction stops the action on items id: the items it changed stay changed, and no
// other is taken. actor is required; reason is recorded in the audit entry, with the totals.
// An action already finished is left as it is (the entry says no change); an unknown id, or
// one of an action on dead letters (CancelBulkAction), gets ErrNotFound.
func (q *Queue) CancelItemBulkAction(ctx context.Context, id record.BulkActionID, actor, reason string) (ItemBulkAction, error) {
	if actor == "" {
		return ItemBulkAction{}, errors.New("durable: CancelItemBulkAction: actor is required: the audit log records who cancelled")
	}
	if _, err := q.ItemBulkAction(ctx, id); err != nil {
		return ItemBulkAction{}, err
	}
	b, err := q.cancelBulkAction(ctx, id, actor, reason)
	if err != nil {
		return ItemBulkAction{}, err
	}
	return itemBulkActionOf(b), nil
}

// itemBulkTotals says an item action's totals, for its audit entries.
func itemBulkTotals(b store.BulkActionRow) string {
	return fmt.Sprintf("%d of %d matched items changed, %d skipped", b.Changed, b.Matched, b.Skipped)
}
