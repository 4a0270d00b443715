package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-go/switchboard/metrics"
)

// OnSettled counts each outcome of a durable claim under its request name and outcome.
func TestOnSettledCountsOutcomes(t *testing.T) {
	rec, err := metrics.New(metrics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []string{"refused", "refused", "expired", "succeeded"} {
		rec.OnSettled("webhook.deliver", o)
	}
	rec.OnSettled("billing.charge", "dead")
	want := `
# HELP switchboard_durable_outcomes_total How the durable scheduler's claims of items ended, by request name and outcome (succeeded, retried, dead, refused, paused, limited, expired, interrupted, released).
# TYPE switchboard_durable_outcomes_total counter
switchboard_durable_outcomes_total{name="billing.charge",outcome="dead"} 1
switchboard_durable_outcomes_total{name="webhook.deliver",outcome="expired"} 1
switchboard_durable_outcomes_total{name="webhook.deliver",outcome="refused"} 2
switchboard_durable_outcomes_total{name="webhook.deliver",outcome="succeeded"} 1
`
	if err := testutil.GatherAndCompare(rec.Gatherer(), strings.NewReader(want), "switchboard_durable_outcomes_total"); err != nil {
		t.Fatal(err)
	}
}
