package hedge_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/hedge"
	"github.com/switchboard-go/switchboard/mediator"
)

// hedgeAllocs bounds the allocations of a call that ends before its delay: the primary's
// cancellable context (the call's state and its timer are reused).
const hedgeAllocs = 2

// A call that ends before its delay starts no goroutine and allocates at most hedgeAllocs
// objects.
func TestSuccessPathCost(t *testing.T) {
	m := mediator.New(nil, mediator.Config{})
	r := &Reply{}
	mediator.HandleFunc(m, func(context.Context, *Call) (*Reply, error) { return r, nil })
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	hm := build(t, func(context.Context, *Call) (*Reply, error) { return r, nil }, hedge.New(hedge.Config{Delay: time.Second}))
	ctx, q := context.Background(), &Call{}
	base := testing.AllocsPerRun(200, func() { _, _ = mediator.Send(ctx, m, q) })
	with := testing.AllocsPerRun(200, func() { _, _ = mediator.Send(ctx, hm, q) })
	if with-base > hedgeAllocs {
		t.Errorf("the hedge behavior allocates %v per successful call, want at most %d", with-base, hedgeAllocs)
	}
	before := runtime.NumGoroutine()
	for range 100 {
		_, _ = mediator.Send(ctx, hm, q)
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("%d goroutines after 100 fast calls, %d before", after, before)
	}
	t.Logf("%v allocations per call (%v without the behavior)", with-base, base)
}
