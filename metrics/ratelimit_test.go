package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/ratelimit"
	"github.com/switchboard-go/switchboard/metrics"
)

// The rate limiter's observers: a wait histogram and a refusal counter per key, the keys
// beyond the bound folded into the overflow key.
func TestRateLimitSeries(t *testing.T) {
	rec, err := metrics.New(metrics.Config{Prefix: "shop", MaxBreakerKeys: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c", "d"} {
		rec.OnRateLimitPermit(ctx, ratelimit.PermitEvent{Key: k, Wait: 20 * time.Millisecond})
		rec.OnRateLimitRefused(ctx, ratelimit.RefusedEvent{Key: k})
	}
	rec.OnRateLimitPermit(ctx, ratelimit.PermitEvent{Key: "a"})
	scrape(t, rec, `
# HELP shop_rate_limit_refused_total Calls refused by a rate limit, by limit key (_overflow: keys beyond the Recorder's bound).
# TYPE shop_rate_limit_refused_total counter
shop_rate_limit_refused_total{key="_overflow"} 2
shop_rate_limit_refused_total{key="a"} 1
shop_rate_limit_refused_total{key="b"} 1
`, "shop_rate_limit_refused_total")
	scrape(t, rec, `
# HELP shop_rate_limit_wait_seconds Time calls waited for their rate limit permit (0: free at once), by limit key (_overflow: keys beyond the Recorder's bound).
# TYPE shop_rate_limit_wait_seconds histogram
shop_rate_limit_wait_seconds_bucket{key="_overflow",le="0"} 0
shop_rate_limit_wait_seconds_bucket{key="_overflow",le="0.001"} 0
shop_rate_limit_wait_seconds_bucket{key="_overflow",le="0.005"} 0
shop_rate_limit_wait_seconds_bucket{key="_overflow",le="0.01"} 0
shop_rate_limit_wait_seconds_bucket{key="_overflow",le="0.025"} 2
shop_rate_limit_wait_seconds_bucket{key="_overflow",le="0.05"} 2
shop_rate_limit_wait_seconds_bucket{key="_overflow",le="0.1"} 2
shop_rate_limit_wait_seconds_bucket{key="_overflow",le="0.25"} 2
shop_rate_limit_wait_seconds_bucket{key="_overflow",le="0.5"} 2
shop_rate_limit_wait_seconds_bucket{key="_overflow",le="1"} 2
shop_rate_limit_wait_seconds_bucket{key="_overflow",le="2.5"} 2
shop_rate_limit_wait_seconds_bucket{key="_overflow",le="5"} 2
shop_rate_limit_wait_seconds_bucket{key="_overflow",le="+Inf"} 2
shop_rate_limit_wait_seconds_sum{key="_overflow"} 0.04
shop_rate_limit_wait_seconds_count{key="_overflow"} 2
shop_rate_limit_wait_seconds_bucket{key="a",le="0"} 1
shop_rate_limit_wait_seconds_bucket{key="a",le="0.001"} 1
shop_rate_limit_wait_seconds_bucket{key="a",le="0.005"} 1
shop_rate_limit_wait_seconds_bucket{key="a",le="0.01"} 1
shop_rate_limit_wait_seconds_bucket{key="a",le="0.025"} 2
shop_rate_limit_wait_seconds_bucket{key="a",le="0.05"} 2
shop_rate_limit_wait_seconds_bucket{key="a",le="0.1"} 2
shop_rate_limit_wait_seconds_bucket{key="a",le="0.25"} 2
shop_rate_limit_wait_seconds_bucket{key="a",le="0.5"} 2
shop_rate_limit_wait_seconds_bucket{key="a",le="1"} 2
shop_rate_limit_wait_seconds_bucket{key="a",le="2.5"} 2
shop_rate_limit_wait_seconds_bucket{key="a",le="5"} 2
shop_rate_limit_wait_seconds_bucket{key="a",le="+Inf"} 2
shop_rate_limit_wait_seconds_sum{key="a"} 0.02
shop_rate_limit_wait_seconds_count{key="a"} 2
shop_rate_limit_wait_seconds_bucket{key="b",le="0"} 0
shop_rate_limit_wait_seconds_bucket{key="b",le="0.001"} 0
shop_rate_limit_wait_seconds_bucket{key="b",le="0.005"} 0
shop_rate_limit_wait_seconds_bucket{key="b",le="0.01"} 0
shop_rate_limit_wait_seconds_bucket{key="b",le="0.025"} 1
shop_rate_limit_wait_seconds_bucket{key="b",le="0.05"} 1
shop_rate_limit_wait_seconds_bucket{key="b",le="0.1"} 1
shop_rate_limit_wait_seconds_bucket{key="b",le="0.25"} 1
shop_rate_limit_wait_seconds_bucket{key="b",le="0.5"} 1
shop_rate_limit_wait_seconds_bucket{key="b",le="1"} 1
shop_rate_limit_wait_seconds_bucket{key="b",le="2.5"} 1
shop_rate_limit_wait_seconds_bucket{key="b",le="5"} 1
shop_rate_limit_wait_seconds_bucket{key="b",le="+Inf"} 1
shop_rate_limit_wait_seconds_sum{key="b"} 0.02
shop_rate_limit_wait_seconds_count{key="b"} 1
`, "shop_rate_limit_wait_seconds")
}
