package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

// ItemBulkActions is what the routes of bulk actions on pending items call of the queue (a
// *durable.Queue is one): cancels, run-nows and priority changes of every pending item a filter
// selects, stored and run by the queue's schedulers. A Config.Queue that is not one makes those
// routes answer 404.
type ItemBulkActions interface {
	StartItemBulkAction(ctx context.Context, spec durable.ItemBulkActionSpec, actor string, opts ...durable.BulkActionOption) (durable.ItemBulkAction, error)
	ItemBulkAction(ctx context.Context, id record.BulkActionID) (durable.ItemBulkAction, error)
	ItemBulkActions(ctx context.Context, before record.BulkActionID, limit int) ([]durable.ItemBulkAction, error)
	CancelItemBulkAction(ctx context.Context, id record.BulkActionID, actor, reason string) (durable.ItemBulkAction, error)
}

var _ ItemBulkActions = (*durable.Queue)(nil)

// itemBulkFilterBody is the filter of an action on items, as the item listing's query names it
// (state is pending, parked or empty).
type itemBulkFilterBody struct {
	State string `json:"state"`
	Name  string `json:"name"`
	Key   string `json:"key"`
	From  string `json:"from"`
	To    string `json:"to"`
}

type itemBulkTotalsBody struct {
	Changed int64 `json:"changed"`
	Skipped int64 `json:"skipped"`
}

type itemBulkActionBody struct {
	ID         record.BulkActionID    `json:"id"`
	Kind       record.BulkActionKind  `json:"kind"`
	Filter     itemBulkFilterBody     `json:"filter"`
	Priority   *int                   `json:"priority"` // set_priority only
	Reason     string                 `json:"reason"`
	Actor      string                 `json:"actor"`
	State      record.BulkActionState `json:"state"`
	Rate       float64                `json:"rate"`
	Matched    int64                  `json:"matched"`
	Settled    int64                  `json:"settled"`
	Cursor     record.ItemID          `json:"cursor"`
	MaxItem    record.ItemID          `json:"max_item"`
	Totals     itemBulkTotalsBody     `json:"totals"`
	Error      string                 `json:"error"`
	Instance   string                 `json:"instance"`
	CreatedAt  *time.Time             `json:"created_at"`
	UpdatedAt  *time.Time             `json:"updated_at"`
	FinishedAt *time.Time             `json:"finished_at"`
}

func itemBulkActionOf(a durable.ItemBulkAction) itemBulkActionBody {
	f := itemBulkFilterBody{State: string(record.StatePending), Name: a.Filter.Name, Key: a.Filter.Key}
	if a.Filter.Parked {
		f.State = "parked"
	}
	if !a.Filter.From.IsZero() {
		f.From = a.Filter.From.UTC().Format(time.RFC3339Nano)
	}
	if !a.Filter.To.IsZero() {
		f.To = a.Filter.To.UTC().Format(time.RFC3339Nano)
	}
	b := itemBulkActionBody{ID: a.ID, Kind: a.Kind, Filter: f, Reason: a.Reason, Actor: a.Actor, State: a.State, Rate: a.Rate, Matched: a.Matched,
		Settled: a.Changed + a.Skipped, Cursor: a.Cursor, MaxItem: a.MaxItem, Totals: itemBulkTotalsBody{Changed: a.Changed, Skipped: a.Skipped},
		Error: a.Error, Instance: a.Instance, CreatedAt: timeOrNil(a.CreatedAt), UpdatedAt: timeOrNil(a.UpdatedAt), FinishedAt: timeOrNil(a.FinishedAt)}
	if a.Kind == record.BulkSetItemPriority {
		p := a.Priority
		b.Priority = &p
	}
	return b
}

// startItemBulkBody is the body of POST /api/items/actions.
type startItemBulkBody struct {
	Kind     record.BulkActionKind `json:"kind"`
	Filter   itemBulkFilterBody    `json:"filter"`
	Priority *int                  `json:"priority"`
	Reason   string                `json:"reason"`
	DryRun   bool                  `json:"dry_run"`
	Rate     float64               `json:"rate"`
}

// itemBulkActions returns the queue as an ItemBulkActions, or answers 404 and returns nil.
func (s *server) itemBulkActions(w http.ResponseWriter) ItemBulkActions {
	if s.cfg.Queue == nil {
		writeError(w, http.StatusNotFound, "no durable queue is configured")
		return nil
	}
	b, ok := s.cfg.Queue.(ItemBulkActions)
	if !ok {
		writeError(w, http.StatusNotFound, "the configured queue does not support bulk actions on items (it is not an admin.ItemBulkActions)")
		return nil
	}
	return b
}

// spec checks the body, naming each bad field, and returns the spec it asks for.
func (body startItemBulkBody) spec() (durable.ItemBulkActionSpec, error) {
	var errs []error
	sp := durable.ItemBulkActionSpec{Kind: body.Kind, Reason: body.Reason, Rate: body.Rate,
		Filter: durable.ItemFilter{State: record.StatePending, Name: body.Filter.Name, Key: body.Filter.Key}}
	errs = append(errs, badTexts("filter.name", body.Filter.Name, "filter.key", body.Filter.Key, "reason", body.Reason)...)
	switch body.Kind {
	case record.BulkCancelItems:
		if body.Reason == "" && !body.DryRun {
			errs = append(errs, errors.New("reason is required for a cancel: the audit log records why"))
		}
	case record.BulkRunItemsNow:
	case record.BulkSetItemPriority:
		switch p := body.Priority; {
		case p == nil:
			errs = append(errs, fmt.Errorf("priority is required for set_priority: 0 to %d", durable.MaxPriority))
		case *p < 0 || *p > durable.MaxPriority:
			errs = append(errs, fmt.Errorf("priority %d: want 0 to %d", *p, durable.MaxPriority))
		default:
			sp.Priority = *p
		}
	case "":
		errs = append(errs, errors.New("kind is required: cancel, run_now or set_priority"))
	default:
		errs = append(errs, fmt.Errorf("kind %s: want cancel, run_now or set_priority", quote(string(body.Kind))))
	}
	if body.Priority != nil && body.Kind != record.BulkSetItemPriority && body.Kind != "" {
		errs = append(errs, fmt.Errorf("priority goes with kind set_priority, not %s", quote(string(body.Kind))))
	}
	switch body.Filter.State {
	case "", string(record.StatePending):
	case "parked":
		sp.Filter.Parked = true
	default:
		errs = append(errs, fmt.Errorf("filter.state %s: only pending items can be cancelled, run now or given a priority (want pending or parked)",
			quote(body.Filter.State)))
	}
	for _, t := range []struct {
		name, v string
		to      *time.Time
	}{{"filter.from", body.Filter.From, &sp.Filter.From}, {"filter.to", body.Filter.To, &sp.Filter.To}} {
		if t.v == "" {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, t.v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: want an RFC 3339 time such as 2026-01-02T15:04:05Z", t.name, quote(t.v)))
		}
		*t.to = at
	}
	if f := sp.Filter; !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		errs = append(errs, fmt.Errorf("filter.from %s is not before filter.to %s: the range is empty", f.From.Format(time.RFC3339), f.To.Format(time.RFC3339)))
	}
	if body.Rate < 0 {
		errs = append(errs, fmt.Errorf("rate %v: want a positive number of items per second (0: the default)", body.Rate))
	}
	return sp, errors.Join(errs...)
}

// startItemBulkAction is POST /api/items/actions: a dry run (200 with the count and a sample)
// or the stored action (201).
func (s *server) startItemBulkAction(w http.ResponseWriter, r *http.Request, principal string) {
	var body startItemBulkBody
	if !decodeBody(w, r, &body) {
		return
	}
	b := s.itemBulkActions(w)
	if b == nil {
		return
	}
	sp, err := body.spec()
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var opts []durable.BulkActionOption
	if body.DryRun {
		opts = append(opts, durable.DryRun())
	}
	a, err := b.StartItemBulkAction(r.Context(), sp, principal, opts...)
	answerStart(s, w, r, err, body.DryRun, a.Matched, a.Sample, itemBodyOf, func() any { return itemBulkActionOf(a) })
}

// listItemBulkActions is GET /api/items/actions: the actions on items, newest first.
func (s *server) listItemBulkActions(w http.ResponseWriter, r *http.Request, _ string) {
	b := s.itemBulkActions(w)
	if b == nil {
		return
	}
	listActions(s, w, r, b.ItemBulkActions, itemBulkActionOf)
}

// itemBulkActionOfPath returns the queue as an ItemBulkActions and the {id} of the path, or
// answers (404, 400) and returns false.
func (s *server) itemBulkActionOfPath(w http.ResponseWriter, r *http.Request) (ItemBulkActions, record.BulkActionID, bool) {
	b := s.itemBulkActions(w)
	if b == nil {
		return nil, 0, false
	}
	id, ok := actionID(w, r)
	return b, id, ok
}

// getItemBulkAction is GET /api/items/actions/{id}.
func (s *server) getItemBulkAction(w http.ResponseWriter, r *http.Request, _ string) {
	if _, ok := query(w, r); !ok {
		return
	}
	b, id, ok := s.itemBulkActionOfPath(w, r)
	if !ok {
		return
	}
	a, err := b.ItemBulkAction(r.Context(), id)
	s.answerItemBulkAction(w, r, id, a, err, "the request ended before the action was read")
}

// cancelItemBulkAction is POST /api/items/actions/{id}/cancel.
func (s *server) cancelItemBulkAction(w http.ResponseWriter, r *http.Request, principal string) {
	var body struct {
		Reason string `json:"reason"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	b, id, ok := s.itemBulkActionOfPath(w, r)
	if !ok {
		return
	}
	a, err := b.CancelItemBulkAction(r.Context(), id, principal, body.Reason)
	s.answerItemBulkAction(w, r, id, a, err, "the request ended before the cancel was confirmed: look at the action before cancelling it again")
}

// answerItemBulkAction answers a read or a cancel of action id: 200 with the action, 404 for an
// unknown id (or one of an action on dead letters), 503 saying ended when the request ended
// first, 500 when the store failed.
func (s *server) answerItemBulkAction(w http.ResponseWriter, r *http.Request, id record.BulkActionID, a durable.ItemBulkAction, err error, ended string) {
	switch {
	case errors.Is(err, durable.ErrNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("unknown bulk action on items %d", id))
	case err != nil:
		s.failed(w, r, err, ended)
	default:
		writeJSON(w, http.StatusOK, struct {
			Action itemBulkActionBody `json:"action"`
		}{itemBulkActionOf(a)})
	}
}
