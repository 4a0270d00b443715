package durable

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
)

// ItemFilter selects the items Queue.Items lists, a page at a time, in the listing order of
// their state: pending items in the order they run (when due; those to run alone, after a
// crash while they ran, after the others), parked ones by breaker key then when due, running
// ones by when their lease runs out, finished ones (succeeded, dead, cancelled) by when they
// finished, newest first.
type ItemFilter struct {
	// State is the state listed: zero means record.StatePending, the work waiting to run. A
	// listing is of one state so that each page is one range of an index.
	State record.ItemState
	// Parked keeps only the pending items parked on a circuit breaker (waiting for it to let
	// calls through); State must then be pending or zero.
	Parked bool
	// Name, when not empty, keeps the items of that request name. The listing then reads its
	// state's order and skips the items of other names: a page of a rare name among many
	// items of others reads many rows. No index per name: every index is one more write on
	// every state change of every item.
	Name string
	// Key, when not empty, keeps the items parked on that breaker key; it implies Parked.
	Key string
	// From and To, when not zero, keep the items whose listing time is in [From, To): when
	// a pending (or parked) item is due, when a running item's lease runs out, when a finished
	// item finished. They bound the index range the listing reads.
	From, To time.Time
	// After is the cursor of the page to read: an ItemPage's Next. Empty: the first page.
	After string
	// Limit caps the items of a page: zero means 50, a dashboard's page; at most 500, so that a
	// page's payloads stay a bounded response.
	Limit int
}

// ItemPage is one page of Queue.Items.
type ItemPage struct {
	Items []record.Item
	// Next is the cursor of the next page (ItemFilter.After); empty when this page is the last.
	Next string
}

// cursorPrefix marks an item cursor (and its version), so that another string is refused as one.
const cursorPrefix = "i1"

// cursorBody is an item cursor's content: a position in its listing's order (store.ItemCursor).
type cursorBody struct {
	V   string `json:"v"`
	L   string `json:"l"` // the listing it is a position in (listingOf): another's is refused
	Key string `json:"k,omitempty"`
	Iso bool   `json:"i,omitempty"`
	At  int64  `json:"t"`
	ID  int64  `json:"id"`
}

// listingOf names the listing of q, whose order a cursor is a position in: each state's order
// is its own, and the parked items' is by key.
func listingOf(q store.ItemQuery) string {
	if q.Parked {
		return "parked"
	}
	return string(q.State)
}

// itemCursor encodes c, a position in listing.
func itemCursor(listing string, c store.ItemCursor) string {
	b, _ := json.Marshal(cursorBody{V: cursorPrefix, L: listing, Key: c.Key, Iso: c.Isolate, At: c.At, ID: int64(c.ID)})
	return base64.RawURLEncoding.EncodeToString(b)
}

// parseItemCursor decodes a cursor itemCursor made for listing.
func parseItemCursor(listing, c string) (store.ItemCursor, error) {
	var body cursorBody
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		err = json.Unmarshal(raw, &body)
	}
	if err != nil || body.V != cursorPrefix || body.ID <= 0 {
		return store.ItemCursor{}, fmt.Errorf("After %q is not a cursor of an item listing (an ItemPage's Next): %w", cut(c, 64), ErrBadCursor)
	}
	if body.L != listing {
		// A position in another order would silently start this listing anywhere.
		return store.ItemCursor{}, fmt.Errorf("After is a cursor of the %s items' listing, not of the %s items' (each listing has its own order): %w",
			body.L, listing, ErrBadCursor)
	}
	return store.ItemCursor{Key: body.Key, Isolate: body.Iso, At: body.At, ID: store.ItemID(body.ID)}, nil
}

// cut shortens s to at most n bytes for a message.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// query checks f (naming every problem) and returns its store query.
func (f ItemFilter) query() (store.ItemQuery, error) {
	q := store.ItemQuery{State: store.State(f.State), Parked: f.Parked || f.Key != "", Name: f.Name, Key: f.Key, From: f.From, To: f.To, Limit: f.Limit}
	var errs []error
	switch f.State {
	case "":
		q.State = store.StatePending
	case record.StatePending, record.StateRunning, record.StateSucceeded, record.StateDead, record.StateCancelled:
	default:
		errs = append(errs, fmt.Errorf("State %q is not an item state (pending, running, succeeded, dead or cancelled)", f.State))
	}
	if q.Parked && q.State != store.StatePending {
		what := "Parked"
		if f.Key != "" {
			what = "Key"
		}
		errs = append(errs, fmt.Errorf("%s is set with State %q: only pending items are parked", what, f.State))
	}
	if f.Limit < 0 || f.Limit > maxDeadLetterLimit {
		errs = append(errs, fmt.Errorf("Limit %d is outside [0, %d]", f.Limit, maxDeadLetterLimit))
	}
	errs = append(errs, timeRangeProblems("", f.From, f.To)...)
	if f.After != "" {
		var err error
		if q.After, err = parseItemCursor(listingOf(q), f.After); err != nil {
			errs = append(errs, err)
		}
	}
	if q.Limit == 0 {
		q.Limit = defaultDeadLetterLimit
	}
	return q, errors.Join(errs...)
}

// Items returns a page of the items f selects, in the listing order of their state (see
// ItemFilter), and the cursor of the next page. Paging is by cursor (keyset), not by offset: each page reads its own rows from an
// index, so the thousandth page of a million items reads as fast as the first, and items
// created or finishing between pages neither repeat nor shift the pages. Running items are the
// exception: they are listed by when their lease runs out, which each heartbeat moves later, so
// a running item may appear again on a later page (and one started between pages may too).
// Queue.Item and
// Queue.Attempts inspect one item; Cancel and RunNow act on a pending one.
func (q *Queue) Items(ctx context.Context, f ItemFilter) (ItemPage, error) {
	sq, err := f.query()
	if err != nil {
		return ItemPage{}, fmt.Errorf("durable: Items: %w", err)
	}
	limit := sq.Limit
	sq.Limit++ // one more tells whether a next page exists
	rows, err := q.store.ListItems(ctx, sq)
	if err != nil {
		return ItemPage{}, err
	}
	var page ItemPage
	if len(rows) > limit {
		rows = rows[:limit]
		page.Next = itemCursor(listingOf(sq), store.CursorOf(sq, rows[limit-1]))
	}
	page.Items = make([]record.Item, len(rows))
	for i, it := range rows {
		page.Items[i] = itemOf(it)
	}
	return page, nil
}

// ItemResult is what Cancel or RunNow came to.
type ItemResult string

// The results of Cancel and RunNow. Only ItemCancelled and ItemDue changed the item.
const (
	ItemCancelled ItemResult = "cancelled" // Cancel: the pending item is cancelled; it will not run
	ItemDue       ItemResult = "due"       // RunNow: the pending item is due now, no longer parked
	// ItemPaused: nothing changed: RunNow of a pending item that a pause (Queue.Pause) holds
	// back, of its request name or of the breaker key it carries or is parked on. A run-now
	// does not bypass a pause, as a pause is an operator's decision too: resume it to run the
	// item. The audit log names the pause.
	ItemPaused ItemResult = "paused"
	// ItemRunning: nothing changed: the item is running, and an operator's action does not
	// interrupt a handler (it may be half way through its work); its outcome decides what
	// follows. Cancel it once it is pending again, if it fails.
	ItemRunning  ItemResult = "running"
	ItemFinished ItemResult = "finished"  // nothing changed: it had succeeded, died or been cancelled
	ItemNotFound ItemResult = "not_found" // there is no item with that id; nothing was recorded
)

// Cancel ends a pending item (parked or not) without running it: its state becomes
// record.StateCancelled, terminal. The item is kept (retention prunes only succeeded items),
// its dedupe key is free (a later Enqueue with the key inserts a new item), and the items after
// it with its ordering key no longer wait for it. A claim racing
// the cancel either wins (the item runs: ItemRunning) or loses (it never runs): the cancel is
// one statement that changes the item only while it is pending. A running item is not
// interrupted (ItemRunning), a finished one not changed (ItemFinished). actor and reason are
// required: the audit log (Queue.Audit) records each cancel with them, with outcome
// record.AuditNoChange and the item's state when nothing changed.
func (q *Queue) Cancel(ctx context.Context, id record.ItemID, actor, reason string) (ItemResult, error) {
	var errs []error
	if actor == "" {
		errs = append(errs, errors.New("actor is required: the audit log records who cancelled"))
	}
	if strings.TrimSpace(reason) == "" {
		errs = append(errs, errors.New("reason is required: a cancel says why"))
	}
	if err := errors.Join(errs...); err != nil {
		return "", fmt.Errorf("durable: Cancel: %w", err)
	}
	return q.changeItem(ctx, id, actor, record.AuditCancel, ItemCancelled, "reason: "+reason, q.store.CancelItem)
}

// RunNow makes a pending item due now (unless it is due already) and no longer parked, and
// wakes this instance's scheduler, which claims it at once (other instances find it at their
// next poll). It does not bypass what the claim and the dispatch check: an item with an
// ordering key still waits for the items before it, and if the breaker it was parked on still
// refuses calls, the attempt is turned away and the item parks again. Nor does it bypass a
// pause: an item held back by a pause of its request name, or of the breaker key it carries
// (WithBreakerKey) or is parked on, is not changed (ItemPaused; the key a breaker's key
// function computes is known only when the item is claimed, which then parks it). A running
// or finished item is not changed (ItemRunning, ItemFinished). actor is required: the audit
// log records each run-now with it.
func (q *Queue) RunNow(ctx context.Context, id record.ItemID, actor string) (ItemResult, error) {
	if actor == "" {
		return "", errors.New("durable: RunNow: actor is required: the audit log records who ran the item")
	}
	res, err := q.changeItem(ctx, id, actor, record.AuditRunNow, ItemDue, "", q.store.RunItemNow)
	if res == ItemDue {
		if s := q.running.Load(); s != nil {
			s.Wake()
		}
	}
	return res, err
}

// changeItem applies change to item id, auditing it as action by actor with detail; done is
// the result when the item was pending.
func (q *Queue) changeItem(ctx context.Context, id record.ItemID, actor string, action record.AuditAction, done ItemResult, detail string,
	change func(context.Context, store.ItemChange) (store.Item, bool, bool, error)) (ItemResult, error) {
	var res ItemResult
	now := q.clock.Now()
	_, _, found, err := change(ctx, store.ItemChange{ID: store.ItemID(id), Now: now, Audit: func(changed bool, it store.Item, held *store.PauseRow) store.AuditRow {
		e := store.AuditRow{At: now, Actor: actor, Action: string(action), TargetKind: string(record.AuditTargetItem),
			Target: strconv.FormatInt(int64(id), 10), Outcome: record.AuditDone}
		var why string
		switch {
		case changed:
			res = done
		case held != nil:
			res, why = ItemPaused, "the item is held back by the pause of "+heldBy(*held)+"; resume it to run the item"
		case it.State == store.StateRunning:
			res, why = ItemRunning, "the item is running; it was not interrupted"
		default:
			res, why = ItemFinished, "the item had finished: "+string(it.State)
		}
		e.Detail = detail
		if why != "" {
			e.Outcome, e.Detail = record.AuditNoChange, why
			if detail != "" {
				e.Detail += "; " + detail
			}
		}
		return e
	}})
	switch {
	case err != nil:
		return "", err
	case !found:
		return ItemNotFound, nil
	}
	return res, nil
}

// heldBy describes the pause p: "name billing.send by alice until resumed; reason: outage".
func heldBy(p store.PauseRow) string {
	return PauseTarget{Kind: record.PauseKind(p.Kind), Target: p.Target}.String() + " by " + p.Actor + " " + pauseDetail(p.Until, p.Reason)
}
