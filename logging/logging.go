package logging

import (
	"context"
	"errors"
	"reflect"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/mediator"
)

// Order is the logging behavior's default order within mediator.StageDefault: between the
// fallback (behaviors.FallbackOrder) and the durable deferral (behaviors.DeferralOrder), so it
// sees each call's final outcome once: a failure before a fallback answers for it, and a
// deferred call as deferred rather than as the failure the deferral took for later.
const Order = behaviors.FallbackOrder + 5

// Config configures the logging behavior. The zero value of each field means its documented
// default, so Config{} is complete.
type Config struct {
	// Logger receives one entry per call. Default zap.L() as it is when New is called: a no-op
	// until the application installs its logger with zap.ReplaceGlobals, so the behavior
	// follows the application's choice and never prints on its own.
	Logger *zap.Logger
	// Success is the level of a successful call's entry. Default debug: a service handles many
	// requests that succeed, and their lines are for debugging, not for operators. A
	// zap.AtomicLevel may be changed while the mediator runs.
	Success zap.AtomicLevel
	// Failure is the level of a failed call's entry. Default error: outside retry (its default
	// place) a failure is the caller's final answer. Inside retry, where a failed attempt may
	// still be followed by a successful one, warn is the usual choice.
	Failure zap.AtomicLevel
	// Cancelled is the level of a call whose caller cancelled it or whose deadline passed.
	// Default debug: the caller gave up, nothing failed, and an error line would page someone
	// for a user who closed a tab.
	Cancelled zap.AtomicLevel
	// Deferred is the level of a call the durable deferral stored for later. Default info: the
	// work was accepted, not failed, and nobody need act; the dead letter it may become later
	// is logged when it does.
	Deferred zap.AtomicLevel
	// Breakers is the circuit breaker registry of the pipelines, when one is used: every entry
	// then names its breaker's key (Registry.KeyOf, the key the breaker behavior gates on), not
	// only the entries of calls an open breaker refused or whose failure tripped it, which name
	// it from their error. Default nil: a key function is the application's code and is run
	// only when asked.
	Breakers *breaker.Registry
}

// Behavior is the logging behavior: it writes one entry per call it wraps (see the package doc
// for the fields, levels and placement).
type Behavior struct {
	log                        *zap.Logger
	success, failure, canceled zap.AtomicLevel
	deferred                   zap.AtomicLevel
	breakers                   *breaker.Registry
	// request is the request type's name, set by Bind; empty in a behavior used without
	// Build's binding, for which retried and gated then say nothing and every source of an
	// attempt number or breaker key is used.
	request string
	// retried and gated say whether the request type's pipeline has a retry behavior and a
	// circuit breaker behavior: the attempt number of a *retry.ExhaustedError and the breaker
	// key are the request's own only then (an error of a request its handler sent may carry
	// them too).
	retried, gated bool
}

// New returns a logging behavior configured by cfg. Register it with mediator.Use; its
// Placement puts it at Order in mediator.StageDefault.
func New(cfg Config) *Behavior {
	b := &Behavior{log: cfg.Logger, success: cfg.Success, failure: cfg.Failure, canceled: cfg.Cancelled,
		deferred: cfg.Deferred, breakers: cfg.Breakers}
	if b.log == nil {
		b.log = zap.L()
	}
	if b.success == (zap.AtomicLevel{}) {
		b.success = zap.NewAtomicLevelAt(zapcore.DebugLevel)
	}
	if b.failure == (zap.AtomicLevel{}) {
		b.failure = zap.NewAtomicLevelAt(zapcore.ErrorLevel)
	}
	if b.canceled == (zap.AtomicLevel{}) {
		b.canceled = zap.NewAtomicLevelAt(zapcore.DebugLevel)
	}
	if b.deferred == (zap.AtomicLevel{}) {
		b.deferred = zap.NewAtomicLevelAt(zapcore.InfoLevel)
	}
	return b
}

// Placement implements mediator.PlacedBehavior: Explain shows it as "logging", in
// mediator.StageDefault, at Order.
func (b *Behavior) Placement() mediator.Placement {
	return mediator.Placement{Name: "logging", Stage: mediator.StageDefault, Order: Order}
}

// Bind resolves the request type's name once, at Build.
func (b *Behavior) Bind(info mediator.RequestInfo) (mediator.Behavior, error) {
	bound := *b
	bound.request = behaviors.RequestName(info.Request)
	for _, x := range info.Behaviors {
		switch x.(type) {
		case *retry.Behavior:
			bound.retried = true
		case *breaker.Behavior:
			bound.gated = true
		}
	}
	return &bound, nil
}

// Handle calls next and logs its outcome. Nothing is built for an entry whose level is
// disabled: a success below the logger's level costs a clock reading and a level check.
func (b *Behavior) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	start := time.Now()
	resp, err := next(ctx, req)
	took := time.Since(start)
	if err == nil {
		if ce := b.log.Check(b.success.Level(), "switchboard: request handled"); ce != nil {
			b.write(ce, ctx, req, took, behaviors.OutcomeSuccess, nil)
		}
		return resp, nil
	}
	outcome := behaviors.OutcomeOf(ctx, req, err)
	level, msg := b.failure.Level(), "switchboard: request failed"
	switch outcome {
	case behaviors.OutcomeCancelled:
		level, msg = b.canceled.Level(), "switchboard: request cancelled"
	case behaviors.OutcomeDeferred:
		level, msg = b.deferred.Level(), "switchboard: request deferred"
	case behaviors.OutcomeRejected:
		msg = "switchboard: request rejected"
	}
	if ce := b.log.Check(level, msg); ce != nil {
		b.write(ce, ctx, req, took, outcome, err)
	}
	return resp, err
}

func (b *Behavior) write(ce *zapcore.CheckedEntry, ctx context.Context, req any, took time.Duration, outcome string, err error) {
	request := b.request
	if request == "" { // used without Build's binding (a hand-made pipeline)
		request = behaviors.RequestName(reflect.TypeOf(req))
	}
	attempt := retry.Attempt(ctx)
	if x, ok := errors.AsType[*retry.ExhaustedError](err); ok && (b.retried || b.request == "") {
		attempt = x.Attempts // outside retry: the attempt whose error this is
	}
	fields := make([]zap.Field, 0, 6)
	fields = append(fields,
		zap.String("request", request),
		zap.Int("attempt", attempt),
		zap.Duration("duration", took),
		zap.String("outcome", outcome),
	)
	if err != nil {
		fields = append(fields, zap.Error(err))
	}
	if key, ok := b.breakerKey(req, err); ok {
		fields = append(fields, zap.String("breaker", key))
	}
	ce.Write(fields...)
}

// breakerKey returns the key of the call's breaker: the one an error of the breaker names,
// or Config.Breakers' key for req; nothing when the request type's pipeline has no breaker.
func (b *Behavior) breakerKey(req any, err error) (string, bool) {
	if !b.gated && b.request != "" {
		return "", false
	}
	if o, ok := errors.AsType[*breaker.OpenError](err); ok {
		return o.Key, true
	}
	if t, ok := errors.AsType[*breaker.TrippedError](err); ok {
		return t.Key, true
	}
	if b.breakers != nil {
		return b.breakers.KeyOf(req), true
	}
	return "", false
}
