package tracing_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/ratelimit"
	"github.com/switchboard-go/switchboard/mediator"
	"github.com/switchboard-go/switchboard/tracing"
)

// A call that waited for its rate limit permit has the wait on its span; one whose permit was
// free has no event.
func TestRateLimitWaitEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, tp := recorder(t)
		m := build(t, func(context.Context, *Charge) (*Receipt, error) { return &Receipt{}, nil },
			tracing.New(tracing.Config{TracerProvider: tp}),
			ratelimit.New(ratelimit.Config{Rate: 4, MaxWait: time.Second, Key: func(any) string { return "payments" },
				OnPermit: []func(context.Context, ratelimit.PermitEvent){tracing.OnRateLimitPermit}}))
		for range 2 {
			if _, err := mediator.Send(context.Background(), m, &Charge{}); err != nil {
				t.Fatal(err)
			}
		}
		spans := rec.Ended()
		if len(spans) != 2 || len(spans[0].Events()) != 0 {
			t.Fatalf("%d spans; first's events %v", len(spans), eventNames(spans[0]))
		}
		if got := eventNames(spans[1]); !equal(got, []string{"switchboard.rate_limit.wait"}) {
			t.Fatalf("events %v", got)
		}
		if a := attrs(spans[1].Events()[0].Attributes); a["switchboard.rate_limit.key"].AsString() != "payments" ||
			a["switchboard.rate_limit.wait"].AsFloat64() != 0.25 {
			t.Fatalf("wait event %v", spans[1].Events()[0].Attributes)
		}
	})
}
