package metrics

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-go/switchboard/durable"
)

// A *durable.Queue is a QueueStats: metrics reads it through that method set alone, without
// importing durable.
var _ QueueStats = (*durable.Queue)(nil)

// A scrape waits for Queue.Stats at most StatsTimeout and reads it at most every StatsMaxAge:
// a database that hangs costs the scrape the timeout, and values read are served from the
// cache until they are StatsMaxAge old.
func TestQueueStatsTimeoutAndCache(t *testing.T) {
	synctest.Test(t, testQueueStatsTimeoutAndCache)
}

func testQueueStatsTimeoutAndCache(t *testing.T) {
	rec, err := New(Config{StatsTimeout: 50 * time.Millisecond, StatsMaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	c, err := rec.collectCounts(func(ctx context.Context) (map[string]int64, map[string]int64, error) {
		if calls.Add(1) == 1 { // the first read hangs until its context ends
			<-ctx.Done()
			return nil, nil, ctx.Err()
		}
		return map[string]int64{"pending": 3}, map[string]int64{"failed": 2}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	count := func() int {
		t.Helper()
		begin := time.Now()
		n, err := testutil.GatherAndCount(rec.Gatherer(), "switchboard_durable_items", "switchboard_durable_dead_letters")
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(begin); took > 50*time.Millisecond {
			t.Fatalf("scrape took %v", took)
		}
		return n
	}
	if n := count(); n != 0 {
		t.Fatalf("%d queue series before any read succeeded", n)
	}
	// The hung read ends at its timeout too; a scrape before that would share it.
	synctest.Wait()
	c.mu.Lock()
	idle := c.reading == nil
	c.mu.Unlock()
	if !idle {
		t.Fatal("the hung read is still in flight after its timeout")
	}
	if n := count(); n != 2 || calls.Load() != 2 {
		t.Fatalf("%d queue series after a read, %d reads", n, calls.Load())
	}
	if n := count(); n != 2 || calls.Load() != 2 {
		t.Fatalf("%d queue series from the cache, %d reads", n, calls.Load())
	}
}

func TestPrefix(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "switchboard"},
		{Config{AppID: "Billing-API v2"}, "switchboard"}, // a label, not a name
		{Config{AppID: "shop", Prefix: "acme"}, "acme"},
	} {
		if got := c.cfg.prefix(); got != c.want {
			t.Errorf("%+v: prefix %q, want %q", c.cfg, got, c.want)
		}
	}
	if err := (Config{Prefix: "bad-name", DurationBuckets: []float64{1, 1}, NativeHistogramBucketFactor: 1, StatsTimeout: -1}).Validate(); err == nil ||
		err.Error() != `Prefix "bad-name" is not a valid Prometheus metric name
DurationBuckets [1 1] are not strictly increasing
NativeHistogramBucketFactor 1 is not above 1
StatsTimeout -1ns is negative` {
		t.Fatal(err)
	}
	if _, err := New(Config{}); err != nil {
		t.Fatal(err)
	}
}
