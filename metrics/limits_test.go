package metrics_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/metrics"
)

type limitStats struct {
	limits, inUse map[string]int
	err           error
}

func (s *limitStats) ConcurrencyLimitUse(context.Context) (map[string]int, map[string]int, error) {
	return s.limits, s.inUse, s.err
}

// Each limited key is a pair of gauges, read at scrape time; a failed read reports nothing, and
// a key no longer limited is no longer a series; a second collector is refused.
func TestCollectConcurrencyLimits(t *testing.T) {
	rec, err := metrics.New(metrics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	st := &limitStats{limits: map[string]int{"smtp.example.com": 4, "api.example.com": 10}, inUse: map[string]int{"smtp.example.com": 4}}
	if err := rec.CollectConcurrencyLimits(st); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP switchboard_durable_concurrency_in_use How many items of a limited breaker key run now, each holding one of its slots.
# TYPE switchboard_durable_concurrency_in_use gauge
switchboard_durable_concurrency_in_use{key="api.example.com"} 0
switchboard_durable_concurrency_in_use{key="smtp.example.com"} 4
# HELP switchboard_durable_concurrency_limit How many items of a breaker key may run at once across the fleet (durable.Queue.SetConcurrencyLimit).
# TYPE switchboard_durable_concurrency_limit gauge
switchboard_durable_concurrency_limit{key="api.example.com"} 10
switchboard_durable_concurrency_limit{key="smtp.example.com"} 4
`
	names := []string{"switchboard_durable_concurrency_limit", "switchboard_durable_concurrency_in_use"}
	if err := testutil.GatherAndCompare(rec.Gatherer(), strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	st.err = errors.New("database away")
	if n, err := testutil.GatherAndCount(rec.Gatherer(), names...); err != nil || n != 0 {
		t.Fatalf("a failed read reported %d series (%v)", n, err)
	}
	st.err, st.limits = nil, map[string]int{"api.example.com": 10}
	if n, err := testutil.GatherAndCount(rec.Gatherer(), names...); err != nil || n != 2 {
		t.Fatalf("after a limit's removal: %d series (%v), want the other key's 2", n, err)
	}
	if err := rec.CollectConcurrencyLimits(st); err == nil {
		t.Fatal("a second collector was registered")
	}
}

var _ metrics.ConcurrencyLimitStats = (*durable.Queue)(nil)

// A queue's limits, collected from the queue itself.
func TestCollectConcurrencyLimitsOfAQueue(t *testing.T) {
	ctx := context.Background()
	q, err := durable.Open(ctx, sqlite.Open(filepath.Join(t.TempDir(), "q.db")), durable.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.SetConcurrencyLimit(ctx, "smtp.example.com", 3, "ops"); err != nil {
		t.Fatal(err)
	}
	rec, err := metrics.New(metrics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.CollectConcurrencyLimits(q); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP switchboard_durable_concurrency_limit How many items of a breaker key may run at once across the fleet (durable.Queue.SetConcurrencyLimit).
# TYPE switchboard_durable_concurrency_limit gauge
switchboard_durable_concurrency_limit{key="smtp.example.com"} 3
`
	if err := testutil.GatherAndCompare(rec.Gatherer(), strings.NewReader(want), "switchboard_durable_concurrency_limit"); err != nil {
		t.Fatal(err)
	}
}

// The key label is Config.BreakerKeyLabel, as for the other per-key collectors; two sources
// reporting the same key (two queues on one database) make one series of it, not a duplicate
// that fails the scrape. (Regression: the label was "key" whatever the config said, and one
// source per collector.)
func TestCollectConcurrencyLimitsLabelAndMergedSources(t *testing.T) {
	rec, err := metrics.New(metrics.Config{BreakerKeyLabel: "breaker_key"})
	if err != nil {
		t.Fatal(err)
	}
	a := &limitStats{limits: map[string]int{"smtp.example.com": 4}, inUse: map[string]int{"smtp.example.com": 3}}
	b := &limitStats{limits: map[string]int{"smtp.example.com": 4, "api.example.com": 2}, inUse: map[string]int{"smtp.example.com": 4}}
	if err := rec.CollectConcurrencyLimits(a, b); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP switchboard_durable_concurrency_in_use How many items of a limited breaker key run now, each holding one of its slots.
# TYPE switchboard_durable_concurrency_in_use gauge
switchboard_durable_concurrency_in_use{breaker_key="api.example.com"} 0
switchboard_durable_concurrency_in_use{breaker_key="smtp.example.com"} 4
# HELP switchboard_durable_concurrency_limit How many items of a breaker key may run at once across the fleet (durable.Queue.SetConcurrencyLimit).
# TYPE switchboard_durable_concurrency_limit gauge
switchboard_durable_concurrency_limit{breaker_key="api.example.com"} 2
switchboard_durable_concurrency_limit{breaker_key="smtp.example.com"} 4
`
	if err := testutil.GatherAndCompare(rec.Gatherer(), strings.NewReader(want), "switchboard_durable_concurrency_limit", "switchboard_durable_concurrency_in_use"); err != nil {
		t.Fatal(err)
	}
}
