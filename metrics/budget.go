package metrics

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-go/switchboard/behaviors/budget"
)

// maxBudgetKeys bounds the retry-budget keys that have series of their own: the keys beyond
// it are counted under OverflowKey.
const maxBudgetKeys = 1000

// budgetSeries are the series of retry_budget_retries_total, per budget key.
type budgetSeries struct {
	vec  *prometheus.CounterVec
	mu   sync.RWMutex
	keys map[string]*[3]prometheus.Counter // allowed, refused, refunded
}

// newBudgetSeries makes the retry budget's counter vector of r.
func newBudgetSeries(r *Recorder) *budgetSeries {
	return &budgetSeries{
		vec: prometheus.NewCounterVec(prometheus.CounterOpts{Name: r.name("retry_budget_retries_total"),
			Help: "Retries asked of a retry budget, by budget key and outcome (allowed, refused; refunded: allowed, then given back as they reached no dependency; key " + OverflowKey +
				": keys beyond the bound of 1000)."}, []string{"key", "outcome"}),
		keys: map[string]*[3]prometheus.Counter{},
	}
}

// OnBudgetSpend counts a retry asked of a retry budget in retry_budget_retries_total, under
// the budget's key and the outcome allowed or refused, or refunded for a retry given back
// (budget.Budget.Refund: allowed, then it reached no dependency, so allowed minus refunded is
// the retries made); it is an observer for
// budget.Config.OnSpend:
//
//	budget.New(budget.Config{OnSpend: []func(context.Context, budget.Spend){rec.OnBudgetSpend}})
//
// The keys are bounded: the first 1000 keys have series of their own, the others are counted
// under OverflowKey, so a key function over request data cannot grow the series without end.
func (r *Recorder) OnBudgetSpend(_ context.Context, s budget.Spend) {
	i := 0
	switch {
	case s.Refused:
		i = 1
	case s.Refund:
		i = 2
	}
	r.budgets.of(s.Key)[i].Inc()
}

// of returns the counters of key, resolved once; OverflowKey's when the bound is reached.
func (b *budgetSeries) of(key string) *[3]prometheus.Counter {
	b.mu.RLock()
	c := b.keys[key]
	b.mu.RUnlock()
	if c != nil {
		return c
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if c = b.keys[key]; c != nil {
		return c
	}
	if len(b.keys) >= maxBudgetKeys {
		key = OverflowKey
		if c = b.keys[key]; c != nil {
			return c
		}
	}
	c = &[3]prometheus.Counter{b.vec.WithLabelValues(key, "allowed"), b.vec.WithLabelValues(key, "refused"),
		b.vec.WithLabelValues(key, "refunded")}
	b.keys[key] = c
	return c
}
