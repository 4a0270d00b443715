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

// rateLimitBody is one key of a rate limiter in the API: the limiter's name, then the
// key's snapshot.
type rateLimitBody struct {
	// Limiter names the rate limiter: DefaultName for Config.RateLimits, else its name in
	// Config.RateLimiters.
	Limiter string `json:"limiter"`
	ratelimit.KeySnapshot
}

// listRateLimits answers GET /api/rate-limits: the first maxRateLimitsListed keys' limits,
// limiter by limiter (Config.RateLimits first, then the named ones in name order), each in key
// order, and the number of keys.
func (s *server) listRateLimits(w http.ResponseWriter, r *http.Request, _ string) {
	limiters := s.rateLimiters()
	if len(limiters) == 0 {
		writeError(w, http.StatusNotFound, "no rate limiter is configured")
		return
	}
	if _, ok := query(w, r); !ok {
		return
	}
	out := []rateLimitBody{}
	for _, l := range limiters {
		for _, k := range l.v.Snapshot() {
			out = append(out, rateLimitBody{Limiter: l.name, KeySnapshot: k})
		}
	}
	total := len(out)
	writeJSON(w, http.StatusOK, struct {
		RateLimits []rateLimitBody `json:"rate_limits"`
		Total      int             `json:"total"`
	}{out[:min(total, maxRateLimitsListed)], total})
}
