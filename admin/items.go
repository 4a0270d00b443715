package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

// Items is what the item routes (list, inspect, cancel, run now) call of the configured queue;
// a *durable.Queue is one. It is apart from Operations so that a stand-in for Operations need
// not have it: with a queue that lacks it, those routes answer 404 saying so.
type Items interface {
	Items(ctx context.Context, f durable.ItemFilter) (durable.ItemPage, error)
	Item(ctx context.Context, id record.ItemID) (record.Item, error)
	Attempts(ctx context.Context, id record.ItemID) ([]record.Attempt, error)
	Cancel(ctx context.Context, id record.ItemID, actor, reason string) (durable.ItemResult, error)
	RunNow(ctx context.Context, id record.ItemID, actor string) (durable.ItemResult, error)
}

var _ Items = (*durable.Queue)(nil)

// itemBody is an item in the API.
type itemBody struct {
	ID          record.ItemID    `json:"id"`
	Name        string           `json:"name"`
	State       record.ItemState `json:"state"`
	Attempts    int              `json:"attempts"`
	ParkedKey   string           `json:"parked_key"`
	DedupeKey   string           `json:"dedupe_key"`
	DebounceKey string           `json:"debounce_key"`
	OrderingKey string           `json:"ordering_key"`
	BreakerKey  string           `json:"breaker_key"`
	Reference   string           `json:"reference"` // the application's own id (durable.WithReference)
	Token       string           `json:"token"`     // the item's identity (durable.WithToken, or the one the enqueue drew)
	FairnessKey string           `json:"fairness_key"`
	Priority    int              `json:"priority"`
	NextAt      *time.Time       `json:"next_at"`
	LeaseOwner  string           `json:"lease_owner"`
	LeaseUntil  *time.Time       `json:"lease_until"`
	LastError   string           `json:"last_error"`
	Deadline    *time.Time       `json:"deadline"`
	CreatedAt   time.Time        `json:"created_at"`
	UpdatedAt   time.Time        `json:"updated_at"`
}

func itemBodyOf(it record.Item) itemBody {
	b := itemBody{ID: it.ID, Name: it.Name, State: it.State, Attempts: it.Attempts, ParkedKey: it.ParkedKey, DedupeKey: it.DedupeKey, DebounceKey: it.DebounceKey,
		OrderingKey: it.OrderingKey, BreakerKey: it.GuardKey, Reference: it.Reference, Token: it.Token, FairnessKey: it.FairnessKey, Priority: it.Priority, LastError: it.LastError, Deadline: timeOrNil(it.Deadline),
		CreatedAt: it.CreatedAt.UTC(), UpdatedAt: it.UpdatedAt.UTC()}
	if it.State == record.StatePending {
		b.NextAt = timeOrNil(it.NextAt)
	}
	if it.State == record.StateRunning {
		b.LeaseOwner, b.LeaseUntil = it.LeaseOwner, timeOrNil(it.LeaseUntil)
	}
	return b
}

type attemptBody struct {
	Number    int            `json:"number"`
	Instance  string         `json:"instance"`
	StartedAt time.Time      `json:"started_at"`
	EndedAt   time.Time      `json:"ended_at"`
	Outcome   record.Outcome `json:"outcome"`
	Error     string         `json:"error"`
}

// itemResultBody answers a cancel or a run-now.
type itemResultBody struct {
	ID     record.ItemID      `json:"id"`
	Result durable.ItemResult `json:"result"`
	// State is the item's state after the action; empty for not_found.
	State record.ItemState `json:"state,omitempty"`
	// Error says, when nothing changed, why.
	Error string `json:"error,omitempty"`
}

// items returns the queue's Items, or answers 404 saying the configured queue lacks them.
func (s *server) items(w http.ResponseWriter) (Items, bool) {
	q, ok := s.cfg.Queue.(Items)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("the configured queue (%T) does not list items: it has no Items, Cancel or RunNow methods (admin.Items)", s.cfg.Queue))
	}
	return q, ok
}

// itemParams are the query parameters of the listing.
var itemParams = []string{"state", "name", "key", "from", "to", "after", "limit"}

// itemFilter reads the listing's query, whose names query has checked; every malformed value
// is an error naming it.
func itemFilter(q url.Values) (durable.ItemFilter, error) {
	var f durable.ItemFilter
	var errs []error
	switch st := q.Get("state"); st {
	case "parked":
		f.State, f.Parked = record.StatePending, true
	case "", string(record.StatePending), string(record.StateRunning), string(record.StateSucceeded), string(record.StateDead), string(record.StateCancelled):
		f.State = record.ItemState(st)
	default:
		errs = append(errs, fmt.Errorf("state %s: want pending, parked, running, succeeded, dead or cancelled", quote(st)))
	}
	f.Name, f.Key = q.Get("name"), q.Get("key")
	errs = append(errs, badTexts("name", f.Name, "key", f.Key)...)
	if f.Key != "" && f.State != "" && f.State != record.StatePending {
		errs = append(errs, fmt.Errorf("key %s with state %s: only pending items are parked on a breaker key; use state parked", quote(f.Key), quote(string(f.State))))
	}
	errs = append(errs, timeRange(q, &f.From, &f.To)...)
	f.After = q.Get("after")
	var err error
	if f.Limit, err = intParam(q, "limit", 1, 500); err != nil {
		errs = append(errs, err)
	}
	return f, errors.Join(errs...)
}

func (s *server) listItems(w http.ResponseWriter, r *http.Request, _ string) {
	iq, ok := s.items(w)
	if !ok {
		return
	}
	f, ok := filterOf(w, r, itemFilter, itemParams...)
	if !ok {
		return
	}
	page, err := iq.Items(r.Context(), f)
	if err != nil {
		if errors.Is(err, durable.ErrBadCursor) {
			writeError(w, http.StatusBadRequest, "after "+quote(f.After)+": not a cursor of this listing (a page's next)")
			return
		}
		s.internal(w, r, err)
		return
	}
	out := make([]itemBody, 0, len(page.Items))
	for _, it := range page.Items {
		out = append(out, itemBodyOf(it))
	}
	writeJSON(w, http.StatusOK, struct {
		Items []itemBody `json:"items"`
		// Next is the after of the next page; empty on the last.
		Next string `json:"next"`
	}{out, page.Next})
}

// itemTarget returns the queue's Items and the item of the {id} wildcard; it answers 404 (the
// queue lacks Items) or 400 (the id is not a positive integer) and returns false otherwise.
func (s *server) itemTarget(w http.ResponseWriter, r *http.Request) (Items, record.ItemID, bool) {
	iq, ok := s.items(w)
	if !ok {
		return nil, 0, false
	}
	v := r.PathValue("id")
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		writeError(w, http.StatusBadRequest, "item id "+quote(v)+" is not a positive integer")
		return nil, 0, false
	}
	return iq, record.ItemID(id), true
}

func (s *server) getItem(w http.ResponseWriter, r *http.Request, _ string) {
	if _, ok := query(w, r); !ok {
		return
	}
	iq, id, ok := s.itemTarget(w, r)
	if !ok {
		return
	}
	it, err := iq.Item(r.Context(), id)
	if errors.Is(err, durable.ErrNotFound) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("unknown item %d", id))
		return
	}
	if err != nil {
		s.internal(w, r, err)
		return
	}
	as, err := iq.Attempts(r.Context(), id)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	attempts := make([]attemptBody, 0, len(as))
	for _, a := range as {
		attempts = append(attempts, attemptBody{Number: a.Number, Instance: a.Instance, StartedAt: a.StartedAt.UTC(), EndedAt: a.EndedAt.UTC(),
			Outcome: a.Outcome, Error: a.Error})
	}
	// The payload reads as JSON when it is JSON (the default codec), else as a string.
	var payload any = string(it.Payload)
	if json.Valid(it.Payload) {
		payload = json.RawMessage(it.Payload)
	}
	writeJSON(w, http.StatusOK, struct {
		Item struct {
			itemBody
			Payload  any               `json:"payload"`
			Metadata map[string]string `json:"metadata"`
		} `json:"item"`
		Attempts []attemptBody `json:"attempts"`
	}{struct {
		itemBody
		Payload  any               `json:"payload"`
		Metadata map[string]string `json:"metadata"`
	}{itemBodyOf(it), payload, it.Metadata}, attempts})
}

func (s *server) cancelItem(w http.ResponseWriter, r *http.Request, principal string) {
	iq, id, ok := s.itemTarget(w, r)
	if !ok {
		return
	}
	reason, ok := decodeReason(w, r, "a cancel")
	if !ok {
		return
	}
	res, err := iq.Cancel(r.Context(), id, principal, reason)
	s.answerItem(w, r, iq, id, res, err)
}

func (s *server) runItemNow(w http.ResponseWriter, r *http.Request, principal string) {
	iq, id, ok := s.itemTarget(w, r)
	if !ok || !decodeBody(w, r, &struct{}{}) {
		return
	}
	res, err := iq.RunNow(r.Context(), id, principal)
	s.answerItem(w, r, iq, id, res, err)
}

// answerItem answers a cancel or a run-now: 200 when it changed the item (cancelled, due), 409
// when the item is running (not interrupted), held back by a pause (naming it) or has
// finished, saying so, 404 when there is no such item, 503 when the request ended first, 500
// when the store failed.
func (s *server) answerItem(w http.ResponseWriter, r *http.Request, iq Items, id record.ItemID, res durable.ItemResult, err error) {
	if err != nil {
		s.failed(w, r, err, leftBeforeChange)
		return
	}
	body := itemResultBody{ID: id, Result: res}
	if res == durable.ItemNotFound {
		body.Error = fmt.Sprintf("unknown item %d", id)
		writeJSON(w, http.StatusNotFound, body)
		return
	}
	it, err := iq.Item(r.Context(), id)
	if err == nil {
		body.State = it.State
	}
	switch res {
	case durable.ItemCancelled, durable.ItemDue:
		writeJSON(w, http.StatusOK, body)
	case durable.ItemRunning:
		body.Error = "the item is running: it was not interrupted, and nothing changed; its outcome decides what follows"
		writeJSON(w, http.StatusConflict, body)
	case durable.ItemPaused:
		body.Error = "nothing changed: the item is held back by " + s.pauseHolding(r, it) + "; resume the pause to run it"
		writeJSON(w, http.StatusConflict, body)
	default:
		body.Error = "the item has finished (" + string(body.State) + "): nothing changed"
		writeJSON(w, http.StatusConflict, body)
	}
}

// pauseHolding names the pause that holds the pending item it back, as the queue's pauses
// list it, its name's first (as the queue looks): "the pause of name billing.send by alice
// until resumed; reason: outage"; "a pause of its request name or breaker key" when the queue
// lists no pauses or none is found (it ended since).
func (s *server) pauseHolding(r *http.Request, it record.Item) string {
	q, ok := s.cfg.Queue.(Pauses)
	if !ok {
		return "a pause of its request name or breaker key"
	}
	ps, _ := q.Pauses(r.Context())
	var held *record.Pause
	for i, p := range ps {
		switch {
		case p.Expired:
		case p.Kind == record.PauseName && p.Target == it.Name:
			held = &ps[i]
		case held == nil && p.Kind == record.PauseBreakerKey && (p.Target == it.ParkedKey || p.Target == it.GuardKey):
			held = &ps[i]
		}
	}
	if held == nil {
		return "a pause of its request name or breaker key"
	}
	until := "until resumed"
	if !held.Until.IsZero() {
		until = "until " + held.Until.UTC().Format(time.RFC3339)
	}
	d := "the pause of " + string(held.Kind) + " " + held.Target + " by " + held.Actor + " " + until
	if held.Reason != "" {
		d += "; reason: " + held.Reason
	}
	return d
}
