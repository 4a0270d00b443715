package metrics

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/retry"
)

// outcomes are the values of the outcome label of requests_total, by index: the module's one
// vocabulary of outcomes (behaviors.OutcomeOf), a fixed set, so the label stays bounded.
var outcomes = [...]string{behaviors.OutcomeSuccess, behaviors.OutcomeFailure, behaviors.OutcomeCancelled,
	behaviors.OutcomeRejected, behaviors.OutcomeDeferred}

// Recorder holds the metrics of one application and the hooks that feed them. Make one with
// New; its methods are safe for concurrent use.
type Recorder struct {
	cfg      Config
	prefix   string
	reg      prometheus.Registerer
	gatherer prometheus.Gatherer

	requests  *prometheus.CounterVec
	durations *prometheus.HistogramVec
	retries   *prometheus.CounterVec
	fallbacks *prometheus.CounterVec
	refusals  *prometheus.CounterVec
	claims    prometheus.Histogram

	mu    sync.RWMutex
	types map[reflect.Type]*series // the series of each request type, resolved once
}

// series are the resolved series of one request type.
type series struct {
	outcomes  [len(outcomes)]prometheus.Counter
	duration  prometheus.Observer
	retries   prometheus.Counter
	fallbacks prometheus.Counter
}

// New returns a Recorder whose metrics are registered on cfg.Registerer. It fails when cfg is
// invalid or a metric of the same name is already registered there (a second Recorder on one
// registry needs another Prefix).
func New(cfg Config) (*Recorder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	r := &Recorder{cfg: cfg, prefix: cfg.prefix(), reg: cfg.Registerer, types: map[reflect.Type]*series{}}
	if r.reg == nil {
		own := prometheus.NewRegistry()
		r.reg, r.gatherer = own, own
	} else if g, ok := r.reg.(prometheus.Gatherer); ok {
		r.gatherer = g
	}
	buckets := cfg.DurationBuckets
	if buckets == nil {
		buckets = prometheus.DefBuckets
	}
	r.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: r.name("requests_total"),
		Help: "Requests sent through the mediator, by request type and outcome (success, failure, cancelled, rejected, deferred)."},
		[]string{"request", "outcome"})
	r.durations = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: r.name("request_duration_seconds"),
		Help:                        "Time from sending a request to its answer, retries and fallback included, by request type.",
		Buckets:                     buckets,
		NativeHistogramBucketFactor: cfg.NativeHistogramBucketFactor},
		[]string{"request"})
	r.retries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: r.name("retries_total"),
		Help: "Attempts that failed and were retried in process, by request type."}, []string{"request"})
	r.fallbacks = prometheus.NewCounterVec(prometheus.CounterOpts{Name: r.name("fallbacks_total"),
		Help: "Failures answered by a fallback, by request type."}, []string{"request"})
	r.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{Name: r.name("breaker_rejections_total"),
		Help: "Calls refused by an open circuit breaker, by breaker key."}, []string{"key"})
	r.claims = prometheus.NewHistogram(prometheus.HistogramOpts{Name: r.name("scheduler_claim_seconds"),
		Help:                        "Time of the durable scheduler's claim round trips (outcome writes included when batched with a claim).",
		Buckets:                     prometheus.DefBuckets,
		NativeHistogramBucketFactor: cfg.NativeHistogramBucketFactor})
	for _, c := range []prometheus.Collector{r.requests, r.durations, r.retries, r.fallbacks, r.refusals, r.claims} {
		if err := r.reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	return r, nil
}

// Prefix returns the prefix of the Recorder's metric names.
func (r *Recorder) Prefix() string { return r.prefix }

func (r *Recorder) name(s string) string { return r.prefix + "_" + s }

// Gatherer returns what Handler serves: the Recorder's own registry when Config.Registerer was
// nil, else the Registerer when it is also a prometheus.Gatherer (as a *prometheus.Registry
// and prometheus.DefaultRegisterer are), else nil.
func (r *Recorder) Gatherer() prometheus.Gatherer { return r.gatherer }

// Handler returns an http.Handler serving the metrics of Gatherer in the Prometheus exposition
// formats. With a Registerer that is not a Gatherer, serve the metrics from where they are
// gathered instead; this handler then answers 500.
func (r *Recorder) Handler() http.Handler {
	if r.gatherer == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "metrics: Config.Registerer is not a prometheus.Gatherer; serve its metrics where they are gathered", http.StatusInternalServerError)
		})
	}
	return promhttp.HandlerFor(r.gatherer, promhttp.HandlerOpts{})
}

// seriesOf returns the series of request type t, resolving them on first use.
func (r *Recorder) seriesOf(t reflect.Type) *series {
	r.mu.RLock()
	s := r.types[t]
	r.mu.RUnlock()
	if s != nil {
		return s
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if s = r.types[t]; s != nil {
		return s
	}
	name := behaviors.RequestName(t)
	s = &series{
		duration:  r.durations.WithLabelValues(name),
		retries:   r.retries.WithLabelValues(name),
		fallbacks: r.fallbacks.WithLabelValues(name),
	}
	for i, o := range outcomes {
		s.outcomes[i] = r.requests.WithLabelValues(name, o)
	}
	r.types[t] = s
	return s
}

// OnRetry counts a retry in retries_total; it has the signature of retry.Config.OnRetry:
//
//	retry.New(retry.Config{OnRetry: rec.OnRetry})
func (r *Recorder) OnRetry(_ context.Context, e retry.Event) {
	if e.Request != nil {
		r.seriesOf(reflect.TypeOf(e.Request)).retries.Inc()
	}
}

// OnFallback counts a fallback in fallbacks_total; it has the signature of
// fallback.Config.OnFallback:
//
//	fallback.New(fn, fallback.Config{OnFallback: rec.OnFallback})
func (r *Recorder) OnFallback(_ context.Context, req any, _ error) {
	if req != nil {
		r.seriesOf(reflect.TypeOf(req)).fallbacks.Inc()
	}
}

// OnRefusal counts a refused call in breaker_rejections_total; it has the signature of
// breaker.Config.OnRefusal:
//
//	breaker.NewRegistry(breaker.Config{OnRefusal: rec.OnRefusal})
//
// A key gets its series at its first refusal and keeps it: the series are as many as the keys
// ever refused, which a breaker key function over a bounded set of endpoints bounds.
func (r *Recorder) OnRefusal(key string) { r.refusals.WithLabelValues(key).Inc() }

// OnClaim observes a claim round trip in scheduler_claim_seconds, failed ones included (a
// database that hangs shows as claims at StoreTimeout); it has the signature of
// durable.SchedulerConfig.OnClaim:
//
//	q.Start(m, durable.SchedulerConfig{OnClaim: rec.OnClaim})
func (r *Recorder) OnClaim(took time.Duration, _ int, _ error) { r.claims.Observe(took.Seconds()) }
