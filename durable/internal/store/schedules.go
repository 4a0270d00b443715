package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// UpsertSchedule inserts the schedule name, declared in code, due at next, or, when a row
// exists with another spec or location or is a schedule added at run time, replaces them and its
// due time (the code's declaration takes the name over; the row's pause stays). A row of the
// code's spec and location is left as it is.
func (s *Store) UpsertSchedule(ctx context.Context, name, spec, location string, next, now time.Time) error {
	_, err := s.db.ExecContext(ctx, s.e.rebind(`INSERT INTO switchboard_schedules (name, spec, location, next_at, created_at, updated_at)
	VALUES (?, ?, ?, ?, ?, ?)
	ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, location = excluded.location, next_at = excluded.next_at, updated_at = excluded.updated_at,
	    request = NULL, payload = NULL, removed_at = NULL, removed_by = NULL
	WHERE switchboard_schedules.spec <> excluded.spec OR switchboard_schedules.location <> excluded.location
	   OR switchboard_schedules.request IS NOT NULL`),
		name, spec, location, micros(next), micros(now), micros(now))
	if err != nil {
		return fmt.Errorf("durable: schedule %q: %w", name, err)
	}
	return nil
}

// Schedules returns every schedule row, in name order.
func (s *Store) Schedules(ctx context.Context) ([]ScheduleRow, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+scheduleColumns+` FROM switchboard_schedules ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("durable: schedules: %w", err)
	}
	defer rows.Close()
	var out []ScheduleRow
	for rows.Next() {
		r, err := scanSchedule(rows)
		if err != nil {
			return nil, fmt.Errorf("durable: schedules: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("durable: schedules: %w", err)
	}
	return out, nil
}

const scheduleColumns = `name, spec, location, next_at, run_owner, run_until, run_started_at,
	last_started_at, last_ended_at, last_outcome, last_error,
	request, payload, paused_at, paused_until, paused_by, removed_at, removed_by, run_now_at, run_now_by`

func scanSchedule(row interface{ Scan(dest ...any) error }) (ScheduleRow, error) {
	var (
		r                                                             ScheduleRow
		next                                                          int64
		until, started, lastStarted, lastEnded                        sql.NullInt64
		pausedAt, pausedUntil, removedAt, runNowAt                    sql.NullInt64
		owner, lastOutcome, lastErr, request, pausedBy, removedBy, by sql.NullString
	)
	if err := row.Scan(&r.Name, &r.Spec, &r.Location, &next, &owner, &until, &started, &lastStarted, &lastEnded,
		&lastOutcome, &lastErr, &request, &r.Payload, &pausedAt, &pausedUntil, &pausedBy, &removedAt, &removedBy,
		&runNowAt, &by); err != nil {
		return r, err
	}
	r.NextAt, r.RunOwner, r.RunUntil, r.RunStartedAt = fromMicros(next), owner.String, fromMicros(until.Int64), fromMicros(started.Int64)
	r.LastStartedAt, r.LastEndedAt = fromMicros(lastStarted.Int64), fromMicros(lastEnded.Int64)
	r.LastOutcome, r.LastError = lastOutcome.String, lastErr.String
	r.Request, r.PausedAt, r.PausedUntil, r.PausedBy = request.String, fromMicros(pausedAt.Int64), fromMicros(pausedUntil.Int64), pausedBy.String
	r.RemovedAt, r.RemovedBy, r.RunNowAt, r.RunNowBy = fromMicros(removedAt.Int64), removedBy.String, fromMicros(runNowAt.Int64), by.String
	return r, nil
}

// ErrScheduleTaken reports an EditSchedule that found no row of its name, while a concurrent
// one inserted it before it could.
var ErrScheduleTaken = errors.New("added by a concurrent call")

// EditSchedule changes the row of name in one transaction: it reads the row (locked on
// PostgreSQL, the write transaction being immediate on SQLite) and calls edit with it, nil when
// there is none. edit returns the row to write, inserted or replacing the read one's spec,
// location, request, payload, due time, pause, removal and run-now (nil: write nothing), and
// may write through tx what must commit with it (an audit entry). An error of edit rolls back.
func (s *Store) EditSchedule(ctx context.Context, name string, now time.Time, edit func(tx *sql.Tx, r *ScheduleRow) (*ScheduleRow, error)) error {
	return inTx(ctx, s.db, func(tx *sql.Tx) error {
		q := `SELECT ` + scheduleColumns + ` FROM switchboard_schedules WHERE name = ?`
		if s.e.String() == "postgres" {
			q += " FOR UPDATE"
		}
		var cur *ScheduleRow
		r, err := scanSchedule(tx.QueryRowContext(ctx, s.e.rebind(q), name))
		switch {
		case err == nil:
			cur = &r
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("durable: schedule %q: %w", name, err)
		}
		w, err := edit(tx, cur)
		if err != nil || w == nil {
			return err
		}
		args := []any{name, w.Spec, w.Location, micros(w.NextAt), micros(now), micros(now), nullString(w.Request), w.Payload,
			nullMicros(w.PausedAt), nullMicros(w.PausedUntil), nullString(w.PausedBy), nullMicros(w.RemovedAt), nullString(w.RemovedBy),
			nullMicros(w.RunNowAt), nullString(w.RunNowBy)}
		// A row read is replaced; none read is inserted, unless a concurrent edit inserted one
		// since (the read locked nothing): that edit was made on what this one did not see.
		q = `INSERT INTO switchboard_schedules (name, spec, location, next_at, created_at, updated_at,
	request, payload, paused_at, paused_until, paused_by, removed_at, removed_by, run_now_at, run_now_by)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (name) DO `
		if cur == nil {
			q += `NOTHING`
		} else {
			q += `UPDATE SET spec = excluded.spec, location = excluded.location, next_at = excluded.next_at,
	    updated_at = excluded.updated_at, request = excluded.request, payload = excluded.payload,
	    paused_at = excluded.paused_at, paused_until = excluded.paused_until, paused_by = excluded.paused_by,
	    removed_at = excluded.removed_at, removed_by = excluded.removed_by,
	    run_now_at = excluded.run_now_at, run_now_by = excluded.run_now_by`
		}
		res, err := tx.ExecContext(ctx, s.e.rebind(q), args...)
		if err != nil {
			return fmt.Errorf("durable: schedule %q: %w", name, err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("durable: schedule %q: %w", name, errors.Join(ErrScheduleTaken, err))
		}
		return nil
	})
}

// nullMicros is t in microseconds, NULL for the zero time.
func nullMicros(t time.Time) sql.NullInt64 {
	return sql.NullInt64{Int64: micros(t), Valid: !t.IsZero()}
}

// ClaimScheduleRun claims the due run d for owner: when the row still has d's spec, location
// and due time, no run holds an unexpired lease, and the schedule is neither removed nor paused
// at now, it moves next_at to d.Next and leases the run to owner from now until until. It
// reports whether it did; false means another instance acted on that due run first, a run is
// still going, or a pause or removal was stored since the row was read.
func (s *Store) ClaimScheduleRun(ctx context.Context, d ScheduleDue, owner string, now, until time.Time) (bool, error) {
	res, err := s.db.ExecContext(ctx, s.e.rebind(`UPDATE switchboard_schedules
	SET next_at = ?, run_owner = ?, run_until = ?, run_started_at = ?, updated_at = ?
	WHERE name = ? AND spec = ? AND location = ? AND next_at = ? AND (run_owner IS NULL OR run_until < ?)
	  AND removed_at IS NULL AND (paused_at IS NULL OR paused_until <= ?)`),
		micros(d.Next), owner, micros(until), micros(now), micros(now), d.Name, d.Spec, d.Location, micros(d.DueAt), micros(now), micros(now))
	if err != nil {
		return false, fmt.Errorf("durable: claim schedule %q: %w", d.Name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("durable: claim schedule %q: %w", d.Name, err)
	}
	return n == 1, nil
}

// ClaimScheduleRunNow claims the run an operator asked for at at on the schedule name for
// owner: when the row's run_now_at is still at and no run holds an unexpired lease, it clears
// the request and leases the run to owner from now until until, leaving next_at as it is. It
// reports whether it did; false means another instance claimed it first, or a run is still
// going (the request then waits for its end).
func (s *Store) ClaimScheduleRunNow(ctx context.Context, name string, at time.Time, owner string, now, until time.Time) (bool, error) {
	ok, err := s.updateOne(ctx, `UPDATE switchboard_schedules
	SET run_now_at = NULL, run_now_by = NULL, run_owner = ?, run_until = ?, run_started_at = ?, updated_at = ?
	WHERE name = ? AND run_now_at = ? AND (run_owner IS NULL OR run_until < ?)`,
		owner, micros(until), micros(now), micros(now), name, micros(at), micros(now))
	if err != nil {
		return false, fmt.Errorf("durable: claim a run now of schedule %q: %w", name, err)
	}
	return ok, nil
}

// PassScheduleRun passes over the due run d of a paused schedule: when the row still has d's
// spec, location and due time, it moves next_at to d.Next, logging nothing. It reports whether
// it did.
func (s *Store) PassScheduleRun(ctx context.Context, d ScheduleDue, now time.Time) (bool, error) {
	ok, err := s.updateOne(ctx, `UPDATE switchboard_schedules SET next_at = ?, updated_at = ?
	WHERE name = ? AND spec = ? AND location = ? AND next_at = ?`,
		micros(d.Next), micros(now), d.Name, d.Spec, d.Location, micros(d.DueAt))
	if err != nil {
		return false, fmt.Errorf("durable: pass over a run of paused schedule %q: %w", d.Name, err)
	}
	return ok, nil
}

// updateOne runs the update q (with ? placeholders) and reports whether it changed one row.
func (s *Store) updateOne(ctx context.Context, q string, args ...any) (bool, error) {
	res, err := s.db.ExecContext(ctx, s.e.rebind(q), args...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// SkipScheduleRun passes over the due run d because a run still holds an unexpired lease: when
// the row still has d's spec, location and due time and that lease, it moves next_at to d.Next
// and logs a skipped run by instance with reason, in one transaction. It reports whether it did.
func (s *Store) SkipScheduleRun(ctx context.Context, d ScheduleDue, instance string, now time.Time, reason string) (bool, error) {
	return s.skipRun(ctx, d.Name, instance, d.DueAt, now, reason, "", `UPDATE switchboard_schedules SET next_at = ?, updated_at = ?
	WHERE name = ? AND spec = ? AND location = ? AND next_at = ? AND run_owner IS NOT NULL AND run_until >= ?`,
		micros(d.Next), micros(now), d.Name, d.Spec, d.Location, micros(d.DueAt), micros(now))
}

// SkipHeldScheduleRun passes over the due run d that would have been claimed (as
// ClaimScheduleRun would: the row still has d's spec, location and due time, no run holds an
// unexpired lease, the schedule is neither removed nor paused at now) but is held back for
// reason (its request name is paused): it moves next_at to d.Next and logs a skipped run by
// instance with reason, in one transaction. It reports whether it did.
func (s *Store) SkipHeldScheduleRun(ctx context.Context, d ScheduleDue, instance string, now time.Time, reason string) (bool, error) {
	return s.skipRun(ctx, d.Name, instance, d.DueAt, now, reason, "", `UPDATE switchboard_schedules SET next_at = ?, updated_at = ?
	WHERE name = ? AND spec = ? AND location = ? AND next_at = ? AND (run_owner IS NULL OR run_until < ?)
	  AND removed_at IS NULL AND (paused_at IS NULL OR paused_until <= ?)`,
		micros(d.Next), micros(now), d.Name, d.Spec, d.Location, micros(d.DueAt), micros(now), micros(now))
}

// SkipScheduleRunNow passes over the run of the schedule name an operator (by) asked for at at,
// that would have been claimed (as ClaimScheduleRunNow would) but is held back for reason: it
// clears the request and logs a skipped run by instance with reason, in one transaction. It
// reports whether it did.
func (s *Store) SkipScheduleRunNow(ctx context.Context, name string, at time.Time, by, instance string, now time.Time, reason string) (bool, error) {
	return s.skipRun(ctx, name, instance, at, now, reason, by, `UPDATE switchboard_schedules SET run_now_at = NULL, run_now_by = NULL, updated_at = ?
	WHERE name = ? AND run_now_at = ? AND (run_owner IS NULL OR run_until < ?)`,
		micros(now), name, micros(at), micros(now))
}

// skipRun runs update, which passes over a run of the schedule name due at due, and when it
// changed the row logs the run as skipped by instance with reason (and the run-now's by), in
// one transaction. It reports whether it did.
func (s *Store) skipRun(ctx context.Context, name, instance string, due, now time.Time, reason, by, update string, args ...any) (bool, error) {
	var skipped bool
	err := inTx(ctx, s.db, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.e.rebind(update), args...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.e.rebind(`INSERT INTO switchboard_schedule_runs (name, instance, due_at, started_at, ended_at, outcome, error, run_now_by)
	VALUES (?, ?, ?, ?, ?, 'skipped', ?, ?)`), name, instance, micros(due), micros(now), micros(now), nullString(reason), nullString(by)); err != nil {
			return err
		}
		skipped = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("durable: skip schedule %q: %w", name, err)
	}
	return skipped, nil
}

// EndScheduleRun logs the run r and records it as its schedule's last run; the lease is
// released when it is still r's (same owner, same start), so a run whose lease expired and was
// taken over does not end its successor's.
func (s *Store) EndScheduleRun(ctx context.Context, r ScheduleRunRow) error {
	if r.Name == "" || r.Instance == "" {
		return errors.New("durable: end schedule run: name and instance required")
	}
	err := inTx(ctx, s.db, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, s.e.rebind(`INSERT INTO switchboard_schedule_runs (name, instance, due_at, started_at, ended_at, outcome, error, run_now_by)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?)`), r.Name, r.Instance, micros(r.DueAt), micros(r.StartedAt), micros(r.EndedAt), r.Outcome, nullString(r.Error),
			nullString(r.RunNowBy)); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, s.e.rebind(`UPDATE switchboard_schedules
	SET last_started_at = ?, last_ended_at = ?, last_outcome = ?, last_error = ?, updated_at = ?,
	    run_owner = CASE WHEN run_owner = ? AND run_started_at = ? THEN NULL ELSE run_owner END,
	    run_until = CASE WHEN run_owner = ? AND run_started_at = ? THEN NULL ELSE run_until END,
	    run_started_at = CASE WHEN run_owner = ? AND run_started_at = ? THEN NULL ELSE run_started_at END
	WHERE name = ? AND (last_started_at IS NULL OR last_started_at <= ?)`),
			micros(r.StartedAt), micros(r.EndedAt), r.Outcome, nullString(r.Error), micros(r.EndedAt),
			r.Instance, micros(r.StartedAt), r.Instance, micros(r.StartedAt), r.Instance, micros(r.StartedAt),
			r.Name, micros(r.StartedAt))
		return err
	})
	if err != nil {
		return fmt.Errorf("durable: end schedule run %q: %w", r.Name, err)
	}
	return nil
}

// extendRunsSQL moves the leases of owner's runs (placeholders: until, owner). On PostgreSQL
// (pgExtendRunsSQL) the rows are locked in name order first: the only statement that locks
// several schedules, and two of them (of two owners, one of which took over runs whose leases
// ran out) must not take the same rows in different orders.
const extendRunsSQL = `UPDATE switchboard_schedules SET run_until = ? WHERE run_owner = ?`

const pgExtendRunsSQL = `UPDATE switchboard_schedules SET run_until = $1
	WHERE name = ANY(ARRAY(SELECT s.name FROM switchboard_schedules s WHERE s.run_owner = $2 ORDER BY s.name FOR NO KEY UPDATE))
	  AND run_owner = $2`

// ExtendScheduleRuns moves the leases of owner's runs to until.
func (s *Store) ExtendScheduleRuns(ctx context.Context, owner string, until time.Time) error {
	q := extendRunsSQL
	if s.e.String() == "postgres" {
		q = pgExtendRunsSQL
	}
	_, err := s.db.ExecContext(ctx, q, micros(until), owner)
	if err != nil {
		return fmt.Errorf("durable: extend schedule runs: %w", err)
	}
	return nil
}

// ScheduleRuns returns the run log of the schedule name, newest first, at most limit rows
// (100 when limit is not positive).
func (s *Store) ScheduleRuns(ctx context.Context, name string, limit int) ([]ScheduleRunRow, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.db.QueryContext(ctx, s.e.rebind(`SELECT id, name, instance, due_at, started_at, ended_at, outcome, error, run_now_by
	FROM switchboard_schedule_runs WHERE name = ? ORDER BY id DESC LIMIT ?`), name, limit)
	if err != nil {
		return nil, fmt.Errorf("durable: schedule runs: %w", err)
	}
	defer rows.Close()
	var out []ScheduleRunRow
	for rows.Next() {
		var (
			r                   ScheduleRunRow
			due, started, ended int64
			errStr, by          sql.NullString
		)
		if err := rows.Scan(&r.ID, &r.Name, &r.Instance, &due, &started, &ended, &r.Outcome, &errStr, &by); err != nil {
			return nil, fmt.Errorf("durable: schedule runs: %w", err)
		}
		r.DueAt, r.StartedAt, r.EndedAt, r.Error = fromMicros(due), fromMicros(started), fromMicros(ended), errStr.String
		r.RunNowBy = by.String
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("durable: schedule runs: %w", err)
	}
	return out, nil
}
