package durable

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
)

// The errors of the schedule controls (Queue.AddSchedule, RemoveSchedule, PauseSchedule,
// ResumeSchedule, RunScheduleNow); match them with errors.Is.
var (
	// ErrInvalidSchedule reports a ScheduleSpec or an argument that is refused; the error
	// names every field that is wrong.
	ErrInvalidSchedule = errors.New("durable: invalid schedule")
	// ErrScheduleInCode reports a change only the code can make to a schedule declared in code
	// (Schedule): removing it, or adding a schedule of its name.
	ErrScheduleInCode = errors.New("durable: schedule declared in code")
	// ErrScheduleExists reports an AddSchedule of a name a live schedule added at run time
	// has: remove it first.
	ErrScheduleExists = errors.New("durable: schedule exists")
)

// invalidSchedule is a refusal of bad input, matching ErrInvalidSchedule; its message is the
// problems' alone.
type invalidSchedule struct{ err error }

func (e invalidSchedule) Error() string        { return e.err.Error() }
func (e invalidSchedule) Is(target error) bool { return target == ErrInvalidSchedule }
func (e invalidSchedule) Unwrap() error        { return e.err }

// ScheduleSpec is a schedule added at run time (Queue.AddSchedule). Unlike Schedule's, its
// request is data, not a Go function, so that an operator can add it through the admin API and
// every instance of the fleet that registers the request can run it.
type ScheduleSpec struct {
	// Name identifies the schedule in its run log and the admin API. Required; not the name of
	// a schedule declared in code.
	Name string
	// Spec is when it runs: a five-field cron expression or a descriptor ("@hourly",
	// "@every 90s"), as Schedule takes it. Required.
	Spec string
	// Location is the IANA name of the time zone Spec is read in ("Europe/Paris"). Default
	// UTC, for the reason WithLocation gives; "Local" is refused, as hosts' zones differ.
	Location string
	// Request is the name a Register call gave the request type each run sends. Required.
	Request string
	// Payload is that request as the registration's codec encodes it: with the default
	// JSONCodec, a JSON object of the type's fields. Each run decodes a new request from it.
	// Required: AddSchedule decodes it once to check it.
	Payload []byte
}

// AddSchedule adds the schedule spec to the queue's database, where the scheduler of every
// instance finds it within a second or its Config.PollInterval, the longer (at once on
// this instance), and the
// first instance to claim each due run sends spec's request through its mediator, as for a
// schedule declared in code. An instance that has not registered spec.Request leaves the
// schedule to those that have. actor, required, names who added it in the audit log.
//
// It refuses, with an error matching ErrInvalidSchedule that names each wrong field, an empty
// name, a bad spec or location, a request name not registered on q, or a payload its codec
// does not decode; with ErrScheduleInCode a name a schedule declared in code holds; with
// ErrScheduleExists the name of a live schedule added at run time. The name of a removed
// schedule may be taken again: the new schedule starts unpaused, and its run log goes on from
// the removed one's.
func (q *Queue) AddSchedule(ctx context.Context, spec ScheduleSpec, actor string) (record.ScheduleInfo, error) {
	if err := q.checkScheduleSpec(&spec, actor); err != nil {
		return record.ScheduleInfo{}, err
	}
	if q.declared(spec.Name) {
		return record.ScheduleInfo{}, fmt.Errorf("durable: AddSchedule %q: %w: its spec is the code's", spec.Name, ErrScheduleInCode)
	}
	loc, _ := time.LoadLocation(spec.Location)
	sched, _ := parseSpec(spec.Spec, loc, "Location")
	entry := scheduleEntry{loc: loc, sched: sched}
	now := q.clock.Now()
	var out store.ScheduleRow
	err := q.store.EditSchedule(ctx, spec.Name, now, func(tx *sql.Tx, cur *store.ScheduleRow) (*store.ScheduleRow, error) {
		switch {
		case cur != nil && cur.Request == "":
			return nil, fmt.Errorf("durable: AddSchedule %q: %w: its spec is the code's", spec.Name, ErrScheduleInCode)
		case cur != nil && cur.RemovedAt.IsZero():
			return nil, fmt.Errorf("durable: AddSchedule %q: %w (spec %q, request %q): remove it first", spec.Name, ErrScheduleExists, cur.Spec, cur.Request)
		}
		out = store.ScheduleRow{Name: spec.Name, Spec: spec.Spec, Location: loc.String(), NextAt: entry.next(now),
			Request: spec.Request, Payload: spec.Payload}
		if cur != nil {
			// A removed schedule's name taken again: its last run stays on record.
			out.LastStartedAt, out.LastEndedAt, out.LastOutcome, out.LastError = cur.LastStartedAt, cur.LastEndedAt, cur.LastOutcome, cur.LastError
		}
		detail := fmt.Sprintf("spec %q in %s, request %s %s", out.Spec, out.Location, spec.Request, spec.Payload)
		return &out, q.audit(ctx, tx, record.AuditEntry{At: now, Actor: actor, Action: record.AuditAddSchedule,
			TargetKind: record.AuditTargetSchedule, Target: spec.Name, Detail: detail, Outcome: record.AuditDone})
	})
	if errors.Is(err, store.ErrScheduleTaken) {
		return record.ScheduleInfo{}, fmt.Errorf("durable: AddSchedule %q: %w: %w", spec.Name, ErrScheduleExists, err)
	}
	if err != nil {
		return record.ScheduleInfo{}, err
	}
	q.wakeCron()
	return scheduleInfo(out, now), nil
}

// maxScheduleName bounds a schedule's name, as maxPauseTarget bounds a pause's target.
const maxScheduleName = 1024

// checkScheduleSpec trims spec's fields and reports every problem of spec and actor, joined and
// wrapped in ErrInvalidSchedule.
func (q *Queue) checkScheduleSpec(spec *ScheduleSpec, actor string) error {
	spec.Name, spec.Spec, spec.Location, spec.Request = strings.TrimSpace(spec.Name), strings.TrimSpace(spec.Spec),
		strings.TrimSpace(spec.Location), strings.TrimSpace(spec.Request)
	var errs []error
	if actor == "" {
		errs = append(errs, errors.New("actor is required: the audit log records who added the schedule"))
	}
	switch {
	case spec.Name == "":
		errs = append(errs, errors.New("Name is empty"))
	case len(spec.Name) > maxScheduleName:
		errs = append(errs, fmt.Errorf("Name is %d bytes, more than %d: a schedule's name is read in every list and audit entry", len(spec.Name), maxScheduleName))
	}
	if spec.Location == "" {
		spec.Location = "UTC"
	}
	loc, err := time.LoadLocation(spec.Location)
	switch {
	case spec.Location == "Local":
		errs = append(errs, errors.New(`Location "Local" is the host's zone, which differs between hosts: name the zone ("Europe/Paris")`))
	case err != nil:
		errs = append(errs, fmt.Errorf("Location %q is not a known time zone: %v", spec.Location, err))
	}
	if spec.Spec == "" {
		errs = append(errs, errors.New("Spec is empty: a cron expression (0 2 * * *) or a descriptor (@hourly, @every 90s)"))
	} else {
		// A spec's syntax does not depend on the zone: it is checked in UTC when Location is
		// refused, so that both problems are named at once.
		if _, err := parseSpec(spec.Spec, cmp.Or(loc, time.UTC), "Location"); err != nil {
			errs = append(errs, fmt.Errorf("Spec: %v", err))
		}
	}
	switch {
	case spec.Request == "":
		errs = append(errs, errors.New("Request is empty: the name a Register call gave the request type"))
	case q.reg.lookupName(spec.Request) == nil:
		errs = append(errs, fmt.Errorf("Request %q is not a registered request name (durable.Register)", spec.Request))
	case len(spec.Payload) == 0:
		errs = append(errs, fmt.Errorf("Payload is empty: the %s request, as its codec encodes it", spec.Request))
	case len(spec.Payload) > q.maxPayload:
		errs = append(errs, fmt.Errorf("Payload has %d bytes, over the queue's %d (Config.MaxPayloadBytes)", len(spec.Payload), q.maxPayload))
	default:
		if _, err := q.reg.decode(spec.Request, spec.Payload); err != nil {
			errs = append(errs, fmt.Errorf("Payload does not decode as a %s request: %v", spec.Request, errors.Unwrap(err)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		name := spec.Name
		if len(name) > maxScheduleName {
			name = strings.ToValidUTF8(name[:64], "") + "…" // the error names it; Name's problem gives its length
		}
		return fmt.Errorf("durable: AddSchedule %q: %w", name, invalidSchedule{err})
	}
	return nil
}

// declared reports whether this instance declares a schedule of name in code.
func (q *Queue) declared(name string) bool {
	for _, e := range q.schedules.list() {
		if e.name == name {
			return true
		}
	}
	return false
}

// RemoveSchedule removes the schedule name, added at run time: no instance starts a run of it
// any more (each learns of it within a second or its PollInterval, the longer; a run already
// going is not interrupted).
// Its row and run log stay, the row marked removed. A schedule declared in code is refused with
// ErrScheduleInCode: its Schedule call would add it back at the next Start, so pause it, or
// delete the call. actor, required, names who removed it in the audit log.
func (q *Queue) RemoveSchedule(ctx context.Context, name, actor string) (record.ScheduleInfo, error) {
	return q.changeSchedule(ctx, "RemoveSchedule", name, actor, record.AuditRemoveSchedule, "",
		func(r *store.ScheduleRow, now time.Time) (string, error) {
			if r.Request == "" {
				return "", fmt.Errorf("durable: RemoveSchedule %q: %w: delete its Schedule call, or pause it", name, ErrScheduleInCode)
			}
			r.RemovedAt, r.RemovedBy, r.RunNowAt, r.RunNowBy = now, actor, time.Time{}, ""
			return "", nil
		})
}

// PauseSchedule pauses the schedule name, declared in code or added at run time, on every
// instance (each within a second or its PollInterval, the longer): its due runs are passed over, not logged, until it is
// resumed or, when until is not zero, until then. A run already going is not interrupted, and a
// run asked for with RunScheduleNow still runs. Pausing a paused schedule changes its end.
// actor, required, names who paused it in the audit log.
func (q *Queue) PauseSchedule(ctx context.Context, name, actor string, until time.Time) (record.ScheduleInfo, error) {
	detail := ""
	if !until.IsZero() {
		detail = "until " + until.UTC().Format(time.RFC3339)
	}
	return q.changeSchedule(ctx, "PauseSchedule", name, actor, record.AuditPauseSchedule, detail,
		func(r *store.ScheduleRow, now time.Time) (string, error) {
			if !until.IsZero() && !until.After(now) {
				return "", fmt.Errorf("durable: PauseSchedule %q: %w", name, invalidSchedule{fmt.Errorf("until %s is not after now (%s)",
					until.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))})
			}
			if r.Paused(now) && r.PausedUntil.Equal(until) {
				return "already paused by " + r.PausedBy + " at " + r.PausedAt.UTC().Format(time.RFC3339), nil
			}
			r.PausedAt, r.PausedUntil, r.PausedBy = now, until, actor
			return "", nil
		})
}

// ResumeSchedule ends the pause of the schedule name on every instance (each within its
// PollInterval, the longer of the two). Its next run is the first its spec names after now: the runs due while it was
// paused are not caught up. Resuming a schedule that is not paused changes nothing (the audit
// log says so). actor, required, names who resumed it.
func (q *Queue) ResumeSchedule(ctx context.Context, name, actor string) (record.ScheduleInfo, error) {
	return q.changeSchedule(ctx, "ResumeSchedule", name, actor, record.AuditResumeSchedule, "",
		func(r *store.ScheduleRow, now time.Time) (string, error) {
			if !r.Paused(now) {
				return "not paused", nil
			}
			r.PausedAt, r.PausedUntil, r.PausedBy = time.Time{}, time.Time{}, ""
			if !r.NextAt.After(now) {
				// No instance passed over the runs due while it was paused (none ran).
				if loc, err := time.LoadLocation(r.Location); err == nil {
					if sched, err := parseSpec(r.Spec, loc, "Location"); err == nil {
						r.NextAt = (&scheduleEntry{loc: loc, sched: sched}).next(now)
					}
				}
			}
			return "", nil
		})
}

// RunScheduleNow asks for one run of the schedule name now, paused or not, beside its due runs:
// one instance of the fleet claims it (each looks within a second or its PollInterval, the
// longer; this one at once),
// under the run lease, and the run log records it with actor as its RunNowBy. While a run of
// the schedule is going, the run asked for waits for its end; asking again while one is pending
// changes nothing (the audit log says so). A pause of the schedule's request name
// (Queue.Pause) holds the run back: it is logged as record.OutcomeSkipped, saying so. actor,
// required, names who asked.
func (q *Queue) RunScheduleNow(ctx context.Context, name, actor string) (record.ScheduleInfo, error) {
	return q.changeSchedule(ctx, "RunScheduleNow", name, actor, record.AuditRunScheduleNow, "",
		func(r *store.ScheduleRow, now time.Time) (string, error) {
			if !r.RunNowAt.IsZero() {
				return "a run asked for by " + r.RunNowBy + " at " + r.RunNowAt.UTC().Format(time.RFC3339) + " is pending", nil
			}
			r.RunNowAt, r.RunNowBy = now, actor
			return "", nil
		})
}

// changeSchedule applies change to the live schedule name and records action in the audit log
// in the same transaction, then wakes this instance's schedule loop. change edits the row, or
// returns why there is nothing to do (the row is then not written, and the entry's outcome is
// record.AuditNoChange with that as its detail).
func (q *Queue) changeSchedule(ctx context.Context, op, name, actor string, action record.AuditAction, detail string,
	change func(r *store.ScheduleRow, now time.Time) (noChange string, err error)) (record.ScheduleInfo, error) {
	if actor == "" {
		return record.ScheduleInfo{}, fmt.Errorf("durable: %s %q: %w", op, name, invalidSchedule{errors.New("actor is required: the audit log records who acted")})
	}
	now := q.clock.Now()
	var out store.ScheduleRow
	err := q.store.EditSchedule(ctx, name, now, func(tx *sql.Tx, cur *store.ScheduleRow) (*store.ScheduleRow, error) {
		if cur == nil || !cur.RemovedAt.IsZero() {
			return nil, &NotFoundError{What: "schedule", Key: strconv.Quote(name)}
		}
		out = *cur
		why, err := change(&out, now)
		if err != nil {
			return nil, err
		}
		e := record.AuditEntry{At: now, Actor: actor, Action: action, TargetKind: record.AuditTargetSchedule, Target: name,
			Detail: detail, Outcome: record.AuditDone}
		if why != "" {
			e.Detail, e.Outcome, out = why, record.AuditNoChange, *cur
		}
		if err := q.audit(ctx, tx, e); err != nil {
			return nil, err
		}
		if why != "" {
			return nil, nil
		}
		return &out, nil
	})
	if err != nil {
		return record.ScheduleInfo{}, err
	}
	q.wakeCron()
	return scheduleInfo(out, now), nil
}

// wakeCron makes this instance's schedule loop, if it runs, read the schedules now.
func (q *Queue) wakeCron() {
	if s := q.running.Load(); s != nil {
		signal(s.cronWake)
	}
}
