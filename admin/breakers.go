package admin

import (
	"errors"
	"net/http"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
)

// breakerBody is a breaker in the API.
type breakerBody struct {
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

func (s *server) breakerOf(snap breaker.Snapshot) breakerBody {
	b := breakerBody{Key: snap.Key, State: snap.State, Failures: snap.Failures, OpenedAt: timeOrNil(snap.OpenedAt), ProbeOwner: snap.ProbeOwner}
	if snap.State == breaker.StateOpen && snap.Remaining > 0 {
		b.RemainingMS = ceilMS(snap.Remaining)
		at := s.now().Add(snap.Remaining).UTC().Truncate(time.Millisecond)
		b.ProbeAt = &at
	}
	return b
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

func (s *server) listBreakers(w http.ResponseWriter, r *http.Request, _ string) {
	snaps := s.cfg.Breakers.Snapshot()
	out := make([]breakerBody, 0, len(snaps))
	for _, snap := range snaps {
		out = append(out, s.breakerOf(snap))
	}
	writeJSON(w, http.StatusOK, struct {
		Breakers []breakerBody `json:"breakers"`
	}{out})
}

func (s *server) getBreaker(w http.ResponseWriter, r *http.Request, _ string) {
	s.answerBreaker(w, r.PathValue("key"), nil)
}

func (s *server) tripBreaker(w http.ResponseWriter, r *http.Request, _ string) {
	if !decodeBody(w, r, &struct{}{}) {
		return
	}
	s.answerBreaker(w, r.PathValue("key"), s.cfg.Breakers.Trip)
}

func (s *server) resetBreaker(w http.ResponseWriter, r *http.Request, _ string) {
	if !decodeBody(w, r, &struct{}{}) {
		return
	}
	s.answerBreaker(w, r.PathValue("key"), s.cfg.Breakers.Reset)
}

// answerBreaker applies act (if any) to key's breaker and answers with the breaker after it.
func (s *server) answerBreaker(w http.ResponseWriter, key string, act func(string) error) {
	if act != nil {
		if err := act(key); errors.Is(err, breaker.ErrUnknown) {
			writeError(w, http.StatusNotFound, "unknown breaker "+quote(key))
			return
		}
	}
	snap, err := s.cfg.Breakers.Get(key)
	if err != nil {
		writeError(w, http.StatusNotFound, "unknown breaker "+quote(key))
		return
	}
	writeJSON(w, http.StatusOK, s.breakerOf(snap))
}
