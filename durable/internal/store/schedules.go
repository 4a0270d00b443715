package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// ScheduleRow is one row of switchboard_schedules; its fields are documented on
// record.ScheduleInfo.
type ScheduleRow struct {
	Name          string
	Spec          string
	Location      string
	NextAt        time.Time
	RunOwner      string
	RunUntil      time.Time
	RunStartedAt  time.Time
	LastStartedAt time.Time
	LastEndedAt   time.Time
	LastOutcome   string
	LastError     string
}

// Running reports whether a run holds a lease that has not expired at now.
func (r ScheduleRow) Running(now time.Time) bool {
	return r.RunOwner != "" && !r.RunUntil.Before(now)
}

// ScheduleRunRow is one row of the run log; its fields are documented on record.ScheduleRun.
type ScheduleRunRow struct {
	ID        int64
	Name      string
	Instance  string
	DueAt     time.Time
	StartedAt time.Time
	EndedAt   time.Time
	Outcome   string
	Error     string
}

// ScheduleDue identifies one due run of a schedule as an instance read it: the claim applies
// only while the row still has this spec, location and next_at, so of the instances that read
// the same due run one at most acts on it.
type ScheduleDue struct {
	Name     string
	Spec     string
	Location string
	// DueAt is the row's next_at as read.
	DueAt time.Time
	// Next is the due time that replaces it.
	Next time.Time
}

// UpsertSchedule inserts the schedule name, due at next, or, when a row exists with another
// spec or location, replaces them and its due time. A row with the same spec and location is
// left as it is.
func (s *Store) UpsertSchedule(ctx context.Context, name, spec, location string, next, now time.Time) error {
	_, err := s.db.ExecContext(ctx, s.e.rebind(`INSERT INTO switchboard_schedules (name, spec, location, next_at, created_at, updated_at)
	VALUES (?, ?, ?, ?, ?, ?)
	ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, location = excluded.location, next_at = excluded.next_at, updated_at = excluded.updated_at
	WHERE switchboard_schedules.spec <> excluded.spec OR switchboard_schedules.location <> excluded.location`),
		name, spec, location, micros(next), micros(now), micros(now))
	if err != nil {
		return fmt.Errorf("durable: schedule %q: %w", name, err)
	}
	return nil
}

// Schedules returns every schedule row, in name order.
func (s *Store) Schedules(ctx context.Context) ([]ScheduleRow, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, spec, location, next_at, run_owner, run_until, run_started_at,
	last_started_at, last_ended_at, last_outcome, last_error FROM switchboard_schedules ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("durable: schedules: %w", err)
	}
	defer rows.Close()
	var out []ScheduleRow
	for rows.Next() {
		var (
			r                                      ScheduleRow
			next                                   int64
			until, started, lastStarted, lastEnded sql.NullInt64
			owner, lastOutcome, lastErr            sql.NullString
		)
		if err := rows.Scan(&r.Name, &r.Spec, &r.Location, &next, &owner, &until, &started, &lastStarted, &lastEnded,
			&lastOutcome, &lastErr); err != nil {
			return nil, fmt.Errorf("durable: schedules: %w", err)
		}
		r.NextAt, r.RunOwner, r.RunUntil, r.RunStartedAt = fromMicros(next), owner.String, fromMicros(until.Int64), fromMicros(started.Int64)
		r.LastStartedAt, r.LastEndedAt = fromMicros(lastStarted.Int64), fromMicros(lastEnded.Int64)
		r.LastOutcome, r.LastError = lastOutcome.String, lastErr.String
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("durable: schedules: %w", err)
	}
	return out, nil
}

// ClaimScheduleRun claims the due run d for owner: when the row still has d's spec, location
// and due time and no run holds an unexpired lease, it moves next_at to d.Next and leases the
// run to owner from now until until. It reports whether it did; false means another instance
// acted on that due run first, or a run is still going.
func (s *Store) ClaimScheduleRun(ctx context.Context, d ScheduleDue, owner string, now, until time.Time) (bool, error) {
	res, err := s.db.ExecContext(ctx, s.e.rebind(`UPDATE switchboard_schedules
	SET next_at = ?, run_owner = ?, run_until = ?, run_started_at = ?, updated_at = ?
	WHERE name = ? AND spec = ? AND location = ? AND next_at = ? AND (run_owner IS NULL OR run_until < ?)`),
		micros(d.Next), owner, micros(until), micros(now), micros(now), d.Name, d.Spec, d.Location, micros(d.DueAt), micros(now))
	if err != nil {
		return false, fmt.Errorf("durable: claim schedule %q: %w", d.Name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("durable: claim schedule %q: %w", d.Name, err)
	}
	return n == 1, nil
}

// SkipScheduleRun passes over the due run d because a run still holds an unexpired lease: when
// the row still has d's spec, location and due time and that lease, it moves next_at to d.Next
// and logs a skipped run by instance with reason, in one transaction. It reports whether it did.
func (s *Store) SkipScheduleRun(ctx context.Context, d ScheduleDue, instance string, now time.Time, reason string) (bool, error) {
	var skipped bool
	err := inTx(ctx, s.db, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.e.rebind(`UPDATE switchboard_schedules SET next_at = ?, updated_at = ?
	WHERE name = ? AND spec = ? AND location = ? AND next_at = ? AND run_owner IS NOT NULL AND run_until >= ?`),
			micros(d.Next), micros(now), d.Name, d.Spec, d.Location, micros(d.DueAt), micros(now))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.e.rebind(`INSERT INTO switchboard_schedule_runs (name, instance, due_at, started_at, ended_at, outcome, error)
	VALUES (?, ?, ?, ?, ?, 'skipped', ?)`), d.Name, instance, micros(d.DueAt), micros(now), micros(now), nullString(reason)); err != nil {
			return err
		}
		skipped = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("durable: skip schedule %q: %w", d.Name, err)
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
		if _, err := tx.ExecContext(ctx, s.e.rebind(`INSERT INTO switchboard_schedule_runs (name, instance, due_at, started_at, ended_at, outcome, error)
	VALUES (?, ?, ?, ?, ?, ?, ?)`), r.Name, r.Instance, micros(r.DueAt), micros(r.StartedAt), micros(r.EndedAt), r.Outcome, nullString(r.Error)); err != nil {
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

// ExtendScheduleRuns moves the leases of owner's runs to until.
func (s *Store) ExtendScheduleRuns(ctx context.Context, owner string, until time.Time) error {
	_, err := s.db.ExecContext(ctx, s.e.rebind(`UPDATE switchboard_schedules SET run_until = ? WHERE run_owner = ?`), micros(until), owner)
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
	rows, err := s.db.QueryContext(ctx, s.e.rebind(`SELECT id, name, instance, due_at, started_at, ended_at, outcome, error
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
			errStr              sql.NullString
		)
		if err := rows.Scan(&r.ID, &r.Name, &r.Instance, &due, &started, &ended, &r.Outcome, &errStr); err != nil {
			return nil, fmt.Errorf("durable: schedule runs: %w", err)
		}
		r.DueAt, r.StartedAt, r.EndedAt, r.Error = fromMicros(due), fromMicros(started), fromMicros(ended), errStr.String
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("durable: schedule runs: %w", err)
	}
	return out, nil
}
