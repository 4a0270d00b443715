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
	"github.com/switchboard-go/switchboard/behaviors/fallback"
	"github.com/switchboard-go/switchboard/behaviors/retry"
)

// outcomes are the values of the outcome label of requests_total, by index: the module's one
// vocabulary of outcomes (behaviors.OutcomeOf), a fixed set, so the label stays bounded.
var outcomes = [...]string{behaviors.OutcomeSucceeded, behaviors.OutcomeFailed, behaviors.OutcomeCancelled,
	behaviors.OutcomeRefused, behaviors.OutcomeDeferred, behaviors.OutcomeClientError}

// verdicts are the values of the outcome label of fallbacks_total, by fallback.Verdict - 1:
// what a fallback did with a failure it handled.
var verdicts = [...]fallback.Verdict{fallback.Answered, fallback.Declined, fallback.Failed, fallback.Cancelled}

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
	settled   *prometheus.CounterVec
	budgets   *budgetSeries

	mu    sync.RWMutex
	types map[reflect.Type]*series // the series of each request type, resolved once

	keyLabel string // the label name of a breaker's key
	maxKeys  int    // Config.MaxBreakerKeys with its default; negative for no bound
	keyMu    sync.RWMutex
	// keys holds the breaker keys with series of their own (at most maxKeys), each with its
	// breaker_refused_total counter, nil until the key's first refusal.
	keys map[string]prometheus.Counter
	// overflow is the breaker_refused_total counter of OverflowKey, nil until a refusal
	// overflowed.
	overflow prometheus.Counter

	rateLimits rateLimitSeries // ratelimit.go
}

// series are the resolved series of one request type.
type series struct {
	outcomes  [len(outcomes)]prometheus.Counter
	duration  prometheus.Observer
	retries   prometheus.Counter
	fallbacks [len(verdicts)]prometheus.Counter
}

// New returns a Recorder whose metrics are registered on cfg.Registerer. It fails when cfg is
// invalid or a metric of the same name and labels is already registered there (a second
// Recorder on one registry needs another AppID or Prefix).
func New(cfg Config) (*Recorder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	r := &Recorder{cfg: cfg, prefix: cfg.prefix(), reg: cfg.Registerer, types: map[reflect.Type]*series{},
		keyLabel: cfg.keyLabel(), maxKeys: cfg.maxKeys(), keys: map[string]prometheus.Counter{}}
	if r.reg == nil {
		own := prometheus.NewRegistry()
		r.reg, r.gatherer = own, own
	} else if g, ok := r.reg.(prometheus.Gatherer); ok {
		r.gatherer = g
	}
	if cfg.AppID != "" { // every collector registered from here on carries the app label
		r.reg = prometheus.WrapRegistererWith(prometheus.Labels{AppLabel: cfg.AppID}, r.reg)
	}
	buckets := cfg.DurationBuckets
	if buckets == nil {
		buckets = prometheus.DefBuckets
	}
	r.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: r.name("requests_total"),
		Help: "Requests sent through the mediator, by request type and outcome (succeeded, failed, client_error, cancelled, refused, deferred)."},
		[]string{"request", "outcome"})
	r.durations = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: r.name("request_duration_seconds"),
		Help:                        "Time from sending a request to its answer, retries and fallback included, by request type.",
		Buckets:                     buckets,
		NativeHistogramBucketFactor: cfg.NativeHistogramBucketFactor},
		[]string{"request"})
	r.retries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: r.name("retries_total"),
		Help: "Attempts that failed and were retried in process, by request type."}, []string{"request"})
	r.fallbacks = prometheus.NewCounterVec(prometheus.CounterOpts{Name: r.name("fallbacks_total"),
		Help: "Failures a fallback handled, by request type and what it did (answered, declined, failed, cancelled)."},
		[]string{"request", "outcome"})
	r.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{Name: r.name("breaker_refused_total"),
		Help: "Calls refused by an open circuit breaker, by breaker key (" + OverflowKey + ": keys beyond the Recorder's bound)."},
		[]string{r.keyLabel})
	r.claims = prometheus.NewHistogram(prometheus.HistogramOpts{Name: r.name("durable_claim_seconds"),
		Help:                        "Time of the durable scheduler's claim round trips (outcome writes included when batched with a claim).",
		Buckets:                     prometheus.DefBuckets,
		NativeHistogramBucketFactor: cfg.NativeHistogramBucketFactor})
	r.settled = prometheus.NewCounterVec(prometheus.CounterOpts{Name: r.name("durable_outcomes_total"),
		Help: "How the durable scheduler's claims of items ended, by request name and outcome (succeeded, retried, dead, refused, paused, limited, expired, interrupted, released)."},
		[]string{"name", "outcome"})
	r.budgets = newBudgetSeries(r)
	for _, c := range []prometheus.Collector{r.requests, r.durations, r.retries, r.fallbacks, r.refusals, r.claims, r.settled, r.budgets.vec} {
		if err := r.reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	if err := r.rateLimits.register(r); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return r, nil
}

// Prefix returns the namespace of the Recorder's metric names: Config.Prefix, or DefaultPrefix.
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
		duration: r.durations.WithLabelValues(name),
		retries:  r.retries.WithLabelValues(name),
	}
	for i, o := range outcomes {
		s.outcomes[i] = r.requests.WithLabelValues(name, o)
	}
	for i, v := range verdicts {
		s.fallbacks[i] = r.fallbacks.WithLabelValues(name, v.String())
	}
	r.types[t] = s
	return s
}

// OnRetry counts a retry in retries_total: it implements retry.Observer, so m.Observe(rec)
// counts the retries of every pipeline of m.
func (r *Recorder) OnRetry(_ context.Context, e retry.Event) {
	if e.Request != nil {
		r.seriesOf(reflect.TypeOf(e.Request)).retries.Inc()
	}
}

// OnFallback counts a failure a fallback handled in fallbacks_total, under the request type and
// the outcome label of what the fallback did (fallback.Verdict: answered, declined, failed,
// cancelled); it is an observer for fallback.Config.OnFallback:
//
//	fallback.New(fn, fallback.Config{OnFallback: []func(context.Context, fallback.Fallback){rec.OnFallback}})
func (r *Recorder) OnFallback(_ context.Context, f fallback.Fallback) {
	if i := int(f.Verdict) - 1; f.Request != nil && i >= 0 && i < len(verdicts) {
		r.seriesOf(reflect.TypeOf(f.Request)).fallbacks[i].Inc()
	}
}

// OnRefusal counts a refused call in breaker_refused_total; it is an observer for
// breaker.Config.OnRefusal:
//
//	breaker.NewRegistry(breaker.Config{OnRefusal: []func(string){rec.OnRefusal}})
//
// A key has its own series from its first refusal while fewer than Config.MaxBreakerKeys keys
// hold series, until the registry given to CollectBreakers evicts its breaker; the refusals of
// other keys are counted under OverflowKey. So the series are bounded even with a key function
// over request data. A registry not given to CollectBreakers tells no evictions: its keys keep
// their series, within the bound.
func (r *Recorder) OnRefusal(key string) { r.refusalsOf(key).Inc() }

// refusalsOf returns the breaker_refused_total counter of key: its own, resolved once, or
// the overflow counter when the bound is reached.
func (r *Recorder) refusalsOf(key string) prometheus.Counter {
	r.keyMu.RLock()
	c, held := r.keys[key]
	if c == nil && !held && r.fullLocked() {
		c = r.overflow
	}
	r.keyMu.RUnlock()
	if c != nil {
		return c
	}
	r.keyMu.Lock()
	defer r.keyMu.Unlock()
	if c, held = r.keys[key]; c != nil {
		return c
	}
	if held || !r.fullLocked() {
		c = r.refusals.WithLabelValues(key)
		r.keys[key] = c
		return c
	}
	if r.overflow == nil {
		r.overflow = r.refusals.WithLabelValues(OverflowKey)
	}
	return r.overflow
}

// fullLocked reports whether no more breaker keys may have series of their own. Called under
// keyMu.
func (r *Recorder) fullLocked() bool { return r.maxKeys >= 0 && len(r.keys) >= r.maxKeys }

// evicted drops the series of a key whose breaker the registry evicted, and frees its place.
func (r *Recorder) evicted(key string) {
	r.keyMu.Lock()
	defer r.keyMu.Unlock() // held while the series goes, so that a refusal now resolves a new one
	c, held := r.keys[key]
	if !held {
		return
	}
	delete(r.keys, key)
	if c != nil {
		r.refusals.DeleteLabelValues(key)
	}
}

// OnClaim observes a claim round trip in durable_claim_seconds, failed ones included (a
// database that hangs shows as claims at StoreTimeout); it is an observer for
// durable.Config.OnClaim:
//
//	durable.Open(ctx, driver, durable.Config{OnClaim: []func(time.Duration, int, error){rec.OnClaim}})
func (r *Recorder) OnClaim(took time.Duration, _ int, _ error) { r.claims.Observe(took.Seconds()) }

// OnSettled counts an item's claim in durable_outcomes_total by its request name and how it
// ended (record.Settled: succeeded, retried, dead, refused, paused, concurrency_limited,
// expired, interrupted, released; see durable.Config.OnSettled, whose observer it is):
//
//	durable.Open(ctx, driver, durable.Config{OnSettled: []func(string, record.Settled){rec.OnSettled}})
func (r *Recorder) OnSettled(name, outcome string) { r.settled.WithLabelValues(name, outcome).Inc() }
