package store

import (
	"context"
	"database/sql"
	"fmt"
)

// AddAudit inserts r (its ID is ignored) through db, the store's database or a transaction
// that makes the action and its record one.
func (s *Store) AddAudit(ctx context.Context, db execer, r AuditRow) error {
	if db == nil {
		db = s.db
	}
	_, err := db.ExecContext(ctx, s.e.rebind(`INSERT INTO switchboard_audit (at, actor, action, target_kind, target, detail, outcome)
	VALUES (?, ?, ?, ?, ?, ?, ?)`), micros(r.At), storedText(r.Actor), r.Action, r.TargetKind, storedText(r.Target),
		nullString(storedText(r.Detail)), r.Outcome)
	if err != nil {
		return fmt.Errorf("durable: audit %s of %s %q: %w", r.Action, r.TargetKind, r.Target, err)
	}
	return nil
}

// Audit returns the rows q selects.
func (s *Store) Audit(ctx context.Context, q AuditQuery) ([]AuditRow, error) {
	where, args := "1 = 1", []any{}
	if q.TargetKind != "" {
		where += " AND target_kind = ?"
		args = append(args, q.TargetKind)
		if q.Target != "" {
			where += " AND target = ?"
			args = append(args, q.Target)
		}
	}
	if q.Before > 0 {
		where += " AND id < ?"
		args = append(args, q.Before)
	}
	args = append(args, q.Limit)
	var out []AuditRow
	err := s.readRows(ctx, s.e.rebind(`SELECT id, at, actor, action, target_kind, target, detail, outcome
	FROM switchboard_audit WHERE `+where+` ORDER BY id DESC LIMIT ?`), args, func(rows RowReader) error {
		for rows.Next() {
			var (
				r      AuditRow
				at     int64
				detail sql.NullString
			)
			if err := rows.Scan(&r.ID, &at, &r.Actor, &r.Action, &r.TargetKind, &r.Target, &detail, &r.Outcome); err != nil {
				return err
			}
			r.At, r.Detail = fromMicros(at), detail.String
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("durable: audit log: %w", err)
	}
	return out, nil
}
