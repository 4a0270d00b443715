package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

const bulkActionColumns = `id, kind, filter, reason, actor, state, rate, in_flight, reset_breaker, max_letter, matched, cursor_id,
	replayed, still_failed, discarded, unknown, skipped, waiting_key, error, lease_owner, lease_until, created_at, updated_at, finished_at,
	priority, max_item, changed`

func scanBulkAction(r rowScanner) (BulkActionRow, error) {
	var (
		b                                      BulkActionRow
		reason, reset, waiting, errText, owner sql.NullString
		until, finished, priority, maxItem     sql.NullInt64
		maxLetter, cursor, created, updated    int64
	)
	err := r.Scan(&b.ID, &b.Kind, &b.Filter, &reason, &b.Actor, &b.State, &b.Rate, &b.InFlight, &reset, &maxLetter, &b.Matched, &cursor,
		&b.Replayed, &b.StillFailed, &b.Discarded, &b.Unknown, &b.Skipped, &waiting, &errText, &owner, &until, &created, &updated, &finished,
		&priority, &maxItem, &b.Changed)
	if err != nil {
		return BulkActionRow{}, err
	}
	b.Reason, b.ResetBreaker, b.WaitingKey, b.Error, b.LeaseOwner = reason.String, reset.String, waiting.String, errText.String, owner.String
	b.MaxLetter, b.Cursor = DeadLetterID(maxLetter), DeadLetterID(cursor)
	b.Priority, b.MaxItem = int(priority.Int64), ItemID(maxItem.Int64)
	b.LeaseUntil, b.CreatedAt, b.UpdatedAt, b.FinishedAt = fromMicros(until.Int64), fromMicros(created), fromMicros(updated), fromMicros(finished.Int64)
	return b, nil
}

// CountDeadLetters returns how many letters f selects and the highest id among all letters
// (0 when there are none), read in one transaction so that the count is of the letters up to
// that id.
func (s *Store) CountDeadLetters(ctx context.Context, f DeadLetterFilter) (n int64, maxID DeadLetterID, err error) {
	err = inTx(ctx, s.db, func(tx *sql.Tx) error {
		var top sql.NullInt64
		if err := tx.QueryRowContext(ctx, "SELECT MAX(id) FROM switchboard_dead_letters").Scan(&top); err != nil {
			return err
		}
		maxID = DeadLetterID(top.Int64)
		where, args := deadLetterWhere(f)
		return tx.QueryRowContext(ctx, s.e.rebind("SELECT COUNT(*) FROM switchboard_dead_letters"+where+" AND id <= ?"), append(args, top.Int64)...).Scan(&n)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("durable: count dead letters: %w", err)
	}
	return n, maxID, nil
}

// InsertBulkAction stores b (its ID, cursor and totals are ignored) and audit, in one
// transaction, and returns b's id. The audit row's Target is set to that id.
func (s *Store) InsertBulkAction(ctx context.Context, b BulkActionRow, audit AuditRow) (int64, error) {
	var id int64
	err := inTx(ctx, s.db, func(tx *sql.Tx) error {
		// One insert at a time, so that the check below sees every action inserted before
		// (PostgreSQL: the lock conflicts with itself and with the runners' updates, which wait
		// the few milliseconds of this transaction; SQLite: the one writer).
		if s.e.String() == "postgres" {
			if _, err := tx.ExecContext(ctx, `LOCK TABLE switchboard_bulk_actions IN SHARE ROW EXCLUSIVE MODE`); err != nil {
				return err
			}
		}
		var active int64
		err := tx.QueryRowContext(ctx, s.e.rebind(`SELECT id FROM switchboard_bulk_actions
	WHERE kind = ? AND filter = ? AND finished_at IS NULL ORDER BY id LIMIT 1`), b.Kind, b.Filter).Scan(&active)
		switch {
		case err == nil:
			return &BulkActionActiveError{ID: active}
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		err = tx.QueryRowContext(ctx, s.e.rebind(`INSERT INTO switchboard_bulk_actions
	(kind, filter, reason, actor, state, rate, in_flight, reset_breaker, max_letter, matched, created_at, updated_at, priority, max_item)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`),
			b.Kind, b.Filter, nullString(storedText(b.Reason)), storedText(b.Actor), b.State, b.Rate, b.InFlight, nullString(b.ResetBreaker),
			int64(b.MaxLetter), b.Matched, micros(b.CreatedAt), micros(b.CreatedAt), itemBulkColumn(b, int64(b.Priority)), itemBulkColumn(b, int64(b.MaxItem))).Scan(&id)
		if err != nil {
			return err
		}
		audit.Target = fmt.Sprint(id)
		return s.AddAudit(ctx, tx, audit)
	})
	if active := (*BulkActionActiveError)(nil); errors.As(err, &active) {
		return 0, active
	}
	if err != nil {
		return 0, fmt.Errorf("durable: store bulk action: %w", err)
	}
	return id, nil
}

// BulkAction returns one action; found is false when there is none.
func (s *Store) BulkAction(ctx context.Context, id int64) (b BulkActionRow, found bool, err error) {
	b, err = scanBulkAction(s.db.QueryRowContext(ctx, s.e.rebind("SELECT "+bulkActionColumns+" FROM switchboard_bulk_actions WHERE id = ?"), id))
	if errors.Is(err, sql.ErrNoRows) {
		return BulkActionRow{}, false, nil
	}
	if err == nil {
		err = s.withTally(ctx, s.db, &b)
	}
	if err != nil {
		return BulkActionRow{}, false, fmt.Errorf("durable: bulk action %d: %w", id, err)
	}
	return b, true, nil
}

// BulkActions returns the actions with ids below before (all when 0), newest first, at most
// limit: those on items when items is true, those on dead letters otherwise.
func (s *Store) BulkActions(ctx context.Context, before int64, limit int, items bool) ([]BulkActionRow, error) {
	q, args := "SELECT "+bulkActionColumns+" FROM switchboard_bulk_actions WHERE kind IN "+letterKinds, []any{}
	if items {
		q = "SELECT " + bulkActionColumns + " FROM switchboard_bulk_actions WHERE kind IN " + itemKinds
	}
	if before > 0 {
		q += " AND id < ?"
		args = append(args, before)
	}
	rows, err := s.db.QueryContext(ctx, s.e.rebind(q+" ORDER BY id DESC LIMIT ?"), append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("durable: bulk actions: %w", err)
	}
	defer rows.Close()
	var out []BulkActionRow
	for rows.Next() {
		b, err := scanBulkAction(rows)
		if err != nil {
			return nil, fmt.Errorf("durable: bulk actions: %w", err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("durable: bulk actions: %w", err)
	}
	rows.Close()
	for i := range out {
		if err := s.withTally(ctx, s.db, &out[i]); err != nil {
			return nil, fmt.Errorf("durable: bulk actions: %w", err)
		}
	}
	return out, nil
}

// ClaimBulkAction leases the oldest unfinished action whose lease is free or ran out at now to
// owner until until, and returns it; found is false when there is none to take.
func (s *Store) ClaimBulkAction(ctx context.Context, owner string, now, until time.Time) (b BulkActionRow, found bool, err error) {
	b, err = scanBulkAction(s.db.QueryRowContext(ctx, s.e.rebind(`UPDATE switchboard_bulk_actions
	SET lease_owner = ?, lease_until = ?, updated_at = ?
	WHERE id = (SELECT id FROM switchboard_bulk_actions WHERE finished_at IS NULL AND (lease_until IS NULL OR lease_until <= ?) ORDER BY id LIMIT 1)
	  AND finished_at IS NULL AND (lease_until IS NULL OR lease_until <= ?)
	RETURNING `+bulkActionColumns), owner, micros(until), micros(now), micros(now), micros(now)))
	if errors.Is(err, sql.ErrNoRows) {
		return BulkActionRow{}, false, nil
	}
	if err != nil {
		return BulkActionRow{}, false, fmt.Errorf("durable: claim bulk action: %w", err)
	}
	return b, true, nil
}

// SaveBulkAction extends owner's lease on action id to until and writes p; held is false (and
// nothing is written) when owner no longer holds it: the action was cancelled, or its lease
// ran out and another instance took it.
func (s *Store) SaveBulkAction(ctx context.Context, id int64, owner string, until, now time.Time, p BulkProgress) (held bool, err error) {
	res, err := s.db.ExecContext(ctx, s.e.rebind(`UPDATE switchboard_bulk_actions
	SET lease_until = ?, updated_at = ?, state = ?, waiting_key = ?, error = ?
	WHERE id = ? AND lease_owner = ? AND finished_at IS NULL`),
		micros(until), micros(now), p.State, nullString(p.WaitingKey), nullString(storedText(p.Error)), id, owner)
	if err != nil {
		return false, fmt.Errorf("durable: save bulk action %d: %w", id, err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// CountBulkUnknown adds one to the unknown total of action id: a replay ran whose outcome
// could not be recorded.
func (s *Store) CountBulkUnknown(ctx context.Context, id int64, now time.Time) error {
	_, err := s.db.ExecContext(ctx, s.e.rebind(`UPDATE switchboard_bulk_actions SET unknown = unknown + 1, updated_at = ? WHERE id = ?`), micros(now), id)
	if err != nil {
		return fmt.Errorf("durable: count unknown outcome of bulk action %d: %w", id, err)
	}
	return nil
}

// bulkTally counts, per outcome, the events of action id on letters above cursor: the letters
// it settled that its stored totals do not hold yet (those are rolled up as the cursor passes
// them).
const bulkTally = `SELECT
	COALESCE(SUM(CASE WHEN outcome = 'replayed' THEN 1 ELSE 0 END), 0),
	COALESCE(SUM(CASE WHEN outcome = 'still_failed' THEN 1 ELSE 0 END), 0),
	COALESCE(SUM(CASE WHEN outcome = 'discarded' THEN 1 ELSE 0 END), 0)
	FROM switchboard_dead_letter_events WHERE bulk_action_id = ? AND dead_letter_id > ?`

// withTally adds to b's stored totals the outcomes above its cursor.
func (s *Store) withTally(ctx context.Context, db interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}, b *BulkActionRow) error {
	var r, f, d int64
	if err := db.QueryRowContext(ctx, s.e.rebind(bulkTally), b.ID, int64(b.Cursor)).Scan(&r, &f, &d); err != nil {
		return err
	}
	b.Replayed, b.StillFailed, b.Discarded = b.Replayed+r, b.StillFailed+f, b.Discarded+d
	return nil
}

// AdvanceBulkAction moves owner's action id's cursor from from to to, rolling the outcomes of
// the letters in between into its stored totals, in one statement; it reports false when owner
// no longer holds the action (or the cursor is no longer from).
func (s *Store) AdvanceBulkAction(ctx context.Context, id int64, owner string, from, to DeadLetterID, now time.Time) (bool, error) {
	count := func(outcome EventOutcome) string {
		return `(SELECT COUNT(*) FROM switchboard_dead_letter_events e WHERE e.bulk_action_id = switchboard_bulk_actions.id
	AND e.dead_letter_id > switchboard_bulk_actions.cursor_id AND e.dead_letter_id <= ? AND e.outcome = '` + string(outcome) + `')`
	}
	res, err := s.db.ExecContext(ctx, s.e.rebind(`UPDATE switchboard_bulk_actions
	SET replayed = replayed + `+count(OutcomeReplayed)+`, still_failed = still_failed + `+count(OutcomeStillFailed)+`,
	    discarded = discarded + `+count(OutcomeDiscarded)+`, cursor_id = ?, updated_at = ?
	WHERE id = ? AND lease_owner = ? AND cursor_id = ? AND finished_at IS NULL`),
		int64(to), int64(to), int64(to), int64(to), micros(now), id, owner, int64(from))
	if err != nil {
		return false, fmt.Errorf("durable: advance bulk action %d: %w", id, err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// FinishBulkAction ends owner's action id in state (done or failed) with errText. When it is
// done, the letters it matched that none of its outcomes accounts for are counted as skipped
// (others settled them first); a failed action did not reach every letter, so it counts none.
// An item action's skipped, counted as it goes, is raised likewise to the items it matched
// that it did not change (those that left the pending state before it read them).
// It reports false when owner no longer held it. audit, when not nil, is given the action as it
// ends and returns the audit entry to append in the same transaction (none when nil).
func (s *Store) FinishBulkAction(ctx context.Context, id int64, owner, state, errText string, now time.Time, audit func(b BulkActionRow) *AuditRow) (bool, error) {
	var applied bool
	err := inTx(ctx, s.db, func(tx *sql.Tx) error {
		b, err := scanBulkAction(tx.QueryRowContext(ctx, s.e.rebind("SELECT "+bulkActionColumns+" FROM switchboard_bulk_actions WHERE id = ? AND lease_owner = ? AND finished_at IS NULL"), id, owner))
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := s.withTally(ctx, tx, &b); err != nil {
			return err
		}
		skipped := b.Skipped // 0 for a letter action
		if state == BulkDone {
			skipped = max(b.Matched-b.Replayed-b.StillFailed-b.Discarded-b.Unknown-b.Changed, skipped)
		}
		res, err := tx.ExecContext(ctx, s.e.rebind(`UPDATE switchboard_bulk_actions
	SET state = ?, error = ?, finished_at = ?, updated_at = ?, lease_owner = NULL, lease_until = NULL, waiting_key = NULL, skipped = ?
	WHERE id = ? AND lease_owner = ? AND finished_at IS NULL`),
			state, nullString(storedText(errText)), micros(now), micros(now), skipped, id, owner)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		applied = n > 0
		if err != nil || !applied || audit == nil {
			return err
		}
		b.State, b.Error, b.Skipped, b.FinishedAt, b.UpdatedAt = state, errText, skipped, now, now
		if r := audit(b); r != nil {
			return s.AddAudit(ctx, tx, *r)
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("durable: finish bulk action %d: %w", id, err)
	}
	return applied, nil
}

// ReleaseBulkAction gives up owner's lease on action id (its scheduler is stopping), so that
// another instance takes it up at its next poll.
func (s *Store) ReleaseBulkAction(ctx context.Context, id int64, owner string, now time.Time) error {
	_, err := s.db.ExecContext(ctx, s.e.rebind(`UPDATE switchboard_bulk_actions
	SET lease_owner = NULL, lease_until = NULL, updated_at = ? WHERE id = ? AND lease_owner = ? AND finished_at IS NULL`), micros(now), id, owner)
	if err != nil {
		return fmt.Errorf("durable: release bulk action %d: %w", id, err)
	}
	return nil
}

// DeferBulkAction gives up owner's lease on action id and writes p, leaving the action to no
// instance until until: this one cannot go on with it (it lacks a letter's request), another
// may, and none takes it up again before then.
func (s *Store) DeferBulkAction(ctx context.Context, id int64, owner string, until, now time.Time, p BulkProgress) error {
	_, err := s.db.ExecContext(ctx, s.e.rebind(`UPDATE switchboard_bulk_actions
	SET lease_owner = NULL, lease_until = ?, updated_at = ?, state = ?, waiting_key = ?, error = ?
	WHERE id = ? AND lease_owner = ? AND finished_at IS NULL`),
		micros(until), micros(now), p.State, nullString(p.WaitingKey), nullString(storedText(p.Error)), id, owner)
	if err != nil {
		return fmt.Errorf("durable: hand back bulk action %d: %w", id, err)
	}
	return nil
}

// CancelBulkAction ends the unfinished action id as cancelled and appends audit, in one
// transaction; found is false for an unknown id, and cancelled false (audit then recorded
// with outcome no_change by the caller's choice of audit) when it had already finished.
func (s *Store) CancelBulkAction(ctx context.Context, id int64, now time.Time, audit func(cancelled bool, b BulkActionRow) AuditRow) (b BulkActionRow, found, cancelled bool, err error) {
	err = inTx(ctx, s.db, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.e.rebind(`UPDATE switchboard_bulk_actions
	SET state = 'cancelled', finished_at = ?, updated_at = ?, lease_owner = NULL, lease_until = NULL, waiting_key = NULL
	WHERE id = ? AND finished_at IS NULL`), micros(now), micros(now), id)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		cancelled = n > 0
		b, err = scanBulkAction(tx.QueryRowContext(ctx, s.e.rebind("SELECT "+bulkActionColumns+" FROM switchboard_bulk_actions WHERE id = ?"), id))
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		if err := s.withTally(ctx, tx, &b); err != nil {
			return err
		}
		return s.AddAudit(ctx, tx, audit(cancelled, b))
	})
	if err != nil {
		return BulkActionRow{}, false, false, fmt.Errorf("durable: cancel bulk action %d: %w", id, err)
	}
	return b, found, cancelled, nil
}

// BulkLetters returns, in id order, at most limit failed letters f selects with ids in
// (after, upTo] that action has not already replayed to a still-failed outcome: the next letters
// a bulk action works on. Letters it replayed successfully or discarded are no longer failed.
func (s *Store) BulkLetters(ctx context.Context, action int64, f DeadLetterFilter, after, upTo DeadLetterID, limit int) ([]DeadLetter, error) {
	where, args := deadLetterWhere(f)
	q := "SELECT " + deadLetterColumns + " FROM switchboard_dead_letters d" + where + ` AND id > ? AND id <= ?
	AND NOT EXISTS (SELECT 1 FROM switchboard_dead_letter_events e WHERE e.bulk_action_id = ? AND e.dead_letter_id = d.id AND e.outcome = ?)
	ORDER BY id LIMIT ?`
	args = append(args, int64(after), int64(upTo), action, string(OutcomeStillFailed), limit)
	var out []DeadLetter
	if err := s.readRows(ctx, s.e.rebind(q), args, func(rows RowReader) error { return readDeadLetters(rows, &out) }); err != nil {
		return nil, fmt.Errorf("durable: letters of bulk action %d: %w", action, err)
	}
	return out, nil
}
