package durable

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
)

// ConcurrencyLimitOption tweaks one Queue.SetConcurrencyLimit.
type ConcurrencyLimitOption func(*limitConfig)

type limitConfig struct{ reason string }

// LimitReason records why the key is limited (optional; at most 1024 bytes), for the operators
// who see the limit and for the audit log.
func LimitReason(reason string) ConcurrencyLimitOption {
	return func(c *limitConfig) { c.reason = reason }
}

// maxConcurrencyLimit bounds a limit: no fleet runs a million items of one key at once, and a
// larger number is a typing mistake, not a limit.
const maxConcurrencyLimit = 1_000_000

// SetConcurrencyLimit lets at most n items guarded by the breaker key key run at once across
// every instance sharing the queue's database, until RemoveConcurrencyLimit; actor (required)
// is who set it, as the audit log records it. Setting the limit of a limited key replaces it
// (a lower limit lets the items running finish; no new one starts until fewer than n run).
//
// An item's key is its breaker key: the key of WithBreakerKey, or the key WithBreaker's or
// Config.Breakers' key function gives for the request. The scheduler claims the item,
// and before dispatching it takes one of the key's slots in the database; a slot is the
// running item itself, freed when its attempt's outcome is written or, should its instance
// die, when its lease runs out and is swept. An item that finds every slot taken is not
// attempted (no attempt charged; Config.OnSettled says record.SettledLimited): it is parked on the
// key and made due again as slots free, by the instance that freed one at once and by every
// instance at its next look at the limits (every Config.PollInterval, at most every
// second), or Config.Recheck later at the latest. This instance applies a new limit at once;
// the others from their next look at the limits, and they apply it exactly from then on.
func (q *Queue) SetConcurrencyLimit(ctx context.Context, key string, n int, actor string, opts ...ConcurrencyLimitOption) (record.ConcurrencyLimit, error) {
	var c limitConfig
	for _, o := range opts {
		o(&c)
	}
	errs := append(checkLimitKey(key, actor), checkReason(c.reason)...)
	if n < 1 || n > maxConcurrencyLimit {
		errs = append(errs, fmt.Errorf("n %d is outside [1, %d]: a limit lets at least one item run (pause the key to hold them all back)", n, maxConcurrencyLimit))
	}
	if err := errors.Join(errs...); err != nil {
		return record.ConcurrencyLimit{}, fmt.Errorf("durable: SetConcurrencyLimit: %w", err)
	}
	now := q.clock.Now()
	row := store.LimitRow{Key: key, Max: n, Actor: actor, Reason: c.reason, CreatedAt: now}
	err := q.store.SetLimit(ctx, row, func(tx *sql.Tx, prev store.LimitRow, had bool) error {
		detail := "at most " + strconv.Itoa(n) + " running"
		if c.reason != "" {
			detail += "; reason: " + c.reason
		}
		if had {
			detail += "; replaces the limit of " + strconv.Itoa(prev.Max) + " set by " + prev.Actor
		}
		return q.audit(ctx, tx, record.AuditEntry{At: now, Actor: actor, Action: record.AuditSetConcurrencyLimit,
			TargetKind: record.AuditTargetBreakerKey, Target: key, Detail: detail, Outcome: record.AuditDone})
	})
	if err != nil {
		return record.ConcurrencyLimit{}, err
	}
	if s := q.running.Load(); s != nil {
		s.gate.Limits().Set(key, n)
		s.gate.Limits().Free(key) // a raised limit has room for the items parked on it
	}
	return limitOf(row), nil
}

// RemoveConcurrencyLimit ends the limit of key on every instance; actor (required) is who
// removed it, as the audit log records it. It reports whether there was one (the log records
// that nothing changed when there was none). The items parked on the key are due at once.
func (q *Queue) RemoveConcurrencyLimit(ctx context.Context, key, actor string) (bool, error) {
	if err := errors.Join(checkLimitKey(key, actor)...); err != nil {
		return false, fmt.Errorf("durable: RemoveConcurrencyLimit: %w", err)
	}
	now := q.clock.Now()
	removed := false
	err := q.store.DeleteLimit(ctx, key, func(tx *sql.Tx, prev store.LimitRow, had bool) error {
		e := record.AuditEntry{At: now, Actor: actor, Action: record.AuditRemoveConcurrencyLimit, TargetKind: record.AuditTargetBreakerKey,
			Target: key, Outcome: record.AuditDone}
		if had {
			removed = true
			e.Detail = "was at most " + strconv.Itoa(prev.Max) + " running, set by " + prev.Actor
		} else {
			e.Outcome, e.Detail = record.AuditNoChange, "not limited"
		}
		return q.audit(ctx, tx, e)
	})
	if err != nil {
		return false, err
	}
	if removed {
		// The items it parked wait for nothing now (a breaker or pause of the key still holds
		// them back when they are claimed).
		if _, err := q.store.Unpark(ctx, []string{key}, now); err != nil {
			return true, err
		}
	}
	if s := q.running.Load(); s != nil {
		s.gate.Limits().Drop(key)
		s.Wake()
	}
	return removed, nil
}

// ConcurrencyLimits returns the stored concurrency limits by key, each with the number of its
// items running now.
func (q *Queue) ConcurrencyLimits(ctx context.Context) ([]record.ConcurrencyLimit, error) {
	rows, err := q.store.Limits(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]record.ConcurrencyLimit, len(rows))
	for i, r := range rows {
		out[i] = limitOf(r)
	}
	return out, nil
}

// ConcurrencyLimitUse returns the limit of each limited key and how many of its items run now
// (ConcurrencyLimits in maps of standard types, for metrics.Recorder.CollectConcurrencyLimits).
func (q *Queue) ConcurrencyLimitUse(ctx context.Context) (limits, inUse map[string]int, err error) {
	rows, err := q.store.Limits(ctx)
	if err != nil {
		return nil, nil, err
	}
	limits, inUse = make(map[string]int, len(rows)), make(map[string]int, len(rows))
	for _, r := range rows {
		limits[r.Key], inUse[r.Key] = r.Max, r.InUse
	}
	return limits, inUse, nil
}

func limitOf(r store.LimitRow) record.ConcurrencyLimit {
	return record.ConcurrencyLimit{Key: r.Key, Max: r.Max, InUse: r.InUse, Actor: r.Actor, Reason: r.Reason, CreatedAt: r.CreatedAt}
}

func checkLimitKey(key, actor string) []error {
	var errs []error
	switch {
	case strings.TrimSpace(key) == "":
		errs = append(errs, errors.New("key is empty: a concurrency limit names a breaker key"))
	case len(key) > maxPauseTarget:
		errs = append(errs, fmt.Errorf("key is %d bytes, more than %d: no breaker key is that long", len(key), maxPauseTarget))
	default:
		if err := keyProblem("breaker key", key); err != nil {
			errs = append(errs, err)
		}
	}
	if actor == "" {
		errs = append(errs, errors.New("actor is required: the audit log records who set and removed limits"))
	}
	return errs
}
