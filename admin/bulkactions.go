package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

// BulkActions is what the bulk-action routes call of the queue (a *durable.Queue is one):
// replays and discards of every dead letter a filter selects, stored and run by the queue's
// schedulers. A Config.Queue that is not one makes those routes answer 404.
type BulkActions interface {
	StartBulkAction(ctx context.Context, spec durable.BulkActionSpec, actor string, opts ...durable.BulkActionOption) (durable.BulkAction, error)
	BulkAction(ctx context.Context, id record.BulkActionID) (durable.BulkAction, error)
	BulkActions(ctx context.Context, before record.BulkActionID, limit int) ([]durable.BulkAction, error)
	CancelBulkAction(ctx context.Context, id record.BulkActionID, actor, reason string) (durable.BulkAction, error)
}

var _ BulkActions = (*durable.Queue)(nil)

// bulkFilterBody is the filter of a bulk action, as the dead-letter listing's query names it.
type bulkFilterBody struct {
	Status record.DeadLetterStatus `json:"status"`
	Source string                  `json:"source"`
	From   string                  `json:"from"`
	To     string                  `json:"to"`
	Error  string                  `json:"error"`
}

type bulkTotalsBody struct {
	Replayed    int64 `json:"replayed"`
	StillFailed int64 `json:"still_failed"`
	Discarded   int64 `json:"discarded"`
	Unknown     int64 `json:"unknown"`
	Skipped     int64 `json:"skipped"`
}

type bulkActionBody struct {
	ID           record.BulkActionID    `json:"id"`
	Kind         record.BulkActionKind  `json:"kind"`
	Filter       bulkFilterBody         `json:"filter"`
	Reason       string                 `json:"reason"`
	Actor        string                 `json:"actor"`
	State        record.BulkActionState `json:"state"`
	Rate         float64                `json:"rate"`
	MaxInFlight  int                    `json:"max_in_flight"`
	ResetBreaker string                 `json:"reset_breaker"`
	Matched      int64                  `json:"matched"`
	Settled      int64                  `json:"settled"`
	Cursor       record.DeadLetterID    `json:"cursor"`
	Totals       bulkTotalsBody         `json:"totals"`
	WaitingKey   string                 `json:"waiting_key"`
	Error        string                 `json:"error"`
	Instance     string                 `json:"instance"`
	CreatedAt    *time.Time             `json:"created_at"`
	UpdatedAt    *time.Time             `json:"updated_at"`
	FinishedAt   *time.Time             `json:"finished_at"`
}

func bulkActionOf(a durable.BulkAction) bulkActionBody {
	f := bulkFilterBody{Status: a.Filter.Status, Source: a.Filter.Source, Error: a.Filter.ErrorContains}
	if !a.Filter.From.IsZero() {
		f.From = a.Filter.From.UTC().Format(time.RFC3339Nano)
	}
	if !a.Filter.To.IsZero() {
		f.To = a.Filter.To.UTC().Format(time.RFC3339Nano)
	}
	t := a.Totals
	return bulkActionBody{ID: a.ID, Kind: a.Kind, Filter: f, Reason: a.Reason, Actor: a.Actor, State: a.State, Rate: a.Rate, MaxInFlight: a.MaxInFlight,
		ResetBreaker: a.ResetBreaker, Matched: a.Matched, Settled: t.Settled(), Cursor: a.Cursor,
		Totals:     bulkTotalsBody{Replayed: t.Replayed, StillFailed: t.StillFailed, Discarded: t.Discarded, Unknown: t.Unknown, Skipped: t.Skipped},
		WaitingKey: a.WaitingKey, Error: a.Error, Instance: a.Instance,
		CreatedAt: timeOrNil(a.CreatedAt), UpdatedAt: timeOrNil(a.UpdatedAt), FinishedAt: timeOrNil(a.FinishedAt)}
}

// startBulkBody is the body of POST /api/dead-letters/actions (kind and reset_breaker are not
// taken by the reset-and-replay route, whose path names the breaker).
type startBulkBody struct {
	Kind         record.BulkActionKind `json:"kind"`
	Filter       bulkFilterBody        `json:"filter"`
	Reason       string                `json:"reason"`
	DryRun       bool                  `json:"dry_run"`
	Rate         float64               `json:"rate"`
	MaxInFlight  int                   `json:"max_in_flight"`
	ResetBreaker string                `json:"reset_breaker"`
	// ResetRegistry names the registry of ResetBreaker when more than one knows the key.
	ResetRegistry string `json:"reset_breaker_registry"`
}

// bulkActions returns the queue as a BulkActions, or answers 404 and returns nil.
func (s *server) bulkActions(w http.ResponseWriter) BulkActions {
	if s.cfg.Queue == nil {
		writeError(w, http.StatusNotFound, "no durable queue is configured")
		return nil
	}
	b, ok := s.cfg.Queue.(BulkActions)
	if !ok {
		writeError(w, http.StatusNotFound, "the configured queue does not support bulk actions (it is not an admin.BulkActions)")
		return nil
	}
	return b
}

// spec checks the body, naming each bad field, and returns the spec it asks for.
func (body startBulkBody) spec() (durable.BulkActionSpec, error) {
	var errs []error
	sp := durable.BulkActionSpec{Kind: body.Kind, Reason: body.Reason, Rate: body.Rate, MaxInFlight: body.MaxInFlight,
		Filter: durable.DeadLetterFilter{Source: body.Filter.Source, ErrorContains: body.Filter.Error}}
	errs = append(errs, badTexts("filter.source", body.Filter.Source, "filter.error", body.Filter.Error)...)
	switch body.Kind {
	case record.BulkReplay:
	case record.BulkDiscard:
		if body.Reason == "" && !body.DryRun {
			errs = append(errs, errors.New("reason is required for a discard: each letter's timeline records why"))
		}
		if body.ResetBreaker != "" {
			errs = append(errs, errors.New("reset_breaker goes with a replay, not a discard"))
		}
	case "":
		errs = append(errs, errors.New("kind is required: replay or discard"))
	default:
		errs = append(errs, fmt.Errorf("kind %s: want replay or discard", quote(string(body.Kind))))
	}
	switch body.Filter.Status {
	case "", record.DeadLetterFailed:
	default:
		errs = append(errs, fmt.Errorf("filter.status %s: only failed letters can be replayed or discarded", quote(string(body.Filter.Status))))
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
		errs = append(errs, fmt.Errorf("rate %v: want a positive number of letters per second (0: the default)", body.Rate))
	}
	if body.MaxInFlight < 0 || body.MaxInFlight > 64 {
		errs = append(errs, fmt.Errorf("max_in_flight %d: want 0 (the default) to 64", body.MaxInFlight))
	}
	return sp, errors.Join(errs...)
}

func (s *server) startBulkAction(w http.ResponseWriter, r *http.Request, principal string) {
	var body startBulkBody
	if !decodeBody(w, r, &body) {
		return
	}
	s.runBulkStart(w, r, principal, body)
}

// resetAndReplay is POST /api/breakers/{key}/reset-and-replay: one action that resets the
// breaker and replays the letters its body's filter selects.
func (s *server) resetAndReplay(w http.ResponseWriter, r *http.Request, principal string) {
	var body struct {
		Filter      bulkFilterBody `json:"filter"`
		Reason      string         `json:"reason"`
		DryRun      bool           `json:"dry_run"`
		Rate        float64        `json:"rate"`
		MaxInFlight int            `json:"max_in_flight"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	key := r.PathValue("key")
	reg, ok := s.registryOf(w, r, key)
	if !ok {
		return
	}
	if _, err := reg.v.Get(key); err != nil {
		unknownBreaker(w, reg, key, len(s.breakerRegistries()) > 1)
		return
	}
	s.runBulkStart(w, r, principal, startBulkBody{Kind: record.BulkReplay, Filter: body.Filter, Reason: body.Reason, DryRun: body.DryRun,
		Rate: body.Rate, MaxInFlight: body.MaxInFlight, ResetBreaker: key, ResetRegistry: reg.name})
}

func (s *server) runBulkStart(w http.ResponseWriter, r *http.Request, principal string, body startBulkBody) {
	b := s.bulkActions(w)
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
	if body.ResetBreaker != "" {
		if len(s.breakerRegistries()) == 0 {
			writeError(w, http.StatusNotFound, "reset_breaker: no breaker registry is configured")
			return
		}
		reg, code, msg := s.findRegistry(body.ResetRegistry, body.ResetBreaker)
		if code != 0 {
			writeError(w, code, "reset_breaker: "+msg)
			return
		}
		opts = append(opts, durable.ResetBreakerFirst(reg.v, body.ResetBreaker))
	} else if body.ResetRegistry != "" {
		writeError(w, http.StatusBadRequest, "reset_breaker_registry is given without reset_breaker")
		return
	}
	a, err := b.StartBulkAction(r.Context(), sp, principal, opts...)
	if errors.Is(err, breaker.ErrUnknown) {
		writeError(w, http.StatusNotFound, "reset_breaker: unknown breaker "+quote(body.ResetBreaker))
		return
	}
	answerStart(s, w, r, err, body.DryRun, a.Matched, a.Sample, deadLetterOf, func() any { return bulkActionOf(a) })
}

// answerStart answers the start of a bulk action, of dead letters or of items, that ended
// with err: 400 for a spec the queue refused, 409 for an identical action not finished, else
// the dry run's count and sample, or the action stored (201).
func answerStart[S, B any](s *server, w http.ResponseWriter, r *http.Request, err error, dryRun bool, matched int64, sample []S,
	bodyOf func(S) B, action func() any) {
	switch {
	case errors.Is(err, durable.ErrInvalidBulkAction):
		writeError(w, http.StatusBadRequest, err.Error())
		return
	case errors.Is(err, durable.ErrBulkActionActive):
		writeError(w, http.StatusConflict, err.Error()+": cancel it to start another")
		return
	case err != nil:
		s.failed(w, r, err, "the request ended before the action was stored, or before that was confirmed: look at the list of actions before starting it again")
		return
	}
	if dryRun {
		out := make([]B, 0, len(sample))
		for _, v := range sample {
			out = append(out, bodyOf(v))
		}
		writeJSON(w, http.StatusOK, struct {
			DryRun  bool  `json:"dry_run"`
			Matched int64 `json:"matched"`
			Sample  []B   `json:"sample"`
		}{true, matched, out})
		return
	}
	writeJSON(w, http.StatusCreated, struct {
		Action any `json:"action"`
	}{action()})
}

func (s *server) listBulkActions(w http.ResponseWriter, r *http.Request, _ string) {
	b := s.bulkActions(w)
	if b == nil {
		return
	}
	listActions(s, w, r, b.BulkActions, bulkActionOf)
}

// listActions answers a list of bulk actions, of dead letters or of items: the page read
// reads from the query's before and limit, newest first.
func listActions[A, B any](s *server, w http.ResponseWriter, r *http.Request,
	read func(ctx context.Context, before record.BulkActionID, limit int) ([]A, error), bodyOf func(A) B) {
	q, ok := query(w, r, "before", "limit")
	if !ok {
		return
	}
	before, err := intParam(q, "before", 0, -1)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	limit, err := intParam(q, "limit", 0, 100)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	list, err := read(r.Context(), record.BulkActionID(before), limit)
	if err != nil {
		s.failed(w, r, err, "the request ended before the actions were read")
		return
	}
	out := make([]B, 0, len(list))
	for _, a := range list {
		out = append(out, bodyOf(a))
	}
	writeJSON(w, http.StatusOK, struct {
		Actions []B `json:"actions"`
	}{out})
}

// actionID reads the {id} wildcard; it answers 400 and returns false when it is not a
// positive integer.
func actionID(w http.ResponseWriter, r *http.Request) (record.BulkActionID, bool) {
	v := r.PathValue("id")
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		writeError(w, http.StatusBadRequest, "bulk action id "+quote(v)+" is not a positive integer")
		return 0, false
	}
	return record.BulkActionID(id), true
}

// bulkActionOfPath returns the queue as a BulkActions and the {id} of the path, or answers
// (404, 400) and returns false.
func (s *server) bulkActionOfPath(w http.ResponseWriter, r *http.Request) (BulkActions, record.BulkActionID, bool) {
	b := s.bulkActions(w)
	if b == nil {
		return nil, 0, false
	}
	id, ok := actionID(w, r)
	return b, id, ok
}

func (s *server) getBulkAction(w http.ResponseWriter, r *http.Request, _ string) {
	if _, ok := query(w, r); !ok {
		return
	}
	b, id, ok := s.bulkActionOfPath(w, r)
	if !ok {
		return
	}
	a, err := b.BulkAction(r.Context(), id)
	s.answerBulkAction(w, r, id, a, err, "the request ended before the action was read")
}

func (s *server) cancelBulkAction(w http.ResponseWriter, r *http.Request, principal string) {
	b, id, ok := s.bulkActionOfPath(w, r)
	if !ok {
		return
	}
	var body struct {
		Reason string `json:"reason"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	a, err := b.CancelBulkAction(r.Context(), id, principal, body.Reason)
	s.answerBulkAction(w, r, id, a, err, "the request ended before the cancel was confirmed: look at the action before cancelling it again")
}

// answerBulkAction answers a read or a cancel of action id: 200 with the action, 404 for an
// unknown id, 503 saying ended when the request ended first, 500 when the store failed.
func (s *server) answerBulkAction(w http.ResponseWriter, r *http.Request, id record.BulkActionID, a durable.BulkAction, err error, ended string) {
	switch {
	case errors.Is(err, durable.ErrNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("unknown bulk action %d", id))
	case err != nil:
		s.failed(w, r, err, ended)
	default:
		writeJSON(w, http.StatusOK, struct {
			Action bulkActionBody `json:"action"`
		}{bulkActionOf(a)})
	}
}
