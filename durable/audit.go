package durable

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
)

// AuditFilter selects entries of the audit log (Queue.Audit).
type AuditFilter struct {
	// TargetKind, when not empty, keeps the entries about targets of that kind; Target, when
	// also set, about that one.
	TargetKind record.AuditTarget
	Target     string
	// Before, when not zero, keeps the entries older than the entry of that id: the next page
	// after a page whose last entry it is.
	Before int64
	// Limit caps the entries returned: zero means 50, a dashboard's page; at most 500.
	Limit int
}

// Audit returns the entries of the audit log that f selects, newest first. Every operator
// action on the queue other than a dead letter's replay or discard (which its timeline
// records) has one: pauses and resumes, cancelled items and items run now, schedule changes,
// bulk actions, and the breaker trips and resets the admin surface made (RecordBreakerAction).
func (q *Queue) Audit(ctx context.Context, f AuditFilter) ([]record.AuditEntry, error) {
	var errs []error
	if f.Limit < 0 || f.Limit > maxDeadLetterLimit {
		errs = append(errs, fmt.Errorf("Limit %d is outside [0, %d]", f.Limit, maxDeadLetterLimit))
	}
	if f.Before < 0 {
		errs = append(errs, fmt.Errorf("Before %d is negative", f.Before))
	}
	if f.TargetKind != "" && !slices.Contains(record.AuditTargets(), f.TargetKind) {
		errs = append(errs, fmt.Errorf("TargetKind %q is none of %q", f.TargetKind, record.AuditTargets()))
	}
	if f.Target != "" && f.TargetKind == "" {
		errs = append(errs, errors.New("Target is set without TargetKind"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("durable: Audit: %w", err)
	}
	if f.Limit == 0 {
		f.Limit = defaultDeadLetterLimit
	}
	rows, err := q.store.Audit(ctx, store.AuditQuery{TargetKind: string(f.TargetKind), Target: f.Target, Before: f.Before, Limit: f.Limit})
	if err != nil {
		return nil, err
	}
	out := make([]record.AuditEntry, len(rows))
	for i, r := range rows {
		out[i] = record.AuditEntry{ID: r.ID, At: r.At, Actor: r.Actor, Action: record.AuditAction(r.Action),
			TargetKind: record.AuditTarget(r.TargetKind), Target: r.Target, Detail: r.Detail, Outcome: record.AuditOutcome(r.Outcome)}
	}
	return out, nil
}

// RecordBreakerAction writes the audit entry of an operator's trip or reset of the breaker of
// key (record.AuditTripBreaker, record.AuditResetBreaker) by actor, with detail (its registry,
// say). A breaker registry is not the queue's, so the caller that acted on it records the
// action here: the admin surface does, after each trip and reset it makes. Any other action is
// an error naming it, and nothing is written.
func (q *Queue) RecordBreakerAction(ctx context.Context, actor string, action record.AuditAction, key, detail string) error {
	if action != record.AuditTripBreaker && action != record.AuditResetBreaker {
		return fmt.Errorf("durable: RecordBreakerAction: action %q is neither %q nor %q", action, record.AuditTripBreaker, record.AuditResetBreaker)
	}
	if err := keyProblem("breaker key", key); err != nil {
		return fmt.Errorf("durable: RecordBreakerAction: %w", err)
	}
	return q.audit(ctx, nil, record.AuditEntry{Actor: actor, Action: action, TargetKind: record.AuditTargetBreakerKey,
		Target: key, Detail: detail, Outcome: record.AuditDone})
}

// audit records e (its ID and, when zero, At are set by the queue) through tx when it is not
// nil, so that an action and its entry are written together, else on its own.
func (q *Queue) audit(ctx context.Context, tx *sql.Tx, e record.AuditEntry) error {
	if e.At.IsZero() {
		e.At = q.clock.Now()
	}
	r := store.AuditRow{At: e.At, Actor: e.Actor, Action: string(e.Action), TargetKind: string(e.TargetKind),
		Target: e.Target, Detail: e.Detail, Outcome: e.Outcome}
	if tx != nil {
		return q.store.AddAudit(ctx, tx, r)
	}
	return q.store.AddAudit(ctx, nil, r)
}
