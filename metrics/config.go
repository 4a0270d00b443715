package metrics

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultPrefix is the prefix of every metric name when Config gives neither Prefix nor AppID.
const DefaultPrefix = "switchboard"

// Config configures New. The zero value of each field means its documented default, so
// metrics.Config{} is complete: a private registry, the switchboard prefix.
type Config struct {
	// Registerer receives every metric. nil: a registry of the Recorder's own
	// (prometheus.NewRegistry), served by Handler, so that nothing is registered globally;
	// pass prometheus.DefaultRegisterer to join the process-wide registry.
	Registerer prometheus.Registerer
	// Prefix starts every metric name, followed by an underscore: <Prefix>_requests_total.
	// It must be a valid Prometheus metric name. "": derived from AppID, or DefaultPrefix when
	// AppID is empty too, so that the metrics of switchboard are found under one name.
	Prefix string
	// AppID names the application, for a prefix of its own when Prefix is empty: the id in
	// lower case, every run of characters other than a-z, 0-9 and _ turned into one
	// underscore, leading and trailing underscores dropped, and an underscore put in front of
	// a leading digit ("Billing-API v2" gives billing_api_v2). An id with nothing left gives
	// DefaultPrefix. "": DefaultPrefix.
	AppID string
	// DurationBuckets are the upper bounds of request_duration_seconds, in seconds,
	// increasing. nil: prometheus.DefBuckets (5 ms to 10 s), the range of a network call.
	DurationBuckets []float64
	// NativeHistogramBucketFactor makes request_duration_seconds and scheduler_claim_seconds
	// native histograms too (see prometheus.HistogramOpts), with this growth factor between
	// buckets; above 1. 0: classic buckets only, which every Prometheus server reads.
	NativeHistogramBucketFactor float64
	// StatsTimeout bounds the Queue.Counts call a scrape makes (CollectQueue): the scrape waits
	// for it no longer, and the call's context ends then. A scrape whose read did not succeed
	// in time gets the last values read (queue_stats_age_seconds says how old they are), or no
	// queue series when none was ever read. Default 2 s: well under Prometheus's default scrape
	// timeout of 10 s, so a slow database never fails the whole scrape.
	StatsTimeout time.Duration
	// StatsMaxAge is how long values read from Queue.Counts are served before a scrape reads
	// them again. Default 10 s: several Prometheus servers (or a 1 s scrape interval) then
	// cost the database one count per 10 s, and queue depths change slower than that matters.
	// Negative: read on every scrape.
	StatsMaxAge time.Duration
	// BreakerKeyLabel is the name of the label that carries a breaker's key in
	// circuit_breaker_state, circuit_breaker_half_open and breaker_rejections_total; a valid
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
// refusals of keys beyond Config.MaxBreakerKeys: breaker_rejections_total counts their refused
// calls, circuit_breaker_state how many of them are open, circuit_breaker_half_open how many
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

// prefix returns the prefix c gives: Prefix, else derived from AppID, else DefaultPrefix.
func (c Config) prefix() string {
	if c.Prefix != "" {
		return c.Prefix
	}
	var b strings.Builder
	pending := false
	for _, r := range strings.ToLower(c.AppID) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' {
			if pending && b.Len() > 0 {
				b.WriteByte('_')
			}
			pending = false
			b.WriteRune(r)
			continue
		}
		pending = true
	}
	p := strings.Trim(b.String(), "_")
	switch {
	case p == "":
		return DefaultPrefix
	case p[0] >= '0' && p[0] <= '9':
		return "_" + p
	}
	return p
}
