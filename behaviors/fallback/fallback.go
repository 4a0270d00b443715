package fallback

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/mediator"
)

// Config configures a fallback.
type Config struct {
	// Classifier decides which final errors the fallback is for. nil: every error, since a
	// fallback exists to answer when the dependency cannot, an open circuit included. An error
	// it refuses passes on unchanged and is not reported to OnFallback: it is none of the
	// fallback's business. Whatever it says, the caller's cancellation and deferred work are
	// passed on unchanged.
	Classifier behaviors.Classifier
	// When decides, per request, whether the fallback answers a failure the Classifier let
	// through, before its function runs: it sees the request as well as the error, as Polly's
	// ShouldHandle and failsafe-go's HandleIf see the outcome. false declines: the original
	// error passes on unchanged and OnFallback hears Declined. nil: every such failure is
	// answered. A function that finds it has no answer only once it runs (a cache miss)
	// declines by returning ErrDecline instead.
	When func(ctx context.Context, req any, err error) bool
	// OnFallback are the observers called once for every failure the fallback handled (one the
	// Classifier let through), after its function ran (or When declined it), with what it did:
	// Answered, Declined, Failed or Cancelled (see Verdict). A trace or a counter records it
	// there, where the caller sees only a response. They run in the order listed, on the
	// caller's goroutine, as every hook of the module does (see Hooks in package behaviors),
	// before the mediator's observers (Observer). They are this fallback's own: observers of
	// every behavior attach once, with mediator.Mediator.Observe. Empty: nothing is called.
	OnFallback []func(ctx context.Context, f Fallback)
}

// ErrDecline is returned by a fallback function (or wrapped in its error) that has no answer
// for this request after all, such as a cache that holds nothing for it: the fallback then
// returns the original error unchanged, as if When had said false, and OnFallback hears
// Declined.
var ErrDecline = errors.New("fallback: declined")

// Verdict says what a fallback did with a failure it handled.
type Verdict uint8

// The verdicts of a fallback. The zero Verdict is none of them: a record that does not know.
const (
	// Answered: the function returned a response without error; the caller got it, as a
	// success.
	Answered Verdict = iota + 1
	// Declined: When said false, or the function returned ErrDecline; the caller got the
	// original error unchanged.
	Declined
	// Failed: the function returned another error; the caller got that error.
	Failed
	// Cancelled: the function returned an error after the caller's context was done; the
	// caller gave up, which says nothing about the fallback, and got that error.
	Cancelled
)

var verdicts = [...]string{"unknown", "answered", "declined", "failed", "cancelled"}

// String returns the verdict in lower case ("answered", "declined", "failed", "cancelled"), as
// the outcome label of the metrics' fallbacks_total says it; "unknown" for the zero Verdict.
func (v Verdict) String() string {
	if int(v) < len(verdicts) {
		return verdicts[v]
	}
	return "Verdict(" + strconv.Itoa(int(v)) + ")"
}

// Fallback describes one failure a fallback handled and what it did; OnFallback receives it.
type Fallback struct {
	// Request is the request whose call failed.
	Request any
	// Err is the failure the fallback handled: the error of the rest of the pipeline.
	Err error
	// Verdict is what the fallback did.
	Verdict Verdict
	// FallbackErr is the error the function returned when Verdict is Failed or Cancelled (the
	// error the caller got); nil otherwise.
	FallbackErr error
}

// Behavior is the fallback behavior: it turns the final failure of a call into a degraded
// response (cached data, an empty list, a placeholder). It catches every error (or those
// Config.Classifier accepts), a *breaker.OpenError included, and answers it unless it declines
// (Config.When, ErrDecline), except the caller's own cancellation, which passes on unchanged:
// any error of a call whose context is done, since clients report cancellation in their own ways (a gRPC
// Canceled status does not wrap context.Canceled). It steps aside for a dispatch marked
// mediator.Unattended: nobody waits for a degraded answer there, and the caller (a scheduler
// running stored work) must record what the handler did. Errors that mean the work was deferred
// (behaviors.Deferring) pass on too. It is in mediator.StageDefault at behaviors.FallbackOrder,
// outside retry and the circuit breaker, so it sees only what survives them.
type Behavior struct {
	result  reflect.Type // the fallback function's result type
	request reflect.Type // non-nil for a typed fallback: the one request type it serves
	fn      func(ctx context.Context, req any, err error) (any, error)
	catch   behaviors.Classifier
	when    func(ctx context.Context, req any, err error) bool
	on      []func(ctx context.Context, f Fallback)
}

// New returns a fallback for any request type whose response type R can be assigned to: fn
// receives the request and the final error. Build fails for a request type the
// fallback applies to whose response type does not accept R; limit it with
// mediator.ForRequest, ForInterface or ForTypes.
func New[R any](fn func(ctx context.Context, req any, err error) (R, error), cfg Config) *Behavior {
	return &Behavior{
		catch:  cfg.Classifier,
		when:   cfg.When,
		on:     slices.Clone(cfg.OnFallback),
		result: reflect.TypeFor[R](),
		fn: func(ctx context.Context, req any, err error) (any, error) {
			return fn(ctx, req, err)
		},
	}
}

// NewFor returns a fallback for request type Q alone (R is inferred from fn). Q may
// also be an interface that request types implement (embedding mediator.Request[R]); the
// fallback then applies to each of them.
func NewFor[Q mediator.Request[R], R any](fn func(ctx context.Context, req Q, err error) (R, error), cfg Config) *Behavior {
	return &Behavior{
		catch:   cfg.Classifier,
		when:    cfg.When,
		on:      slices.Clone(cfg.OnFallback),
		result:  reflect.TypeFor[R](),
		request: reflect.TypeFor[Q](),
		fn: func(ctx context.Context, req any, err error) (any, error) {
			return fn(ctx, req.(Q), err)
		},
	}
}

// Placement implements mediator.PlacedBehavior: Explain shows it as "fallback", in
// mediator.StageDefault, at behaviors.FallbackOrder (see the table of orders in package behaviors).
func (f *Behavior) Placement() mediator.Placement {
	return mediator.Placement{Name: "fallback", Stage: mediator.StageDefault, Order: behaviors.FallbackOrder}
}

// AppliesTo limits a typed fallback to its request type, or to the request types that
// implement it when it is an interface.
func (f *Behavior) AppliesTo(info mediator.RequestInfo) bool {
	switch {
	case info.Stream:
		return false
	case f.request == nil:
		return true
	case f.request.Kind() == reflect.Interface:
		return info.Request.Implements(f.request)
	}
	return info.Request == f.request
}

// Bind checks at Build that the fallback's result fits the request's response type, and
// attaches the Observers among the mediator's observers (RequestInfo.Observers).
func (f *Behavior) Bind(info mediator.RequestInfo) (mediator.Behavior, error) {
	if !f.result.AssignableTo(info.Response) {
		return nil, fmt.Errorf("fallback returns %s, but %s responds with %s", f.result, info.Request, info.Response)
	}
	obs := mediator.ObserversOf[Observer](info.Observers)
	if len(obs) == 0 {
		return f, nil
	}
	nf := *f
	nf.on = slices.Clip(nf.on)
	for _, o := range obs {
		nf.on = append(nf.on, o.OnFallback)
	}
	return &nf, nil
}

// Handle calls next and falls back on its error.
func (f *Behavior) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	resp, err := next(ctx, req)
	if err == nil || ctx.Err() != nil || (f.catch != nil && !f.catch(err)) || isDeferred(err) ||
		mediator.MarksOf(ctx, req).Has(mediator.Unattended) {
		return resp, err
	}
	if f.when != nil && !f.when(ctx, req, err) {
		f.report(ctx, Fallback{Request: req, Err: err, Verdict: Declined})
		return resp, err
	}
	fresp, ferr := f.fn(ctx, req, err)
	switch {
	case ferr == nil:
		f.report(ctx, Fallback{Request: req, Err: err, Verdict: Answered})
		return fresp, nil
	case errors.Is(ferr, ErrDecline):
		f.report(ctx, Fallback{Request: req, Err: err, Verdict: Declined})
		return resp, err
	case ctx.Err() != nil:
		f.report(ctx, Fallback{Request: req, Err: err, Verdict: Cancelled, FallbackErr: ferr})
	default:
		f.report(ctx, Fallback{Request: req, Err: err, Verdict: Failed, FallbackErr: ferr})
	}
	return fresp, ferr
}

func (f *Behavior) report(ctx context.Context, fb Fallback) {
	for _, on := range f.on {
		on(ctx, fb)
	}
}

func isDeferred(err error) bool {
	var d behaviors.Deferring
	return errors.As(err, &d) && d.Deferred()
}
