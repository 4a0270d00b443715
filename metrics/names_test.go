package metrics_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/metrics"
)

// fixedCounts is a QueueStats that reads the same counts every time.
type fixedCounts struct{}

func (fixedCounts) Counts(context.Context) (items, deadLetters map[string]int64, err error) {
	return map[string]int64{"pending": 1}, map[string]int64{"failed": 1}, nil
}

// families returns the name of every metric family rec serves, with the labels of its first
// metric.
func families(t *testing.T, rec *metrics.Recorder) map[string]map[string]string {
	t.Helper()
	mfs, err := rec.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]string{}
	for _, mf := range mfs {
		labels := map[string]string{}
		if ms := mf.GetMetric(); len(ms) > 0 {
			for _, l := range ms[0].GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
		}
		got[mf.GetName()] = labels
	}
	return got
}

// recorded makes a Recorder of cfg with every part wired and fed once: a request, a breaker
// (collected, and refused once), a queue.
func recorded(t *testing.T, cfg metrics.Config) *metrics.Recorder {
	t.Helper()
	rec, err := metrics.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	reg := breaker.NewRegistry(breaker.Config{})
	if err := rec.CollectBreakers(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gate("api"); err != nil { // the registry holds the key from now on
		t.Fatal(err)
	}
	rec.OnRefusal("api")
	if err := rec.CollectQueue(fixedCounts{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Behavior().Handle(context.Background(), &Ping{}, func(context.Context, any) (any, error) { return "", nil }); err != nil {
		t.Fatal(err)
	}
	return rec
}

// Every metric is named <namespace>_<subsystem>_..., the namespace switchboard by default, and
// the breaker's families share the one stem switchboard_breaker_: the state gauge sat beside
// the refusals under another stem (circuit_breaker_state, breaker_rejections_total).
func TestDefaultNamesShareOneNamespaceAndStem(t *testing.T) {
	got := families(t, recorded(t, metrics.Config{}))
	for _, want := range []string{"switchboard_requests_total", "switchboard_breaker_state",
		"switchboard_breaker_half_open", "switchboard_breaker_refused_total", "switchboard_durable_items",
		"switchboard_durable_dead_letters", "switchboard_durable_stats_age_seconds"} {
		if _, ok := got[want]; !ok {
			t.Errorf("no %s among %v", want, sortedKeys(got))
		}
	}
	for name := range got {
		if !strings.HasPrefix(name, metrics.DefaultPrefix+"_") {
			t.Errorf("%s is not under the default namespace %s_", name, metrics.DefaultPrefix)
		}
		if strings.Contains(name, "breaker") && !strings.HasPrefix(name, "switchboard_breaker_") {
			t.Errorf("breaker family %s is not under switchboard_breaker_", name)
		}
	}
}

// AppID names the application in the constant label app of every series and leaves the names
// alone, so that grepping /metrics for switchboard_ finds them; Prefix alone renames them.
func TestAppIDIsALabelPrefixRenames(t *testing.T) {
	got := families(t, recorded(t, metrics.Config{AppID: "relay"}))
	if len(got) == 0 {
		t.Fatal("no metrics")
	}
	for name, labels := range got {
		if !strings.HasPrefix(name, "switchboard_") || labels["app"] != "relay" {
			t.Errorf("%s %v: want a switchboard_ name with app=relay", name, labels)
		}
	}
	for name, labels := range families(t, recorded(t, metrics.Config{Prefix: "relay"})) {
		if !strings.HasPrefix(name, "relay_") || labels["app"] != "" {
			t.Errorf("%s %v: want a relay_ name without an app label", name, labels)
		}
	}
}

// Two Recorders on one registry are told apart by their app label: their series share the
// names, and a second Recorder of the same AppID is refused as a duplicate.
func TestTwoAppsOnOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	for _, app := range []string{"relay", "shop"} {
		rec, err := metrics.New(metrics.Config{Registerer: reg, AppID: app})
		if err != nil {
			t.Fatalf("%s: %v", app, err)
		}
		rec.OnRefusal("api")
	}
	if _, err := metrics.New(metrics.Config{Registerer: reg, AppID: "shop"}); err == nil {
		t.Fatal("a second Recorder of app shop was registered")
	}
	n, err := testutil.GatherAndCount(reg, "switchboard_breaker_refused_total")
	if err != nil || n != 2 {
		t.Fatalf("%d series of switchboard_breaker_refused_total, %v; want one per app", n, err)
	}
}
