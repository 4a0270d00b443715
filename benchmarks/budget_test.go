package benchmarks

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	fsbudget "github.com/failsafe-go/failsafe-go/budget"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/samber/do/v2"

	"github.com/switchboard-go/switchboard/behaviors/budget"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/mediator"
)

// Retry with a retry budget on the success path: switchboard's retry behavior with a
// budget.Budget against failsafe-go's retry policy with its budget, each beside the same
// retry without a budget, so the budget's own cost shows too.
func BenchmarkRetryBudget(b *testing.B) {
	ctx := context.Background()
	q := &req{}
	send := func(b *testing.B, bud *budget.Budget) {
		m := mediator.New(nil, mediator.Config{})
		h := &handler{}
		mediator.Handle[*req, *resp](m, func(do.Injector) (*handler, error) { return h, nil })
		m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3, BaseDelay: time.Millisecond}, Budget: bud}))
		if err := m.Build(); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			sink, errSink = mediator.Send(ctx, m, q)
		}
	}
	get := func(b *testing.B, bud fsbudget.Budget) {
		h := &handler{}
		rb := retrypolicy.NewBuilder[*resp]().WithMaxAttempts(3).WithDelay(time.Millisecond)
		if bud != nil {
			rb = rb.WithBudget(bud)
		}
		ex := failsafe.With[*resp](rb.Build())
		b.ReportAllocs()
		for b.Loop() {
			sink, errSink = ex.Get(func() (*resp, error) { return h.Handle(ctx, q) })
		}
	}
	b.Run("switchboard", func(b *testing.B) { send(b, budget.New(budget.Config{})) })
	b.Run("switchboard-without", func(b *testing.B) { send(b, nil) })
	b.Run("failsafe-go", func(b *testing.B) { get(b, fsbudget.New()) })
	b.Run("failsafe-go-without", func(b *testing.B) { get(b, nil) })
}

// Correctness, not speed: during an outage, callers one after another (no retries in flight
// together). switchboard's budget holds the dependency to 1.2× the calls plus the floor;
// failsafe-go's budget bounds the retries in flight at once (a rate of in-flight executions,
// at least 3 whatever the rate), so callers that do not overlap retry every time.
func TestBudgetOutageBesideFailsafe(t *testing.T) {
	const n, attempts = 200, 3
	errDown := errors.New("503 service unavailable")
	received := 0
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *req) (*resp, error) { received++; return nil, errDown })
	bud := budget.New(budget.Config{Ratio: 0.2, Floor: 1, Window: 10 * time.Second})
	m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: attempts, BaseDelay: time.Microsecond,
		Classifier: func(error) bool { return true }}, Budget: bud}))
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for range n {
		_, _ = mediator.Send(context.Background(), m, &req{})
	}
	// All within one window: the floor allows 1/s × 10 s over it.
	if took := time.Since(start); took < 10*time.Second && float64(received) > n*1.2+10 {
		t.Fatalf("switchboard: the dependency received %d calls for %d sent", received, n)
	}
	sb := received

	received = 0
	ex := failsafe.With[*resp](retrypolicy.NewBuilder[*resp]().WithMaxAttempts(attempts).WithDelay(time.Microsecond).
		WithBudget(fsbudget.New()).Build())
	for range n {
		_, _ = ex.Get(func() (*resp, error) { received++; return nil, errDown })
	}
	t.Logf("outage, %d calls one after another, %d attempts allowed: switchboard's budget let %d calls reach the dependency (%.2f×), failsafe-go's %d (%.2f×)",
		n, attempts, sb, float64(sb)/n, received, float64(received)/n)
}
