package metrics

import (
	"context"
	"errors"
	"reflect"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/mediator"
)

// Behavior is the metrics behavior: it counts each request in requests_total by its outcome
// and observes its duration in request_duration_seconds. It is the outermost behavior (in
// mediator.StagePre, just outside recovery at behaviors.RecoverOrder - 1), so it sees what the
// caller sees, recovered panics, retries and fallbacks included, and times all of it. Build
// resolves the series of each request type once (Bind), so a dispatch allocates nothing.
// Stream requests are not counted.
type Behavior struct {
	rec *Recorder
	s   *series // set by Bind
}

// Behavior returns the Recorder's mediator behavior: m.Use(rec.Behavior()).
func (r *Recorder) Behavior() *Behavior { return &Behavior{rec: r} }

// Placement implements mediator.PlacedBehavior: Explain shows it as "metrics", in
// mediator.StagePre at behaviors.RecoverOrder - 1.
func (b *Behavior) Placement() mediator.Placement {
	return mediator.Placement{Name: "metrics", Stage: mediator.StagePre, Order: behaviors.RecoverOrder - 1}
}

// Bind resolves the series of the request type once, at Build.
func (b *Behavior) Bind(info mediator.RequestInfo) (mediator.Behavior, error) {
	if b.rec == nil {
		return nil, errors.New("metrics: Behavior has no Recorder: make it with Recorder.Behavior")
	}
	return &Behavior{rec: b.rec, s: b.rec.seriesOf(info.Request)}, nil
}

// Handle counts and times the call.
func (b *Behavior) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	start := time.Now()
	resp, err := next(ctx, req)
	s := b.s
	if s == nil { // not bound: used outside a mediator's Build
		s = b.rec.seriesOf(reflect.TypeOf(req))
	}
	s.duration.Observe(time.Since(start).Seconds())
	s.outcomes[outcome(ctx, req, err)].Inc()
	return resp, err
}

// outcome returns the index in outcomes of the outcome of a call that ended in err.
func outcome(ctx context.Context, req any, err error) int {
	switch behaviors.OutcomeOf(ctx, req, err) {
	case behaviors.OutcomeSucceeded:
		return 0
	case behaviors.OutcomeFailed:
		return 1
	case behaviors.OutcomeCancelled:
		return 2
	case behaviors.OutcomeRefused:
		return 3
	case behaviors.OutcomeDeferred:
		return 4
	}
	return 5 // behaviors.OutcomeClientError
}
