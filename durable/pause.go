package durable

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
)

// PauseTarget names what a pause holds back: the items of a request name, or the items whose
// circuit-breaker key is Target.
type PauseTarget struct {
	Kind   record.PauseKind
	Target string
}

// NameTarget is the PauseTarget of the items of request name (Register's name).
func NameTarget(name string) PauseTarget { return PauseTarget{Kind: record.PauseName, Target: name} }

// KeyTarget is the PauseTarget of the items whose circuit-breaker key is key: the key of
// WithBreakerKey, of WithBreaker's or Config.Breakers' key function, or the key an
// item is parked on.
func KeyTarget(key string) PauseTarget {
	return PauseTarget{Kind: record.PauseBreakerKey, Target: key}
}

// String is "name billing.send-invoice" or "breaker_key api.example.com".
func (t PauseTarget) String() string { return string(t.Kind) + " " + t.Target }

// PauseOption tweaks one Queue.Pause.
type PauseOption func(*pauseConfig)

type pauseConfig struct {
	until  time.Time
	reason string
}

// PauseUntil makes the pause end by itself at t, which must be later than now: no resume is
// needed. Without it a pause lasts until Resume.
func PauseUntil(t time.Time) PauseOption { return func(c *pauseConfig) { c.until = t } }

// PauseReason records why the target is paused (at most 1024 bytes), for the operators who see the pause and for
// the audit log.
func PauseReason(reason string) PauseOption { return func(c *pauseConfig) { c.reason = reason } }

// Pause holds back the items of target on every instance sharing the queue's database, until
// Resume or the time of PauseUntil; actor (required) is who paused it, as the audit log
// records it. Pausing what is paused replaces its pause (a new end time, a new reason).
//
// A paused request name's items are never claimed: they stay pending, untouched, and the
// other items are claimed past them; every instance honours the pause from its next claim on.
// The runs of the schedules that send that name are skipped, the run log saying so (see
// Schedule), and RunNow of its items changes nothing (ItemPaused).
// A paused breaker key's items are claimed (a key is often computed from the request when it
// is claimed) and parked on the key, no attempt counted, as an open breaker parks them: until
// the pause's end or Config.Recheck, whichever is sooner, then looked at again. This instance
// holds them back at once; the other instances from their next look at the pauses, every
// Config.PollInterval and at most every second.
//
// A pause holds back only what the scheduler runs: in-process calls (the mediator's Send, a
// breaker behavior in the pipeline) are not refused by it.
func (q *Queue) Pause(ctx context.Context, target PauseTarget, actor string, opts ...PauseOption) (record.Pause, error) {
	var c pauseConfig
	for _, o := range opts {
		o(&c)
	}
	now := q.clock.Now()
	errs := append(checkPauseTarget(target, actor), checkReason(c.reason)...)
	if !c.until.IsZero() && !c.until.After(now) {
		errs = append(errs, fmt.Errorf("PauseUntil %s is not in the future (now %s)", c.until.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano)))
	}
	if err := errors.Join(errs...); err != nil {
		return record.Pause{}, fmt.Errorf("durable: Pause: %w", err)
	}
	row := store.PauseRow{Kind: string(target.Kind), Target: target.Target, Until: c.until, Actor: actor, Reason: c.reason, CreatedAt: now}
	err := q.store.SetPause(ctx, row, func(tx *sql.Tx, prev store.PauseRow, had bool) error {
		detail := pauseDetail(c.until, c.reason)
		if had && (prev.Until.IsZero() || prev.Until.After(now)) {
			detail += "; replaces the pause by " + prev.Actor + " " + untilText(prev.Until)
		}
		return q.audit(ctx, tx, record.AuditEntry{At: now, Actor: actor, Action: record.AuditPause,
			TargetKind: record.AuditTarget(target.Kind), Target: target.Target, Detail: detail, Outcome: record.AuditDone})
	})
	if err != nil {
		return record.Pause{}, err
	}
	if s := q.running.Load(); s != nil && target.Kind == record.PauseBreakerKey {
		s.gate.Pauses().Set(target.Target, c.until)
	}
	return pauseOf(row, now), nil
}

// Resume ends the pause of target on every instance; actor (required) is who resumed it, as
// the audit log records it. It reports whether a pause was holding the target back: false
// when there was none or it had ended by its time (the log then records that nothing
// changed). The items of a resumed breaker key parked on it are due at once; a key that was
// not paused frees nothing (the items a breaker parked on it wait for the breaker).
func (q *Queue) Resume(ctx context.Context, target PauseTarget, actor string) (bool, error) {
	if err := errors.Join(checkPauseTarget(target, actor)...); err != nil {
		return false, fmt.Errorf("durable: Resume: %w", err)
	}
	now := q.clock.Now()
	holding := false
	_, err := q.store.DeletePause(ctx, string(target.Kind), target.Target, now, func(tx *sql.Tx, prev store.PauseRow, had bool) error {
		e := record.AuditEntry{At: now, Actor: actor, Action: record.AuditResume, TargetKind: record.AuditTarget(target.Kind),
			Target: target.Target, Outcome: record.AuditDone}
		switch {
		case !had:
			e.Outcome, e.Detail = record.AuditNoChange, "not paused"
		case !prev.Until.IsZero() && !prev.Until.After(now):
			e.Outcome, e.Detail = record.AuditNoChange, "its pause had ended at "+prev.Until.UTC().Format(time.RFC3339Nano)
		default:
			holding = true
			e.Detail = "paused by " + prev.Actor + " " + untilText(prev.Until)
		}
		return q.audit(ctx, tx, e)
	})
	if err != nil {
		return false, err
	}
	if s := q.running.Load(); s != nil {
		if target.Kind == record.PauseBreakerKey {
			s.gate.Pauses().Drop(target.Target)
		}
		s.Wake()
	}
	return holding, nil
}

// Pauses returns the stored pauses, by kind and target; one that ended by its time is marked
// Expired.
func (q *Queue) Pauses(ctx context.Context) ([]record.Pause, error) {
	rows, err := q.store.Pauses(ctx, "")
	if err != nil {
		return nil, err
	}
	now := q.clock.Now()
	out := make([]record.Pause, len(rows))
	for i, r := range rows {
		out[i] = pauseOf(r, now)
	}
	return out, nil
}

// maxPauseTarget bounds a pause's target: request names and breaker keys (a URL's host and
// port, a tenant's id) are short, and a pasted payload is a mistake that every list and audit
// entry would carry.
const maxPauseTarget = 1024

// maxReason bounds the reason of a pause or a concurrency limit: a few sentences for the
// operators who read it in the dashboard's tables and the audit log, not a document.
const maxReason = 1024

// checkReason names a reason longer than maxReason.
func checkReason(reason string) []error {
	if len(reason) > maxReason {
		return []error{fmt.Errorf("reason is %d bytes, more than %d: say why in a few sentences", len(reason), maxReason)}
	}
	return nil
}

func checkPauseTarget(t PauseTarget, actor string) []error {
	var errs []error
	switch t.Kind {
	case record.PauseName, record.PauseBreakerKey:
	default:
		errs = append(errs, fmt.Errorf("Kind %q: want %q or %q", t.Kind, record.PauseName, record.PauseBreakerKey))
	}
	switch {
	case strings.TrimSpace(t.Target) == "":
		errs = append(errs, errors.New("Target is empty: a pause names a request name or a breaker key"))
	case len(t.Target) > maxPauseTarget:
		errs = append(errs, fmt.Errorf("Target is %d bytes, more than %d: no request name or breaker key is that long", len(t.Target), maxPauseTarget))
	}
	if actor == "" {
		errs = append(errs, errors.New("actor is required: the audit log records who paused and resumed"))
	}
	return errs
}

func pauseOf(r store.PauseRow, now time.Time) record.Pause {
	return record.Pause{Kind: record.PauseKind(r.Kind), Target: r.Target, Until: r.Until, Expired: !r.Until.IsZero() && !r.Until.After(now),
		Actor: r.Actor, Reason: r.Reason, CreatedAt: r.CreatedAt}
}

func untilText(until time.Time) string {
	if until.IsZero() {
		return "until resumed"
	}
	return "until " + until.UTC().Format(time.RFC3339Nano)
}

func pauseDetail(until time.Time, reason string) string {
	d := untilText(until)
	if reason != "" {
		d += "; reason: " + reason
	}
	return d
}
