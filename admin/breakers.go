package admin

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable/record"
)

// breakerBody is a breaker in the API.
type breakerBody struct {
	// Registry names the registry the breaker is in: DefaultName for Config.Breakers, else
	// its name in Config.BreakerRegistries.
	Registry string `json:"registry"`
	// Shared says whether the registry shares its state with the fleet (a breaker.Store): a
	// trip or reset of one that does not changes this instance's breaker alone.
	Shared      bool          `json:"shared"`
	Key         string        `json:"key"`
	State       breaker.State `json:"state"`
	Failures    int           `json:"failures"`
	OpenedAt    *time.Time    `json:"opened_at"`
	RemainingMS int64         `json:"remaining_ms"`
	ProbeAt     *time.Time    `json:"probe_at"`
	// ProbeOwner is, for a half-open breaker shared by a fleet, the instance holding its
	// probes (breaker.Snapshot.ProbeOwner).
	ProbeOwner string `json:"probe_owner,omitempty"`
}

// sharer is what a registry that may share its state says of it; a *breaker.Registry is one.
type sharer interface{ Shared() bool }

func (s *server) breakerOf(registry string, shared bool, snap breaker.Snapshot) breakerBody {
	b := breakerBody{Registry: registry, Shared: shared, Key: snap.Key, State: snap.State, Failures: snap.Failures, OpenedAt: timeOrNil(snap.OpenedAt), ProbeOwner: snap.ProbeOwner}
	if snap.State == breaker.StateOpen && snap.Remaining > 0 {
		b.RemainingMS = ceilMS(snap.Remaining)
		at := s.now().Add(snap.Remaining).UTC().Truncate(time.Millisecond)
		b.ProbeAt = &at
	}
	return b
}

// isShared reports whether reg shares its state with the fleet; a registry that cannot say is
// taken as not sharing it.
func isShared(reg Breakers) bool {
	sh, ok := reg.(sharer)
	return ok && sh.Shared()
}

// ceilMS rounds d up to whole milliseconds, so an open breaker never shows 0 ms left.
func ceilMS(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// listBreakers answers GET /api/breakers: the breakers of every registry, registry by
// registry (Config.Breakers first, then the named ones in name order).
func (s *server) listBreakers(w http.ResponseWriter, r *http.Request, _ string) {
	if _, ok := query(w, r); !ok {
		return
	}
	out := []breakerBody{}
	for _, reg := range s.breakerRegistries() {
		for _, snap := range reg.v.Snapshot() {
			out = append(out, s.breakerOf(reg.name, isShared(reg.v), snap))
		}
	}
	writeJSON(w, http.StatusOK, struct {
		Breakers []breakerBody `json:"breakers"`
	}{out})
}

func (s *server) getBreaker(w http.ResponseWriter, r *http.Request, _ string) {
	s.answerBreaker(w, r, "", "", nil)
}

func (s *server) tripBreaker(w http.ResponseWriter, r *http.Request, principal string) {
	if !decodeBody(w, r, &struct{}{}) {
		return
	}
	s.answerBreaker(w, r, principal, record.AuditTripBreaker, Breakers.Trip)
}

func (s *server) resetBreaker(w http.ResponseWriter, r *http.Request, principal string) {
	if !decodeBody(w, r, &struct{}{}) {
		return
	}
	s.answerBreaker(w, r, principal, record.AuditResetBreaker, Breakers.Reset)
}

// breakerAuditor is what records a breaker's trip or reset in the queue's audit log; a
// *durable.Queue is one.
type breakerAuditor interface {
	RecordBreakerAction(ctx context.Context, actor string, action record.AuditAction, key, detail string) error
}

// auditBreaker records principal's action on the breaker of key in reg, in the audit log of the
// configured queue when it keeps one. The action is done: a log that could not be written is
// logged as an error, and the answer is the breaker's all the same.
func (s *server) auditBreaker(r *http.Request, principal string, action record.AuditAction, reg named[Breakers], key string) {
	a, ok := s.cfg.Queue.(breakerAuditor)
	if !ok {
		return
	}
	var detail []string
	if reg.name != DefaultName {
		detail = append(detail, "registry "+reg.name)
	}
	if !isShared(reg.v) {
		detail = append(detail, "this instance only: the registry is not shared")
	}
	if err := a.RecordBreakerAction(r.Context(), principal, action, key, strings.Join(detail, "; ")); err != nil {
		s.log.Error("admin: the breaker's "+string(action)+" is done but its audit entry was not written",
			zap.String("key", key), zap.String("registry", reg.name), zap.String("actor", principal), zap.Error(err))
	}
}

// answerBreaker applies act (if any) to the breaker of the request's key, in the registry
// registryOf finds, records it in the audit log as principal's action, and answers with the
// breaker after it.
func (s *server) answerBreaker(w http.ResponseWriter, r *http.Request, principal string, action record.AuditAction, act func(Breakers, string) error) {
	key := r.PathValue("key")
	reg, ok := s.registryOf(w, r, key)
	if !ok {
		return
	}
	many := len(s.breakerRegistries()) > 1
	if act != nil {
		if err := act(reg.v, key); errors.Is(err, breaker.ErrUnknown) {
			unknownBreaker(w, reg, key, many)
			return
		}
		s.auditBreaker(r, principal, action, reg, key)
	}
	snap, err := reg.v.Get(key)
	if err != nil {
		unknownBreaker(w, reg, key, many)
		return
	}
	writeJSON(w, http.StatusOK, s.breakerOf(reg.name, isShared(reg.v), snap))
}
