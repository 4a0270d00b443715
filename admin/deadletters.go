package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

// maxBulk is the most ids one bulk request takes, as durable.Queue.ReplayMany does.
const maxBulk = 100

type deadLetterBody struct {
	ID     record.DeadLetterID `json:"id"`
	ItemID record.ItemID       `json:"item_id"`
	Source string              `json:"source"`
	Name   string              `json:"name"`
	Key    string              `json:"key"`
	// GuardKey is the breaker key of the endpoint the dead item was for; empty for none.
	GuardKey   string                  `json:"guard_key"`
	Error      string                  `json:"error"`
	Cause      record.DeadCause        `json:"cause"` // empty when not known
	Status     record.DeadLetterStatus `json:"status"`
	RetryCount int                     `json:"retry_count"`
	CreatedAt  time.Time               `json:"created_at"`
	UpdatedAt  time.Time               `json:"updated_at"`
}

func deadLetterOf(d record.DeadLetter) deadLetterBody {
	return deadLetterBody{ID: d.ID, ItemID: d.ItemID, Source: d.Source, Name: d.Name, Key: d.Key,
		GuardKey: d.GuardKey, Error: d.Error, Cause: d.Cause, Status: d.Status, RetryCount: d.RetryCount,
		CreatedAt: d.CreatedAt.UTC(), UpdatedAt: d.UpdatedAt.UTC()}
}

// deadLetterDetail is a letter with its payload, as the detail route shows it.
type deadLetterDetail struct {
	deadLetterBody
	Payload any `json:"payload"`
}

type timelineBody struct {
	Kind      record.TimelineKind `json:"kind"`
	Number    int                 `json:"number"`
	StartedAt *time.Time          `json:"started_at"`
	EndedAt   *time.Time          `json:"ended_at"`
	Instance  string              `json:"instance"`
	Actor     string              `json:"actor"`
	Outcome   record.Outcome      `json:"outcome"`
	Error     string              `json:"error"`
	Reason    string              `json:"reason"`
	// BulkAction is the bulk action a replay or discard was part of; 0 for one of its own.
	BulkAction record.BulkActionID `json:"bulk_action"`
}

// resolutionBody is the outcome of a replay or discard of one letter.
type resolutionBody struct {
	ID         record.DeadLetterID `json:"id"`
	Resolution durable.Resolution  `json:"resolution"`
	Error      string              `json:"error"`
}

func (s *server) listDeadLetters(w http.ResponseWriter, r *http.Request, _ string) {
	f, ok := filterOf(w, r, deadLetterFilter, deadLetterParams...)
	if !ok {
		return
	}
	page, err := s.cfg.Queue.DeadLetters(r.Context(), f)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	out := make([]deadLetterBody, 0, len(page.Letters))
	for _, d := range page.Letters {
		out = append(out, deadLetterOf(d))
	}
	writeJSON(w, http.StatusOK, struct {
		DeadLetters []deadLetterBody `json:"dead_letters"`
		Total       int              `json:"total"`
		// TotalOver says the count stopped at total: more letters match (durable.DeadLetterPage).
		TotalOver bool `json:"total_over"`
	}{out, page.Total, page.Over})
}

// deadLetterParams are the query parameters of the listing.
var deadLetterParams = []string{"status", "source", "from", "to", "error", "limit", "offset"}

// deadLetterFilter reads the listing's query, whose names query has checked; every malformed
// value is an error naming it.
func deadLetterFilter(q url.Values) (durable.DeadLetterFilter, error) {
	var f durable.DeadLetterFilter
	var errs []error
	switch st := record.DeadLetterStatus(q.Get("status")); st {
	case "", record.DeadLetterFailed, record.DeadLetterReplayed, record.DeadLetterDiscarded:
		f.Status = st
	default:
		errs = append(errs, fmt.Errorf("status %s: want failed, replayed or discarded", quote(string(st))))
	}
	f.Source, f.ErrorContains = q.Get("source"), q.Get("error")
	errs = append(errs, badTexts("source", f.Source, "error", f.ErrorContains)...)
	errs = append(errs, timeRange(q, &f.From, &f.To)...)
	var err error
	if f.Limit, err = intParam(q, "limit", 0, 500); err != nil {
		errs = append(errs, err)
	}
	if f.Offset, err = intParam(q, "offset", 0, -1); err != nil {
		errs = append(errs, err)
	}
	return f, errors.Join(errs...)
}

// letterID reads the {id} wildcard; it answers 400 and returns false when it is not a
// positive integer.
func letterID(w http.ResponseWriter, r *http.Request) (record.DeadLetterID, bool) {
	v := r.PathValue("id")
	if v == "replay" || v == "discard" { // the bulk routes, with a method they do not take
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed on the bulk "+v+" route: use POST")
		return 0, false
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		writeError(w, http.StatusBadRequest, "dead letter id "+quote(v)+" is not a positive integer")
		return 0, false
	}
	return record.DeadLetterID(id), true
}

func (s *server) getDeadLetter(w http.ResponseWriter, r *http.Request, _ string) {
	if _, ok := query(w, r); !ok {
		return
	}
	id, ok := letterID(w, r)
	if !ok {
		return
	}
	d, timeline, err := s.cfg.Queue.DeadLetter(r.Context(), id)
	if errors.Is(err, durable.ErrNotFound) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("unknown dead letter %d", id))
		return
	}
	if err != nil {
		s.internal(w, r, err)
		return
	}
	entries := make([]timelineBody, 0, len(timeline))
	for _, e := range timeline {
		entries = append(entries, timelineBody{Kind: e.Kind, Number: e.Number,
			StartedAt: timeOrNil(e.StartedAt), EndedAt: timeOrNil(e.EndedAt), Instance: e.Instance,
			Actor: e.Actor, Outcome: e.Outcome, Error: e.Error, Reason: e.Reason, BulkAction: e.BulkAction})
	}
	// The payload reads as JSON when it is JSON (the default codec), else as a string.
	var payload any = string(d.Payload)
	if json.Valid(d.Payload) {
		payload = json.RawMessage(d.Payload)
	}
	writeJSON(w, http.StatusOK, struct {
		DeadLetter deadLetterDetail `json:"dead_letter"`
		Timeline   []timelineBody   `json:"timeline"`
	}{deadLetterDetail{deadLetterOf(d), payload}, entries})
}

func (s *server) replayDeadLetter(w http.ResponseWriter, r *http.Request, principal string) {
	id, ok := letterID(w, r)
	if !ok || !decodeBody(w, r, &struct{}{}) {
		return
	}
	res, err := s.cfg.Queue.Replay(r.Context(), s.cfg.Sender, id, principal)
	s.answerResolution(w, r, id, res, err)
}

func (s *server) discardDeadLetter(w http.ResponseWriter, r *http.Request, principal string) {
	id, ok := letterID(w, r)
	if !ok {
		return
	}
	reason, ok := decodeReason(w, r, "a discard")
	if !ok {
		return
	}
	res, err := s.cfg.Queue.Discard(r.Context(), id, principal, reason)
	s.answerResolution(w, r, id, res, err)
}

// answerResolution answers one replay or discard: 404 for not_found, 409 for conflict, 503
// for refused (a breaker turned the replay away: try again when it lets calls through, with
// Retry-After when it says when), 200 for the others (still_failed included: the replay ran),
// 500 when the store failed.
func (s *server) answerResolution(w http.ResponseWriter, r *http.Request, id record.DeadLetterID, res durable.Resolution, err error) {
	body := resolutionBody{ID: id, Resolution: res}
	if err != nil {
		body.Error = err.Error()
	}
	switch res {
	case durable.NotFound:
		writeJSON(w, http.StatusNotFound, body)
	case durable.Conflict:
		writeJSON(w, http.StatusConflict, body)
	case durable.Refused:
		if d := behaviors.RetryAfter(err); d > 0 {
			w.Header().Set("Retry-After", strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10))
		}
		writeJSON(w, http.StatusServiceUnavailable, body)
	case durable.Replayed, durable.StillFailed, durable.Discarded:
		writeJSON(w, http.StatusOK, body)
	default:
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			writeError(w, http.StatusServiceUnavailable, "the request ended before the replay finished; nothing was recorded")
			return
		}
		s.internal(w, r, err)
	}
}

type bulkRequest struct {
	IDs    []bulkID `json:"ids"`
	Reason string   `json:"reason"`
}

// bulkID is one id of a bulk body: a JSON number or a string of decimal digits ("42"), since
// clients send either (the operator contract has ids as strings: a JavaScript number cannot
// hold every 64-bit id).
type bulkID int64

// UnmarshalJSON reads a positive integer, as a number or a string of decimal digits; anything
// else is a badIDError naming it.
func (id *bulkID) UnmarshalJSON(b []byte) error {
	digits, shown := string(b), cut(string(b), maxQuoted)
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &digits); err != nil {
			return badIDError{shown}
		}
		shown = quote(digits)
	}
	if digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return badIDError{shown}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n <= 0 {
		return badIDError{shown}
	}
	*id = bulkID(n)
	return nil
}

// badIDError reports a bulk id that is not a positive integer; id is as the body gave it.
type badIDError struct{ id string }

func (e badIDError) Error() string {
	return `field "ids": ` + e.id + ` is not a dead letter id (a positive integer, as a number or a string of decimal digits); nothing was done`
}

// bulkIDs decodes a bulk body and checks its ids (1 to 100 positive integers) and, when
// reason is wanted, its reason; it answers 400 and returns false otherwise.
func bulkIDs(w http.ResponseWriter, r *http.Request, body any, ids *[]bulkID, reason *string) ([]record.DeadLetterID, bool) {
	if !decodeBody(w, r, body) {
		return nil, false
	}
	switch {
	case len(*ids) == 0:
		writeError(w, http.StatusBadRequest, `field "ids" is required: a list of 1 to 100 dead letter ids`)
		return nil, false
	case len(*ids) > maxBulk:
		writeError(w, http.StatusBadRequest, fmt.Sprintf(`field "ids" has %d ids: at most %d per request; nothing was done`, len(*ids), maxBulk))
		return nil, false
	case reason != nil && strings.TrimSpace(*reason) == "":
		writeError(w, http.StatusBadRequest, `field "reason" is required: a discard says why`)
		return nil, false
	}
	out := make([]record.DeadLetterID, len(*ids))
	seen := make(map[bulkID]bool, len(*ids))
	for i, id := range *ids { // each a positive integer: bulkID.UnmarshalJSON saw to it
		if seen[id] {
			// A repeated id would replay its letter twice in one request.
			writeError(w, http.StatusBadRequest, fmt.Sprintf(`field "ids": %d appears more than once; nothing was done`, id))
			return nil, false
		}
		seen[id] = true
		out[i] = record.DeadLetterID(id)
	}
	return out, true
}

func (s *server) replayDeadLetters(w http.ResponseWriter, r *http.Request, principal string) {
	var body struct {
		IDs []bulkID `json:"ids"`
	}
	ids, ok := bulkIDs(w, r, &body, &body.IDs, nil)
	if !ok {
		return
	}
	results, err := s.cfg.Queue.ReplayMany(r.Context(), s.cfg.Sender, ids, principal)
	s.answerBulk(w, r, results, err)
}

func (s *server) discardDeadLetters(w http.ResponseWriter, r *http.Request, principal string) {
	var body bulkRequest
	ids, ok := bulkIDs(w, r, &body, &body.IDs, &body.Reason)
	if !ok {
		return
	}
	results, err := s.cfg.Queue.DiscardMany(r.Context(), ids, principal, body.Reason)
	s.answerBulk(w, r, results, err)
}

// answerBulk answers 200 with one outcome per id, whatever each came to; only a call that
// returned no outcomes at all is an error.
func (s *server) answerBulk(w http.ResponseWriter, r *http.Request, results []durable.BulkResult, err error) {
	if len(results) == 0 && err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			writeError(w, http.StatusServiceUnavailable, "the request ended before the replays finished")
			return
		}
		s.internal(w, r, err)
		return
	}
	out := make([]resolutionBody, 0, len(results))
	for _, res := range results {
		out = append(out, resolutionBody{ID: res.ID, Resolution: res.Resolution, Error: res.Error})
	}
	writeJSON(w, http.StatusOK, struct {
		Results []resolutionBody `json:"results"`
	}{out})
}
