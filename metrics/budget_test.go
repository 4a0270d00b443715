package metrics_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-go/switchboard/behaviors/budget"
	"github.com/switchboard-go/switchboard/metrics"
)

// dependencyCall is a call of a named dependency.
type dependencyCall struct{ Dependency string }

// TestBudgetSpends: the retries a budget allows, refuses and takes back are counted per key, and the keys
// beyond the bound share the overflow series.
func TestBudgetSpends(t *testing.T) {
	rec, err := metrics.New(metrics.Config{AppID: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	b := budget.New(budget.Config{Floor: 0.1, Key: func(req any) string { return req.(*dependencyCall).Dependency },
		OnSpend: []func(context.Context, budget.Spend){rec.OnBudgetSpend}})
	ctx := context.Background()
	for range 3 {
		_ = b.Retry(ctx, &dependencyCall{Dependency: "quotes"}) // one allowed by the floor, then refused
	}
	b.Refund(ctx, &dependencyCall{Dependency: "quotes"}) // the allowed one reached no dependency
	for i := range 1100 {
		_ = b.Retry(ctx, &dependencyCall{Dependency: "k" + itoa(i)})
	}
	n, err := testutil.GatherAndCount(rec.Gatherer(), rec.Prefix()+"_retry_budget_retries_total")
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 || n > 3*1001 {
		t.Fatalf("%d series: the keys are not bounded", n)
	}
	mfs, err := rec.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != rec.Prefix()+"_retry_budget_retries_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			got[l["key"]+"/"+l["outcome"]] = m.GetCounter().GetValue()
		}
	}
	if got["quotes/allowed"] != 1 || got["quotes/refused"] != 2 || got["quotes/refunded"] != 1 || got[metrics.OverflowKey+"/allowed"] == 0 {
		t.Fatalf("series %v", map[string]float64{"quotes/allowed": got["quotes/allowed"], "quotes/refused": got["quotes/refused"], "quotes/refunded": got["quotes/refunded"], "overflow": got[metrics.OverflowKey+"/allowed"]})
	}
}
