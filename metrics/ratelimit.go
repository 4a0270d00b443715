package metrics

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-go/switchboard/behaviors/ratelimit"
)

// rateLimitSeries are the rate limiter's series: per limit key, bounded as the breaker keys are
// (Config.MaxBreakerKeys, its own count of keys), the keys beyond the bound sharing the series of
// OverflowKey.
type rateLimitSeries struct {
	waits   *prometheus.HistogramVec
	refused *prometheus.CounterVec

	mu       sync.RWMutex
	keys     map[string]*rateLimitKey
	overflow *rateLimitKey
}

type rateLimitKey struct {
	wait    prometheus.Observer
	refused prometheus.Counter
}

// rateLimitBuckets are the buckets of rate_limit_wait_seconds: from a free permit (0) to a
// wait of a few seconds, which a MaxWait seldom allows.
var rateLimitBuckets = []float64{0, .001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

func (s *rateLimitSeries) register(r *Recorder) error {
	s.keys = map[string]*rateLimitKey{}
	s.waits = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: r.name("rate_limit_wait_seconds"),
		Help:    "Time calls waited for their rate limit permit (0: free at once), by limit key (" + OverflowKey + ": keys beyond the Recorder's bound).",
		Buckets: rateLimitBuckets, NativeHistogramBucketFactor: r.cfg.NativeHistogramBucketFactor}, []string{r.keyLabel})
	s.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: r.name("rate_limit_refused_total"),
		Help: "Calls refused by a rate limit, by limit key (" + OverflowKey + ": keys beyond the Recorder's bound)."}, []string{r.keyLabel})
	for _, c := range []prometheus.Collector{s.waits, s.refused} {
		if err := r.reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// of returns the series of key, resolved once.
func (s *rateLimitSeries) of(key string, maxKeys int) *rateLimitKey {
	s.mu.RLock()
	k := s.keys[key]
	s.mu.RUnlock()
	if k != nil {
		return k
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if k = s.keys[key]; k != nil {
		return k
	}
	if maxKeys >= 0 && len(s.keys) >= maxKeys {
		if s.overflow == nil {
			s.overflow = &rateLimitKey{wait: s.waits.WithLabelValues(OverflowKey), refused: s.refused.WithLabelValues(OverflowKey)}
		}
		return s.overflow
	}
	k = &rateLimitKey{wait: s.waits.WithLabelValues(key), refused: s.refused.WithLabelValues(key)}
	s.keys[key] = k
	return k
}

// OnRateLimitPermit observes the wait of a permit in rate_limit_wait_seconds; it is an
// observer for ratelimit.Config.OnPermit:
//
//	ratelimit.New(ratelimit.Config{Rate: 100, OnPermit: []func(context.Context, ratelimit.PermitEvent){rec.OnRateLimitPermit}})
func (r *Recorder) OnRateLimitPermit(_ context.Context, e ratelimit.PermitEvent) {
	r.rateLimits.of(e.Key, r.maxKeys).wait.Observe(e.Wait.Seconds())
}

// OnRateLimitRefused counts a refusal in rate_limit_refused_total; it is an observer for
// ratelimit.Config.OnRefused.
func (r *Recorder) OnRateLimitRefused(_ context.Context, e ratelimit.RefusedEvent) {
	r.rateLimits.of(e.Key, r.maxKeys).refused.Inc()
}
