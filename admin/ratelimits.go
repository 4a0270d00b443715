package admin

import (
	"net/http"

	"github.com/switchboard-go/switchboard/behaviors/ratelimit"
)

// RateLimits is what the rate limit route calls of a rate limiter; a *ratelimit.Behavior is
// one. The route answers 404 when Config.RateLimits is nil.
type RateLimits interface {
	Snapshot() []ratelimit.KeySnapshot
}

var _ RateLimits = (*ratelimit.Behavior)(nil)

// listRateLimits answers GET /api/rate-limits: every key's limit, in key order.
func (s *server) listRateLimits(w http.ResponseWriter, r *http.Request, _ string) {
	if s.cfg.RateLimits == nil {
		writeError(w, http.StatusNotFound, "no rate limiter is configured")
		return
	}
	if _, ok := query(w, r); !ok {
		return
	}
	out := s.cfg.RateLimits.Snapshot()
	if out == nil {
		out = []ratelimit.KeySnapshot{}
	}
	writeJSON(w, http.StatusOK, struct {
		RateLimits []ratelimit.KeySnapshot `json:"rate_limits"`
	}{out})
}
