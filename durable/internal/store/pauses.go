package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// pausedNameSQL is the claims' test that an item's name is not paused at now, the placeholder
// being the statement's own "now" (%s: its form, "$6" or "?6"). The subquery is not correlated:
// both engines run it once per statement (PostgreSQL as a hashed SubPlan, SQLite into an
// ephemeral index) and test each candidate against its result, which is empty or tiny. A
// correlated NOT EXISTS was turned by PostgreSQL into an anti-join that re-read the pauses for
// every candidate.
const pausedNameSQL = `i.name NOT IN (
	        SELECT p.target FROM switchboard_pauses p
	        WHERE p.kind = 'name' AND (p.until IS NULL OR p.until > %s))`

const pauseColumns = "kind, target, until, actor, reason, created_at"

// SetPause stores r, replacing the pause of its kind and target if there is one, and calls
// then (when not nil) in the same transaction with the pause it replaced (had: there was one),
// so that the pause and its audit entry are written together.
func (s *Store) SetPause(ctx context.Context, r PauseRow, then func(tx *sql.Tx, prev PauseRow, had bool) error) error {
	var until any
	if !r.Until.IsZero() {
		until = micros(r.Until)
	}
	err := inTx(ctx, s.db, func(tx *sql.Tx) error {
		prev, had, err := pauseIn(ctx, tx, s.e, r.Kind, r.Target)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.e.rebind(`INSERT INTO switchboard_pauses (`+pauseColumns+`) VALUES (?, ?, ?, ?, ?, ?)
	ON CONFLICT (kind, target) DO UPDATE SET until = excluded.until, actor = excluded.actor, reason = excluded.reason, created_at = excluded.created_at`),
			r.Kind, storedText(r.Target), until, storedText(r.Actor), nullString(storedText(r.Reason)), micros(r.CreatedAt)); err != nil {
			return err
		}
		if then != nil {
			return then(tx, prev, had)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("durable: pause %s %q: %w", r.Kind, r.Target, err)
	}
	return nil
}

// DeletePause deletes the pause of kind and target and, for a breaker key whose pause held at
// now, makes the items parked on the key due at now (as Unpark does), then calls then (when not
// nil) in the same transaction with the pause deleted (had: there was one). It returns how many
// items it freed. A key that was not paused, or whose pause had ended, frees nothing: the items
// parked on it wait for a breaker (or were due when the pause ended).
func (s *Store) DeletePause(ctx context.Context, kind, target string, now time.Time, then func(tx *sql.Tx, prev PauseRow, had bool) error) (int, error) {
	freed := 0
	err := inTx(ctx, s.db, func(tx *sql.Tx) error {
		prev, had, err := pauseIn(ctx, tx, s.e, kind, target)
		if err != nil {
			return err
		}
		if had {
			if _, err := tx.ExecContext(ctx, s.e.rebind(`DELETE FROM switchboard_pauses WHERE kind = ? AND target = ?`), kind, target); err != nil {
				return err
			}
		}
		if kind == PauseBreakerKey && had && (prev.Until.IsZero() || prev.Until.After(now)) {
			res, err := tx.ExecContext(ctx, s.e.stmts().unpark, micros(now), target)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			freed = int(n)
		}
		if then != nil {
			return then(tx, prev, had)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("durable: resume %s %q: %w", kind, target, err)
	}
	return freed, nil
}

// Pauses returns the stored pauses of kind ("" for every kind), expired ones included, in
// kind and target order.
func (s *Store) Pauses(ctx context.Context, kind string) ([]PauseRow, error) {
	q, args := "SELECT "+pauseColumns+" FROM switchboard_pauses", []any{}
	if kind != "" {
		q += " WHERE kind = ?"
		args = append(args, kind)
	}
	rows, err := s.db.QueryContext(ctx, s.e.rebind(q+" ORDER BY kind, target"), args...)
	if err != nil {
		return nil, fmt.Errorf("durable: pauses: %w", err)
	}
	defer rows.Close()
	var out []PauseRow
	for rows.Next() {
		r, err := scanPause(rows)
		if err != nil {
			return nil, fmt.Errorf("durable: pauses: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("durable: pauses: %w", err)
	}
	return out, nil
}

func pauseIn(ctx context.Context, tx *sql.Tx, e Engine, kind, target string) (PauseRow, bool, error) {
	r, err := scanPause(tx.QueryRowContext(ctx, e.rebind("SELECT "+pauseColumns+" FROM switchboard_pauses WHERE kind = ? AND target = ?"), kind, target))
	if errors.Is(err, sql.ErrNoRows) {
		return PauseRow{}, false, nil
	}
	return r, err == nil, err
}

func scanPause(r rowScanner) (PauseRow, error) {
	var (
		p       PauseRow
		until   sql.NullInt64
		reason  sql.NullString
		created int64
	)
	if err := r.Scan(&p.Kind, &p.Target, &until, &p.Actor, &reason, &created); err != nil {
		return PauseRow{}, err
	}
	if until.Valid {
		p.Until = fromMicros(until.Int64)
	}
	p.Reason, p.CreatedAt = reason.String, fromMicros(created)
	return p, nil
}
