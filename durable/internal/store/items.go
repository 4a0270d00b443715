package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
)

// StateCancelled is the state of an item an operator cancelled before it ran: terminal, kept.
const StateCancelled State = "cancelled"

// CursorOf returns the position of it in the listing q selects.
func CursorOf(q ItemQuery, it Item) ItemCursor {
	c := ItemCursor{ID: it.ID, Key: it.ParkedKey, Isolate: it.Isolate}
	switch listingOf(q) {
	case listPending, listParked:
		c.At = micros(it.NextAt)
	case listRunning:
		c.At = micros(it.LeaseUntil)
	default:
		c.At = micros(it.UpdatedAt)
	}
	return c
}

// listing is the order a query's items are listed in, and the index it reads.
type listing int

const (
	listPending  listing = iota // switchboard_items_due (isolate, next_at, id), isolate 0 then 1
	listParked                  // switchboard_items_parked (parked_key, next_at, id)
	listRunning                 // switchboard_items_lease (lease_until, id)
	listFinished                // switchboard_items_<state> (updated_at, id), newest first
)

func listingOf(q ItemQuery) listing {
	switch {
	case q.Parked || q.Key != "":
		return listParked
	case q.State == StatePending:
		return listPending
	case q.State == StateRunning:
		return listRunning
	}
	return listFinished
}

// itemListSQL is the statement reading one page of q from after, and its arguments. The state
// is in the text (one of the States, checked by ListItems), so that the plan, generic too,
// can read the state's partial index.
func itemListSQL(q ItemQuery, after ItemCursor) (string, []any) {
	from, to := micros(q.From), int64(math.MaxInt64)
	if !q.To.IsZero() {
		to = micros(q.To)
	}
	first, id := after.ID == 0, int64(after.ID)
	var where []string
	var args []any
	add := func(cond string, a ...any) { where, args = append(where, cond), append(args, a...) }
	// The first page starts at From: (t, id) > (From, 0) is t >= From, ids being positive;
	// newest first, it starts at To: (t, id) < (To, 0) is t < To.
	at := after.At
	if first {
		at = from
	}
	var order string
	switch listingOf(q) {
	case listPending:
		iso := 0
		if after.Isolate {
			iso = 1
		}
		add("state = 'pending'")
		add("isolate = ?", iso)
		add("(next_at, id) > (?, ?)", at, id)
		add("next_at < ?", to)
		order = "next_at, id"
	case listParked:
		add("state = 'pending'")
		if q.Key != "" {
			add("parked_key = ?", q.Key)
			add("(next_at, id) > (?, ?)", at, id)
		} else {
			// (parked_key, next_at, id) > (key, at, id), written out so that its first column
			// bounds the index scan on both engines.
			add("parked_key >= ?", after.Key)
			add("(parked_key > ? OR (next_at, id) > (?, ?))", after.Key, at, id)
			add("next_at >= ?", from)
		}
		add("next_at < ?", to)
		order = "parked_key, next_at, id"
	case listRunning:
		add("state = 'running'")
		add("(lease_until, id) > (?, ?)", at, id)
		add("lease_until < ?", to)
		order = "lease_until, id"
	default:
		if first {
			at = to
		}
		add("state = '" + string(q.State) + "'")
		add("(updated_at, id) < (?, ?)", at, id)
		add("updated_at >= ?", from)
		order = "updated_at DESC, id DESC"
	}
	if q.Name != "" {
		add("name = ?", q.Name)
	}
	args = append(args, q.Limit)
	table := "switchboard_items" // the live items' indexes
	if listingOf(q) == listFinished {
		table = allItems
	}
	return "SELECT " + itemColumns + " FROM " + table + " WHERE " + strings.Join(where, " AND ") + " ORDER BY " + order + " LIMIT ?", args
}

// ListItems returns the page q selects, in its state's listing order: pending items in the
// order they run (those to run alone after the others), parked ones by key then when due,
// running ones by when their lease runs out, finished ones by when they finished, newest
// first. The listing time that From and To bound is, in that order, when the item is due,
// when its lease runs out, when it finished. A name filter reads the state's listing and
// skips the items of other names.
func (s *Store) ListItems(ctx context.Context, q ItemQuery) ([]Item, error) {
	switch q.State {
	case StatePending, StateRunning, StateSucceeded, StateDead, StateCancelled:
	default:
		return nil, fmt.Errorf("durable: items: unknown state %q", q.State)
	}
	out, err := s.listPage(ctx, q, q.After, make([]Item, 0, q.Limit))
	if err != nil || listingOf(q) != listPending || q.After.Isolate || len(out) >= q.Limit {
		return out, err
	}
	// The items that run with others are listed; those to run alone follow.
	rest := q
	rest.Limit -= len(out)
	return s.listPage(ctx, rest, ItemCursor{Isolate: true}, out)
}

// listPage appends the page of q after after to out. The listing is planned for this run
// (replannedRows): a dashboard polls it every few seconds, and a plan its connection kept from
// an idle spell read the whole claim's table at every poll once a burst filled it
// (TestListingsKeepTheirIndexesAfterAnIdleSpell).
func (s *Store) listPage(ctx context.Context, q ItemQuery, after ItemCursor, out []Item) ([]Item, error) {
	query, args := itemListSQL(q, after)
	err := s.readRows(ctx, s.e.rebind(query), args, func(rows RowReader) error { return readItems(rows, &out) })
	if err != nil {
		return nil, fmt.Errorf("durable: items: %w", err)
	}
	return out, nil
}

// CancelItem makes c's item cancelled if it is still pending (a claim racing it wins or
// loses whole), clearing its parked key; a running or finished item is left as it is. It
// writes c.Audit's row in the same transaction and returns the item after, whether it
// changed, and whether there is one.
func (s *Store) CancelItem(ctx context.Context, c ItemChange) (it Item, changed, found bool, err error) {
	return s.changeItem(ctx, c, false, s.e.stmts().cancel, micros(c.Now), int64(c.ID))
}

// RunItemNow makes c's item due at c.Now (unless it is due sooner) and clears its parked key,
// if it is still pending and no pause holds it back at c.Now: neither one of its request name
// nor one of the breaker key it is parked on or guarded by (its key function's key is known
// only when it is claimed). A running, finished or held item is left as it is. It writes
// c.Audit's row in the same transaction, as CancelItem does.
func (s *Store) RunItemNow(ctx context.Context, c ItemChange) (it Item, changed, found bool, err error) {
	now := micros(c.Now)
	return s.changeItem(ctx, c, true, `UPDATE switchboard_items SET next_at = CASE WHEN next_at > ? THEN ? ELSE next_at END,
	parked_key = NULL, updated_at = ? WHERE id = ? AND state = 'pending'`, now, now, now, int64(c.ID))
}

// pauseHoldingSQL reads the pause that holds an item back at a time, if one does: of its name
// (first) or of a breaker key it carries. Placeholders: name, the two keys, now.
const pauseHoldingSQL = `SELECT ` + pauseColumns + ` FROM switchboard_pauses
	WHERE ((kind = 'name' AND target = ?) OR (kind = 'breaker_key' AND target IN (?, ?))) AND (until IS NULL OR until > ?)
	ORDER BY kind DESC, target LIMIT 1`

// decidedKey keys the function a test gives withDecided.
type decidedKey struct{}

// withDecided returns ctx carrying f, which an item change made under it calls in its
// transaction once the state the change is decided on is read, before it is acted on: the
// tests race a concurrent write there.
func withDecided(ctx context.Context, f func()) context.Context {
	return context.WithValue(ctx, decidedKey{}, f)
}

// changeItem reads c's item, locked (PostgreSQL; the write transaction is immediate on
// SQLite), and, if it is pending and (when held) no pause holds it back, applies update. The
// item being read under the lock, a claim or a completion racing the change waits for it: the
// state the change is decided on is the state it is made in, never one read after another
// change committed (which could show a pending item the change missed).
func (s *Store) changeItem(ctx context.Context, c ItemChange, held bool, update string, args ...any) (it Item, changed, found bool, err error) {
	// A finished item is read from the view of all items, unlocked: it is never changed again.
	read := s.e.rebind("SELECT " + itemColumns + " FROM " + allItems + " WHERE id = ?")
	locked := s.e.rebind("SELECT " + itemColumns + " FROM switchboard_items WHERE id = ?")
	if s.e.String() == "postgres" {
		locked += " FOR UPDATE"
	}
	err = inTx(ctx, s.db, func(tx *sql.Tx) error {
		changed, found = false, false
		it, _, err = scanItem(tx.QueryRowContext(ctx, locked, int64(c.ID)))
		if errors.Is(err, sql.ErrNoRows) {
			it, _, err = scanItem(tx.QueryRowContext(ctx, read, int64(c.ID)))
		}
		switch {
		case errors.Is(err, sql.ErrNoRows):
			it = Item{}
			return nil // nothing to audit: there is no such item
		case err != nil:
			return err
		}
		found = true
		if decided, ok := ctx.Value(decidedKey{}).(func()); ok {
			decided()
		}
		var pause *PauseRow
		if it.State == StatePending && held {
			p, err := scanPause(tx.QueryRowContext(ctx, s.e.rebind(pauseHoldingSQL), it.Name, it.ParkedKey, it.GuardKey, micros(c.Now)))
			switch {
			case err == nil:
				pause = &p
			case !errors.Is(err, sql.ErrNoRows):
				return err
			}
		}
		if it.State == StatePending && pause == nil {
			res, err := tx.ExecContext(ctx, s.e.rebind(update), args...)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n != 1 {
				return errors.Join(errors.New("the pending item read under a lock was not changed"), err)
			}
			changed = true
			if it, _, err = scanItem(tx.QueryRowContext(ctx, read, int64(c.ID))); err != nil {
				return err
			}
		}
		return s.AddAudit(ctx, tx, c.Audit(changed, it, pause))
	})
	if err != nil {
		return Item{}, false, false, fmt.Errorf("durable: item %d: %w", c.ID, err)
	}
	return it, changed, found, nil
}
