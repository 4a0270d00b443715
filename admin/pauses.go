package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

// Pauses is what the pause routes call of the queue; a *durable.Queue is one. The routes
// answer 404 when Config.Queue is not one.
type Pauses interface {
	Pause(ctx context.Context, target durable.PauseTarget, actor string, opts ...durable.PauseOption) (record.Pause, error)
	Resume(ctx context.Context, target durable.PauseTarget, actor string) (bool, error)
	Pauses(ctx context.Context) ([]record.Pause, error)
}

// auditLog is what the audit route calls of the queue; a *durable.Queue is one.
type auditLog interface {
	Audit(ctx context.Context, f durable.AuditFilter) ([]record.AuditEntry, error)
}

var (
	_ Pauses   = (*durable.Queue)(nil)
	_ auditLog = (*durable.Queue)(nil)
)

// needQueueOf runs h with Config.Queue as a T, and answers 404 with lacks when it is not one
// (a stand-in of Operations alone).
func needQueueOf[T any](s *server, lacks string, h func(w http.ResponseWriter, r *http.Request, principal string, q T)) handlerFunc {
	return s.needQueue(func(w http.ResponseWriter, r *http.Request, p string) {
		q, ok := s.cfg.Queue.(T)
		if !ok {
			writeError(w, http.StatusNotFound, lacks)
			return
		}
		h(w, r, p, q)
	})
}

const (
	noPauses   = "the configured queue does not support pauses (it is not an admin.Pauses, such as a *durable.Queue)"
	noAuditLog = "the configured queue has no audit log (it has no Audit method, as a *durable.Queue has)"
)

type pauseBody struct {
	Kind      record.PauseKind `json:"kind"`
	Target    string           `json:"target"`
	Until     *time.Time       `json:"until"`
	Expired   bool             `json:"expired"`
	Actor     string           `json:"actor"`
	Reason    string           `json:"reason"`
	CreatedAt time.Time        `json:"created_at"`
}

func pauseOf(p record.Pause) pauseBody {
	return pauseBody{Kind: p.Kind, Target: p.Target, Until: timeOrNil(p.Until), Expired: p.Expired, Actor: p.Actor,
		Reason: p.Reason, CreatedAt: p.CreatedAt.UTC()}
}

func (s *server) listPauses(w http.ResponseWriter, r *http.Request, _ string, q Pauses) {
	if _, ok := query(w, r); !ok {
		return
	}
	ps, err := q.Pauses(r.Context())
	if err != nil {
		s.failed(w, r, err, leftBeforeRead)
		return
	}
	out := make([]pauseBody, 0, len(ps))
	for _, p := range ps {
		out = append(out, pauseOf(p))
	}
	writeJSON(w, http.StatusOK, struct {
		Pauses []pauseBody `json:"pauses"`
	}{out})
}

// maxPauseTarget is the longest target durable.Queue.Pause takes.
const maxPauseTarget = 1024

// maxReason is the longest reason durable.Queue.Pause and SetConcurrencyLimit take.
const maxReason = 1024

// pauseTargetOf checks the kind and target of a pause or resume body, naming the bad fields.
func pauseTargetOf(kind, target string) (durable.PauseTarget, []error) {
	var errs []error
	switch record.PauseKind(kind) {
	case record.PauseName, record.PauseBreakerKey:
	case "":
		errs = append(errs, fmt.Errorf(`field "kind" is required: %q (a request name) or %q`, record.PauseName, record.PauseBreakerKey))
	default:
		errs = append(errs, fmt.Errorf(`field "kind" %s: want %q (a request name) or %q`, quote(kind), record.PauseName, record.PauseBreakerKey))
	}
	switch {
	case strings.TrimSpace(target) == "":
		errs = append(errs, errors.New(`field "target" is required: the request name or the breaker key`))
	case len(target) > maxPauseTarget:
		errs = append(errs, fmt.Errorf(`field "target" is %d bytes, more than %d: no request name or breaker key is that long`, len(target), maxPauseTarget))
	default:
		errs = append(errs, badTexts(`field "target"`, target)...)
	}
	return durable.PauseTarget{Kind: record.PauseKind(kind), Target: target}, errs
}

func (s *server) createPause(w http.ResponseWriter, r *http.Request, principal string, q Pauses) {
	var body struct {
		Kind   string `json:"kind"`
		Target string `json:"target"`
		Until  string `json:"until"`
		Reason string `json:"reason"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	target, errs := pauseTargetOf(body.Kind, body.Target)
	opts := []durable.PauseOption{durable.PauseReason(body.Reason)}
	if body.Until != "" {
		until, err := time.Parse(time.RFC3339Nano, body.Until)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf(`field "until" %s: want an RFC 3339 time such as 2026-01-02T15:04:05Z`, quote(body.Until)))
		case !until.After(s.now()):
			errs = append(errs, fmt.Errorf(`field "until" %s is not in the future: leave it out to pause until resumed`, quote(body.Until)))
		default:
			opts = append(opts, durable.PauseUntil(until))
		}
	}
	if strings.TrimSpace(body.Reason) == "" {
		errs = append(errs, errors.New(`field "reason" is required: a pause says why`))
	} else if len(body.Reason) > maxReason {
		errs = append(errs, fmt.Errorf(`field "reason" is %d bytes, more than %d: say why in a few sentences`, len(body.Reason), maxReason))
	}
	if len(errs) > 0 {
		writeError(w, http.StatusBadRequest, joinAtMost(errs).Error()+"; nothing was paused")
		return
	}
	p, err := q.Pause(r.Context(), target, principal, opts...)
	if err != nil {
		s.failed(w, r, err, leftBeforeChange)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Pause pauseBody `json:"pause"`
	}{pauseOf(p)})
}

func (s *server) resumePause(w http.ResponseWriter, r *http.Request, principal string, q Pauses) {
	var body struct {
		Kind   string `json:"kind"`
		Target string `json:"target"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	target, errs := pauseTargetOf(body.Kind, body.Target)
	if len(errs) > 0 {
		writeError(w, http.StatusBadRequest, joinAtMost(errs).Error()+"; nothing was resumed")
		return
	}
	resumed, err := q.Resume(r.Context(), target, principal)
	if err != nil {
		s.failed(w, r, err, leftBeforeChange)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Resumed bool `json:"resumed"`
	}{resumed})
}

// defaultAuditPage is the entries of a page of the audit log when the query gives no limit,
// as durable.AuditFilter has it.
const defaultAuditPage = 50

type auditBody struct {
	ID         int64               `json:"id"`
	At         time.Time           `json:"at"`
	Actor      string              `json:"actor"`
	Action     record.AuditAction  `json:"action"`
	TargetKind record.AuditTarget  `json:"target_kind"`
	Target     string              `json:"target"`
	Detail     string              `json:"detail"`
	Outcome    record.AuditOutcome `json:"outcome"`
}

func (s *server) listAudit(w http.ResponseWriter, r *http.Request, _ string, q auditLog) {
	v, ok := query(w, r, "target_kind", "target", "before", "limit")
	if !ok {
		return
	}
	f := durable.AuditFilter{TargetKind: record.AuditTarget(v.Get("target_kind")), Target: v.Get("target")}
	var errs []error
	if f.Target != "" && f.TargetKind == "" {
		errs = append(errs, errors.New("target is given without target_kind: give the kind of target too"))
	}
	if k := f.TargetKind; k != "" && !slices.Contains(record.AuditTargets(), k) {
		errs = append(errs, fmt.Errorf("target_kind %s: want one of %q", quote(string(k)), record.AuditTargets()))
	}
	if b := v.Get("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			errs = append(errs, fmt.Errorf("before %s: want the id of an entry, a positive integer", quote(b)))
		}
		f.Before = n
	}
	var err error
	if f.Limit, err = intParam(v, "limit", 1, 500); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		writeError(w, http.StatusBadRequest, joinAtMost(errs).Error())
		return
	}
	entries, err := q.Audit(r.Context(), f)
	if err != nil {
		s.failed(w, r, err, leftBeforeRead)
		return
	}
	out := make([]auditBody, 0, len(entries))
	for _, e := range entries {
		out = append(out, auditBody{ID: e.ID, At: e.At.UTC(), Actor: e.Actor, Action: e.Action, TargetKind: e.TargetKind,
			Target: e.Target, Detail: e.Detail, Outcome: e.Outcome})
	}
	// The next page is the entries before the last of this one, when this one is full.
	var next *int64
	if limit := cmp.Or(f.Limit, defaultAuditPage); len(out) == limit {
		next = &out[len(out)-1].ID
	}
	writeJSON(w, http.StatusOK, struct {
		Entries    []auditBody `json:"entries"`
		NextBefore *int64      `json:"next_before"`
	}{out, next})
}
