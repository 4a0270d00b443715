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

// maxRateLimitsListed is the most keys GET /api/rate-limits lists: 500, a few screens of the
// dashboard's panel and some 150 kB of JSON, so that a limiter keyed by something with many
// values (a URL) keeps the dashboard usable. The answer's "total" says how many there are.
const maxRateLimitsListed = 500

// listRateLimits answers GET /api/rate-limits: the first maxRateLimitsListed keys' limits, in
// key order, and the number of keys.
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
	total := len(out)
	writeJSON(w, http.StatusOK, struct {
		RateLimits []ratelimit.KeySnapshot `json:"rate_limits"`
		Total      int                     `json:"total"`
	}{out[:min(total, maxRateLimitsListed)], total})
}
