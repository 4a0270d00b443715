// Package metrics exports the Prometheus metrics of switchboard: request outcomes and
// durations (a mediator behavior), retries, fallbacks and breaker refusals (hooks of those
// behaviors), breaker states and the durable queue's depth and dead letters (collected at scrape
// time) and the durable scheduler's claim latency (a scheduler hook).
//
// New registers every metric on Config.Registerer (nothing global unless that is
// prometheus.DefaultRegisterer) under a prefix, switchboard by default. Wire the parts in one
// line each; every hook takes any number of observers, so the Recorder's sit beside logging's
// and tracing's:
//
//	rec, err := metrics.New(metrics.Config{})
//	m.Use(rec.Behavior()) // requests_total, request_duration_seconds
//	retry.Config{OnRetry: []func(context.Context, retry.Event){rec.OnRetry}}              // retries_total
//	fallback.Config{OnFallback: []func(context.Context, fallback.Fallback){rec.OnFallback}} // fallbacks_total
//	breaker.Config{OnRefusal: []func(string){rec.OnRefusal}}                              // breaker_rejections_total
//	rec.CollectBreakers(reg) // circuit_breaker_state, circuit_breaker_half_open
//	rec.CollectQueue(q)      // deferred_items, dead_letters
//	durable.Config{OnClaim: []func(time.Duration, int, error){rec.OnClaim}} // scheduler_claim_seconds
//	http.Handle("/metrics", rec.Handler())
//
// Every label is bounded: request is a request type's name (bounded by the registered types),
// outcome one of five values (requests_total) or four (fallbacks_total: answered, declined,
// failed, cancelled), state and status the queue's fixed sets, and key (named by
// Config.BreakerKeyLabel) a breaker key. The breaker key is bounded twice: its series (state,
// half-open, refusals) go when the registry given to CollectBreakers evicts its breaker, and at
// most Config.MaxBreakerKeys keys (default 1,000) have series of their own at once; the
// breakers and refusals of the others are counted under the one key OverflowKey. So a key
// function over request data cannot add series without end. docs/observability.md has the
// reference and example alerts.
//
// The behavior allocates nothing: Build resolves the series of each request type once.
package metrics
