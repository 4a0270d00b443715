package metrics

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultPrefix is the namespace that starts every metric name when Config.Prefix is empty:
// switchboard_requests_total, switchboard_breaker_state, ...
const DefaultPrefix = "switchboard"

// AppLabel is the name of the constant label that Config.AppID puts on every series.
const AppLabel = "app"

// Config configures New. The zero value of each field means its documented default, so
// metrics.Config{} is complete: a private registry, the switchboard namespace, no app label.
type Config struct {
	// Registerer receives every metric. nil: a registry of the Recorder's own
	// (prometheus.NewRegistry), served by Handler, so that nothing is registered globally;
	// pass prometheus.DefaultRegisterer to join the process-wide registry.
	Registerer prometheus.Registerer
	// Prefix is the namespace that starts every metric name, followed by an underscore:
	// <Prefix>_requests_total, <Prefix>_breaker_state. It must be a valid Prometheus metric
	// name. "": DefaultPrefix, so that the metrics of switchboard are found under one name in
	// every service that uses it, and the dashboards and alerts written for one work for all.
	// Set it only to keep names an existing dashboard reads, or for a second Recorder on one
	// registry whose series would otherwise collide with the first one's (AppID tells two
	// applications apart without renaming anything).
	Prefix string
	// AppID names the application in a constant label, app (AppLabel), on every series the
	// Recorder exports: switchboard_requests_total{app="relay",...}. It does not change the
	// names, as Prometheus practice keeps a library's metric names fixed and tells the
	// processes that export them apart by label. Any UTF-8 text. "": no app label (the target's
	// job and instance labels, which Prometheus adds at scrape time, usually say it already).
	AppID string
	// DurationBuckets are the upper bounds of request_duration_seconds, in seconds,
	// increasing. nil: prometheus.DefBuckets (5 ms to 10 s), the range of a network call.
	DurationBuckets []float64
	// NativeHistogramBucketFactor makes request_duration_seconds and durable_claim_seconds
	// native histograms too (see prometheus.HistogramOpts), with this growth factor between
	// buckets; above 1. 0: classic buckets only, which every Prometheus server reads.
	NativeHistogramBucketFactor float64
	// StatsTimeout bounds the Queue.Counts call a scrape makes (CollectQueue): the scrape waits
	// for it no longer, and the call's context ends then. A scrape whose read did not succeed
	// in time gets the last values read (durable_stats_age_seconds says how old they are), or no
	// queue series when none was ever read. Default 2 s: well under Prometheus's default scrape
	// timeout of 10 s, so a slow database never fails the whole scrape.
	StatsTimeout time.Duration
	// StatsMaxAge is how long values read from Queue.Counts are served before a scrape reads
	// them again. Default 10 s: several Prometheus servers (or a 1 s scrape interval) then
	// cost the database one count per 10 s, and queue depths change slower than that matters.
	// Negative: read on every scrape.
	StatsMaxAge time.Duration
	// BreakerKeyLabel is the name of the label that carries a breaker's key in
	// breaker_state, breaker_half_open and breaker_refused_total; a valid
	// Prometheus label name, not starting with "__" (reserved for Prometheus itself). "":
	// "key". Set it to keep the dashboards and alerts built on another name (source, endpoint)
	// working.
	BreakerKeyLabel string
	// MaxBreakerKeys bounds the breaker keys that have series of their own in those three
	// families. A key gets its series when the Recorder first meets it (a refused call, or a
	// scrape that finds its breaker) while fewer keys than that hold series, and loses them when
	// the registry given to CollectBreakers evicts its breaker. Beyond the bound, the refusals
	// and breakers of the other keys are counted in one series per family whose key is
	// OverflowKey. Default 1,000: more endpoints than anyone reads one by one, and at most about
	// 3,000 breaker series, a scrape of a few hundred KB; a key function over request data (one
	// key per tenant or URL) would otherwise add series without end. Negative: no bound, for
	// keys from a fixed set only.
	MaxBreakerKeys int
}

// OverflowKey is the breaker key label value of the series that count the breakers and
// refusals of keys beyond Config.MaxBreakerKeys: breaker_refused_total counts their refused
// calls, breaker_state how many of them are open, breaker_half_open how many
// are half-open. The series exists only once a key has overflowed.
const OverflowKey = "_overflow"

// defaultMaxBreakerKeys is the default of Config.MaxBreakerKeys.
const defaultMaxBreakerKeys = 1000

var (
	metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelName  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// Validate reports every invalid field, joined, each naming its field.
func (c Config) Validate() error {
	var errs []error
	if c.Prefix != "" && !metricName.MatchString(c.Prefix) {
		errs = append(errs, fmt.Errorf("Prefix %q is not a valid Prometheus metric name", c.Prefix))
	}
	for i := 1; i < len(c.DurationBuckets); i++ {
		if c.DurationBuckets[i] <= c.DurationBuckets[i-1] {
			errs = append(errs, fmt.Errorf("DurationBuckets %v are not strictly increasing", c.DurationBuckets))
			break
		}
	}
	if c.NativeHistogramBucketFactor != 0 && c.NativeHistogramBucketFactor <= 1 {
		errs = append(errs, fmt.Errorf("NativeHistogramBucketFactor %v is not above 1", c.NativeHistogramBucketFactor))
	}
	if c.StatsTimeout < 0 {
		errs = append(errs, fmt.Errorf("StatsTimeout %v is negative", c.StatsTimeout))
	}
	if l := c.BreakerKeyLabel; l != "" && (!labelName.MatchString(l) || strings.HasPrefix(l, "__")) {
		errs = append(errs, fmt.Errorf("BreakerKeyLabel %q is not a valid Prometheus label name (letters, digits and _, not starting with a digit or __)", l))
	}
	if c.AppID != "" && c.BreakerKeyLabel == AppLabel {
		errs = append(errs, fmt.Errorf("BreakerKeyLabel %q is the label AppID puts on every series; name the breaker key otherwise", c.BreakerKeyLabel))
	}
	if !utf8.ValidString(c.AppID) {
		errs = append(errs, fmt.Errorf("AppID %q is not valid UTF-8", c.AppID))
	}
	return errors.Join(errs...)
}

// keyLabel returns the breaker key label c gives.
func (c Config) keyLabel() string {
	if c.BreakerKeyLabel == "" {
		return "key"
	}
	return c.BreakerKeyLabel
}

// maxKeys returns the bound on breaker keys c gives; negative for none.
func (c Config) maxKeys() int {
	if c.MaxBreakerKeys == 0 {
		return defaultMaxBreakerKeys
	}
	return c.MaxBreakerKeys
}

// prefix returns the namespace c gives: Prefix, else DefaultPrefix.
func (c Config) prefix() string {
	if c.Prefix != "" {
		return c.Prefix
	}
	return DefaultPrefix
}
