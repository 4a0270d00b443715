package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/switchboard-go/switchboard/durable/record"
)

// The kinds of bulk action, as the SQL lists them: an action on letters, or on items.
const (
	letterKinds = "('replay', 'discard')"
	itemKinds   = "('cancel', 'run_now', 'set_priority')"
)

// itemBulkColumn is v for an action on items, NULL for one on letters (the columns 0026 added
// are an item action's).
func itemBulkColumn(b BulkActionRow, v int64) any {
	if !record.BulkActionKind(b.Kind).OnItems() {
		return nil
	}
	return v
}

// itemBulkWhere is the condition selecting the pending items q selects (by name, parked key,
// due time), and its arguments.
func itemBulkWhere(q ItemQuery) (string, []any) {
	where, args := " WHERE state = 'pending'", []any{}
	if q.Name != "" {
		where += " AND name = ?"
		args = append(args, q.Name)
	}
	switch {
	case q.Key != "":
		where += " AND parked_key = ?"
		args = append(args, q.Key)
	case q.Parked:
		where += " AND parked_key IS NOT NULL"
	}
	if !q.From.IsZero() {
		where += " AND next_at >= ?"
		args = append(args, micros(q.From))
	}
	to := int64(math.MaxInt64)
	if !q.To.IsZero() {
		to = micros(q.To)
	}
	return where + " AND next_at < ?", append(args, to)
}

// CountBulkItems returns how many pending items q selects and the highest id among all items
// (0 when there are none), read in one transaction so that the count is of the items up to that
// id.
func (s *Store) CountBulkItems(ctx context.Context, q ItemQuery) (n int64, maxID ItemID, err error) {
	err = inTx(ctx, s.db, func(tx *sql.Tx) error {
		var top sql.NullInt64
		if err := tx.QueryRowContext(ctx, "SELECT MAX(id) FROM switchboard_items").Scan(&top); err != nil {
			return err
		}
		maxID = ItemID(top.Int64)
		where, args := itemBulkWhere(q)
		return tx.QueryRowContext(ctx, s.e.rebind("SELECT COUNT(*) FROM switchboard_items"+where+" AND id <= ?"), append(args, top.Int64)...).Scan(&n)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("durable: count items: %w", err)
	}
	return n, maxID, nil
}

// BulkItems returns, in id order, at most limit pending items q selects with ids in
// (after, upTo]: the next items an item action works on.
func (s *Store) BulkItems(ctx context.Context, q ItemQuery, after, upTo ItemID, limit int) ([]Item, error) {
	where, args := itemBulkWhere(q)
	var out []Item
	err := s.readRows(ctx, s.e.rebind("SELECT "+itemColumns+" FROM switchboard_items"+where+" AND id > ? AND id <= ? ORDER BY id LIMIT ?"),
		append(args, int64(after), int64(upTo), limit), func(rows RowReader) error { return readItems(rows, &out) })
	if err != nil {
		return nil, fmt.Errorf("durable: items of a bulk action: %w", err)
	}
	return out, nil
}

// notHeldSQL is the condition that no pause holds an item back at a time (placeholder: now), as
// pauseHoldingSQL reads it for one item: of its name, or of the breaker key it is parked on or
// carries.
const notHeldSQL = `NOT EXISTS (SELECT 1 FROM switchboard_pauses p
	WHERE ((p.kind = 'name' AND p.target = switchboard_items.name)
	    OR (p.kind = 'breaker_key' AND (p.target = switchboard_items.parked_key OR p.target = switchboard_items.guard_key)))
	  AND (p.until IS NULL OR p.until > ?))`

// errNotHeld rolls back a step whose action its owner no longer holds.
var errNotHeld = errors.New("the bulk action is not held")

// StepItemBulkAction applies c to item if it is still pending (for a run-now: and no pause holds
// it back at now) and moves owner's action id's cursor from from to item, counting the item as
// changed or skipped, in one transaction. held is false, and nothing is changed, when owner no
// longer holds the action (or its cursor is no longer from).
func (s *Store) StepItemBulkAction(ctx context.Context, id int64, owner string, from, item ItemID, c ItemBulkChange, now time.Time) (held, changed bool, err error) {
	at := micros(now)
	var update string
	var args []any
	switch c.Kind {
	case record.BulkCancelItems:
		update, args = s.e.stmts().cancel, []any{at, int64(item)}
	case record.BulkRunItemsNow:
		update, args = `UPDATE switchboard_items SET next_at = CASE WHEN next_at > ? THEN ? ELSE next_at END, parked_key = NULL, updated_at = ?
	WHERE id = ? AND state = 'pending' AND `+notHeldSQL, []any{at, at, at, int64(item), at}
	case record.BulkSetItemPriority:
		if c.Priority < 0 || c.Priority > MaxPriority {
			return false, false, fmt.Errorf("durable: bulk action %d: priority %d is out of range 0..%d", id, c.Priority, MaxPriority)
		}
		update, args = `UPDATE switchboard_items SET priority = ?, head_start = ?, updated_at = ? WHERE id = ? AND state = 'pending'`,
			[]any{c.Priority, c.HeadStart.Microseconds(), at, int64(item)}
	default:
		return false, false, fmt.Errorf("durable: bulk action %d: %q is not an action on items", id, c.Kind)
	}
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
		done, skipped := 0, 1
		if changed {
			done, skipped = 1, 0
		}
		res, err = tx.ExecContext(ctx, s.e.rebind(`UPDATE switchboard_bulk_actions
	SET changed = changed + ?, skipped = skipped + ?, cursor_id = ?, updated_at = ?
	WHERE id = ? AND lease_owner = ? AND cursor_id = ? AND finished_at IS NULL`), done, skipped, int64(item), at, id, owner, int64(from))
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
		if n == 0 {
			return errNotHeld
		}
		return nil
	})
	switch {
	case errors.Is(err, errNotHeld):
		return false, false, nil
	case err != nil:
		return false, false, fmt.Errorf("durable: bulk action %d: item %d: %w", id, item, err)
	}
	return true, changed, nil
}
