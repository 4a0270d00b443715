package metrics_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-go/switchboard/metrics"
)

// The namespace is Prefix when set, else "switchboard", whatever AppID says: AppID is a label.
func TestPrefix(t *testing.T) {
	for _, c := range []struct {
		cfg  metrics.Config
		want string
	}{
		{metrics.Config{}, "switchboard"},
		{metrics.Config{Prefix: "shop"}, "shop"},
		{metrics.Config{Prefix: "shop", AppID: "Other"}, "shop"},
		{metrics.Config{AppID: "Billing-API v2"}, "switchboard"},
		{metrics.Config{AppID: "!!!"}, "switchboard"},
	} {
		rec, err := metrics.New(c.cfg)
		if err != nil {
			t.Fatalf("%+v: %v", c.cfg, err)
		}
		if got := rec.Prefix(); got != c.want {
			t.Errorf("%+v: prefix %q, want %q", c.cfg, got, c.want)
		}
	}
}

// Validate names each invalid field, and the boundaries are where the docs put them: equal
// buckets are not increasing, a bucket factor of exactly 1 is not above 1, a zero timeout is
// the default.
func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  metrics.Config
		want string // "" for valid
	}{
		{metrics.Config{}, ""},
		{metrics.Config{Prefix: "9bad"}, "Prefix"},
		{metrics.Config{DurationBuckets: []float64{0.1, 0.1}}, "DurationBuckets"},
		{metrics.Config{DurationBuckets: []float64{0.2, 0.1}}, "DurationBuckets"},
		{metrics.Config{DurationBuckets: []float64{0.1, 0.2}}, ""},
		{metrics.Config{NativeHistogramBucketFactor: 1}, "NativeHistogramBucketFactor"},
		{metrics.Config{NativeHistogramBucketFactor: 1.1}, ""},
		{metrics.Config{StatsTimeout: -1}, "StatsTimeout"},
		{metrics.Config{BreakerKeyLabel: "source"}, ""},
		{metrics.Config{BreakerKeyLabel: "_source2"}, ""},
		{metrics.Config{BreakerKeyLabel: "2source"}, "BreakerKeyLabel"},
		{metrics.Config{BreakerKeyLabel: "host-name"}, "BreakerKeyLabel"},
		{metrics.Config{BreakerKeyLabel: "__key"}, "BreakerKeyLabel"},
		{metrics.Config{BreakerKeyLabel: "a:b"}, "BreakerKeyLabel"},
		{metrics.Config{MaxBreakerKeys: -1}, ""},
		{metrics.Config{AppID: "Billing-API v2 ✓"}, ""},
		{metrics.Config{AppID: "bad\xff"}, "AppID"},
		{metrics.Config{AppID: "shop", BreakerKeyLabel: "app"}, "BreakerKeyLabel"},
		{metrics.Config{BreakerKeyLabel: "app"}, ""},
	} {
		err := c.cfg.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.cfg, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: %v, want an error naming %s", c.cfg, err, c.want)
		}
	}
}

// The behavior used directly, without a mediator's Build binding it, counts under the request
// type of the value it is given.
func TestUnboundBehaviorCounts(t *testing.T) {
	rec, err := metrics.New(metrics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	b := rec.Behavior()
	if _, err := b.Handle(context.Background(), &struct{ N int }{}, func(context.Context, any) (any, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	n, err := testutil.GatherAndCount(rec.Gatherer(), "switchboard_requests_total")
	if err != nil || n == 0 {
		t.Fatalf("requests_total series %d, %v", n, err)
	}
}

// New refuses an invalid Config with every problem, each naming its field.
func TestNewReportsEveryInvalidField(t *testing.T) {
	_, err := metrics.New(metrics.Config{Prefix: "9bad", BreakerKeyLabel: "host-name"})
	if err == nil || !strings.Contains(err.Error(), "Prefix") || !strings.Contains(err.Error(), `BreakerKeyLabel "host-name"`) {
		t.Fatalf("New: %v", err)
	}
}
