// Package metrics exports the Prometheus metrics of switchboard: request outcomes and
// durations (a mediator behavior), retries, fallbacks and breaker refusals (an observer of those
// behaviors), breaker states and the durable queue's depth and dead letters (collected at scrape
// time) and the durable scheduler's claim latency (an observer of the queue).
//
// New registers every metric on Config.Registerer (nothing global unless that is
// prometheus.DefaultRegisterer). Every name is <namespace>_<subsystem>_<name>: the namespace is
// switchboard (DefaultPrefix; Config.Prefix replaces it), the subsystem the part that exports
// the family (breaker_, rate_limit_, retry_budget_, hedge_, durable_; none for the families
// counted per request type: requests_total, request_duration_seconds, retries_total,
// fallbacks_total). Config.AppID names the application in the constant label app and leaves
// the names alone. The Recorder is an observer of every behavior (retry, fallback, breaker
// refusals, rate limit, retry budget) and of the durable queue (claims, settled items):
// attached once to the mediator, it hears them all, in the pipelines and in a queue started
// with the mediator. Wire the parts in one line each:
//
//	rec, err := metrics.New(metrics.Config{})
//	m.Observe(rec)           // retries_total, fallbacks_total, breaker_refused_total, durable_claim_seconds, ...
//	m.Use(rec.Behavior())    // requests_total, request_duration_seconds
//	rec.CollectBreakers(reg) // breaker_state, breaker_half_open
//	rec.CollectQueue(q)      // durable_items, durable_dead_letters
//	http.Handle("/metrics", rec.Handler())
//
// Every label is bounded: request is a request type's name (bounded by the registered types),
// outcome one of six values (requests_total: succeeded, failed, client_error, cancelled,
// refused, deferred; see behaviors.OutcomeOf) or four (fallbacks_total: answered, declined,
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
