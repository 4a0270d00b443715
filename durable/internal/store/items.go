package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"
)

// StateCancelled is the state of an item an operator cancelled before it ran: terminal, kept.
const StateCancelled State = "cancelled"

// ItemQuery selects a page of ListItems: the items in State (with a parked key when Parked),
// of Name and parked on Key when those are set, created in [From, To) (zero: unbounded), after
// the position (AfterCreated, AfterID) of (created_at, id) order, at most Limit.
type ItemQuery struct {
	State        State
	Parked       bool
	Name, Key    string
	From, To     time.Time
	AfterCreated int64 // microseconds; with AfterID zero, the page starts at From
	AfterID      ItemID
	Limit        int
}

// itemListSQL is the statement of one listing shape: the equality filters it has, in the order
// of their arguments. Each shape reads an index whose leading columns are its equality
// filters and whose next ones (created_at, id) are the listing's order, from the cursor.
func itemListSQL(q ItemQuery) (string, []any) {
	var where string
	var args []any
	switch {
	case q.Key != "":
		// switchboard_items_parked (parked_key, created_at, id): only parked items have entries.
		where = "parked_key = ? AND state = ?"
		args = append(args, q.Key, string(StatePending))
		if q.Name != "" {
			where += " AND name = ?"
			args = append(args, q.Name)
		}
	case q.Name != "":
		// switchboard_items_by_name (name, state, created_at, id).
		where = "name = ? AND state = ?"
		args = append(args, q.Name, string(q.State))
		if q.Parked {
			// Not "parked_key IS NOT NULL", which the parked indexes' predicate would match:
			// the planner then read one of them whole and sorted it, thinking the parked items
			// of a name few. Parked keys are never empty.
			where += " AND COALESCE(parked_key, '') <> ''"
		}
	case q.Parked:
		// switchboard_items_parked_list (created_at, id) WHERE state = 'pending' AND parked_key IS NOT NULL
		// AND created_at >= 0.
		where = "state = 'pending' AND parked_key IS NOT NULL AND created_at >= 0"
	default:
		// switchboard_items_list_<state> (created_at, id) WHERE state = '<state>' AND
		// created_at >= 0: the state is in the text (one of the States, checked by
		// ListItems) and the guard too, so that the plan, generic too, can read the partial
		// index (and only the listings can).
		where = "state = '" + string(q.State) + "' AND created_at >= 0"
	}
	after, afterID := q.AfterCreated, int64(q.AfterID)
	if afterID == 0 {
		// The first page: (created_at, id) > (From, 0) is created_at >= From, ids being positive.
		after = micros(q.From)
	}
	to := int64(math.MaxInt64)
	if !q.To.IsZero() {
		to = micros(q.To)
	}
	where += " AND (created_at, id) > (?, ?) AND created_at < ?"
	args = append(args, after, afterID, to, q.Limit)
	return "SELECT " + itemColumns + " FROM switchboard_items WHERE " + where + " ORDER BY created_at, id LIMIT ?", args
}

// ListItems returns the page q selects, in (created_at, id) order.
func (s *Store) ListItems(ctx context.Context, q ItemQuery) ([]Item, error) {
	switch q.State {
	case StatePending, StateRunning, StateSucceeded, StateDead, StateCancelled:
	default:
		return nil, fmt.Errorf("durable: items: unknown state %q", q.State)
	}
	query, args := itemListSQL(q)
	rows, err := s.db.QueryContext(ctx, s.e.rebind(query), args...)
	if err != nil {
		return nil, fmt.Errorf("durable: items: %w", err)
	}
	defer rows.Close()
	out := make([]Item, 0, q.Limit)
	sc := newItemScan()
	for rows.Next() {
		it, _, err := sc.scan(rows)
		if err != nil {
			return nil, fmt.Errorf("durable: items: %w", err)
		}
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("durable: items: %w", err)
	}
	return out, nil
}

// ItemChange is an operator's change of one pending item (CancelItem, RunItemNow).
type ItemChange struct {
	ID  ItemID
	Now time.Time
	// Audit returns the audit row of the change, written in its transaction when there is
	// such an item: changed says whether it was pending (and so changed); it is the item after
	// the change, or as found.
	Audit func(changed bool, it Item) AuditRow
}

// CancelItem makes c's item cancelled if it is still pending (a claim racing it wins or
// loses whole), clearing its parked key; a running or finished item is left as it is. It
// writes c.Audit's row in the same transaction and returns the item after, whether it
// changed, and whether there is one.
func (s *Store) CancelItem(ctx context.Context, c ItemChange) (it Item, changed, found bool, err error) {
	return s.changeItem(ctx, c, `UPDATE switchboard_items SET state = 'cancelled', parked_key = NULL, updated_at = ?
	WHERE id = ? AND state = 'pending'`, micros(c.Now), int64(c.ID))
}

// RunItemNow makes c's item due at c.Now (unless it is due sooner) and clears its parked key,
// if it is still pending; a running or finished item is left as it is. It writes c.Audit's row
// in the same transaction, as CancelItem does.
func (s *Store) RunItemNow(ctx context.Context, c ItemChange) (it Item, changed, found bool, err error) {
	now := micros(c.Now)
	return s.changeItem(ctx, c, `UPDATE switchboard_items SET next_at = CASE WHEN next_at > ? THEN ? ELSE next_at END,
	parked_key = NULL, updated_at = ? WHERE id = ? AND state = 'pending'`, now, now, now, int64(c.ID))
}

func (s *Store) changeItem(ctx context.Context, c ItemChange, update string, args ...any) (it Item, changed, found bool, err error) {
	err = inTx(ctx, s.db, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.e.rebind(update), args...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		changed = n > 0
		it, _, err = scanItem(tx.QueryRowContext(ctx, s.e.rebind("SELECT "+itemColumns+" FROM switchboard_items WHERE id = ?"), int64(c.ID)))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			it, err = Item{}, nil
		case err != nil:
			return err
		default:
			found = true
		}
		if !found {
			return nil // nothing to audit: there is no such item
		}
		return s.AddAudit(ctx, tx, c.Audit(changed, it))
	})
	if err != nil {
		return Item{}, false, false, fmt.Errorf("durable: item %d: %w", c.ID, err)
	}
	return it, changed, found, nil
}
