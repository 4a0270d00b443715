package logging

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/budget"
	"github.com/switchboard-go/switchboard/behaviors/fallback"
	"github.com/switchboard-go/switchboard/behaviors/hedge"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/mediator"
)

// Order is the logging behavior's default order within mediator.StageDefault: between the
// fallback (behaviors.FallbackOrder) and the durable deferral (behaviors.DeferralOrder), so it
// sees each call's final outcome once: a failure before a fallback answers for it, and a
// deferred call as deferred rather than as the failure the deferral took for later.
const Order = behaviors.FallbackOrder + 5

// The defaults of Config's limits.
const (
	defaultRefusalEvery = 10 * time.Second
	defaultRefusalKeys  = 1024
	defaultMaxInner     = 16
)

// Config configures the logging behavior. The zero value of each field means its documented
// default, so Config{} is complete.
type Config struct {
	// Logger receives one entry per call. Default zap.L() as it is when New is called: a no-op
	// until the application installs its logger with zap.ReplaceGlobals, so the behavior
	// follows the application's choice and never prints on its own. The behavior writes
	// through a copy of it without the AddStacktrace option (see KeepStacktraces).
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
	// ClientError is the level of a call whose error says the request itself is wrong
	// (outcome "client_error", behaviors.IsClientError: a validation error, a callee's 4xx
	// other than 408 and 429). Default warn: the caller's to fix, not the service's failure,
	// and nothing an operator need do; worth seeing, as a burst of them means a caller (or a
	// deployment) sends bad requests.
	ClientError zap.AtomicLevel
	// Refusal is the level of a call that got a refusal (outcome "refused", behaviors.IsRefusal):
	// its own circuit breaker, bulkhead, rate limit or refusing behavior turned it away before
	// its handler ran, or its handler passed on the refusal of a request it sent (a rate limit
	// or breaker further down shedding load). Written as "switchboard: request refused".
	// Default warn: the caller did not get its answer, but nothing failed (the refused call
	// did not happen), the cause was logged already (the failure that tripped the breaker),
	// and a limit under load refuses every call beyond it. Entries at this level are
	// rate-limited per key (RefusalEvery).
	Refusal zap.AtomicLevel
	// RefusalEvery is the shortest time between two refusal entries of one breaker or bulkhead
	// key; the refusals in between are not written, and the next entry of the key counts them
	// in its suppressed field. Default 10 s: an operator watching the log sees that a key
	// still refuses without one line per refused call (an open breaker in front of busy
	// traffic refuses thousands a second; the metrics count every one). Negative is an error.
	RefusalEvery time.Duration
	// RefusalKeys bounds the keys whose refusals are rate-limited one by one. Beyond it, a key
	// shares one window with every other key that did not fit, so a flood of distinct keys
	// costs bounded memory and writes at most one line per RefusalEvery between them.
	// Such a key's entry counts the refusals held back in its suppressed_shared field (those
	// of every key in the shared window, not its own alone). Default 1024: more breakers than
	// most services have, at about 100 bytes each. Negative is an error.
	RefusalKeys int
	// Inner is the level of the entries of inner requests (sent with the context of a request
	// that is in flight through this behavior: by its handler, or by the handlers of the
	// notifications it publishes) when the outer request succeeded or was deferred: the
	// failures inside it were dealt with (a fallback answered, a retry succeeded, the deferral
	// stored the work), and its own entry is the one line that says what happened. Default
	// debug. An inner entry above Inner is held until the outer request ends, and written at
	// its own level when the outer request ended otherwise (failed, client_error, refused,
	// cancelled), since it then explains what went wrong.
	Inner zap.AtomicLevel
	// Steps is the level of the entries of the behavior's observer methods, Behavior.OnRetry (one
	// per retry) and Behavior.OnFallback (one per failure a fallback handled). Default debug:
	// the call's own entry says how it ended (a success after retries, the failure a fallback
	// answered for); these entries tell the steps on the way, for debugging.
	Steps zap.AtomicLevel
	// MaxInner bounds the inner entries held for one outer request; the outer entry counts the
	// ones beyond it in its inner_dropped field. Default 16: a handler rarely sends more
	// requests than that, and a loop that sends thousands must not hold them all in memory.
	// Negative is an error.
	MaxInner int
	// Fields are called for every entry written, with the call's context and request; the
	// fields they return are added to the entry (an event id, a tenant). They run only for
	// entries that are written, never for a disabled level. Default none.
	Fields []func(ctx context.Context, req any) []zap.Field
	// KeepStacktraces keeps the Logger's AddStacktrace option: every entry at or above its
	// level carries the stack of the logging behavior, as zap writes it. Default false: only
	// an entry whose error is a panic (*mediator.PanicError) carries a stack, the panic's own,
	// since the stack of the logging behavior says nothing about a failure and zap's
	// production configuration would put about 2 KB of it on every error line.
	KeepStacktraces bool
	// Clock is the time source of the refusal rate limit. Default behaviors.SystemClock.
	Clock behaviors.Clock
	// Breakers is the circuit breaker registry of the pipelines, when one is used: every entry
	// then names its breaker's key (Registry.KeyOf, the key the breaker behavior gates on), not
	// only the entries of calls an open breaker refused or whose failure tripped it, which name
	// it from their error. Default nil: a key function is the application's code and is run
	// only when asked.
	Breakers *breaker.Registry
}

// Validate reports every negative limit, naming the field.
func (c Config) Validate() error {
	var errs []error
	if c.RefusalEvery < 0 {
		errs = append(errs, fmt.Errorf("logging: Config.RefusalEvery %s is negative", c.RefusalEvery))
	}
	if c.RefusalKeys < 0 {
		errs = append(errs, fmt.Errorf("logging: Config.RefusalKeys %d is negative", c.RefusalKeys))
	}
	if c.MaxInner < 0 {
		errs = append(errs, fmt.Errorf("logging: Config.MaxInner %d is negative", c.MaxInner))
	}
	return errors.Join(errs...)
}

// Behavior is the logging behavior: it writes one entry per call it wraps (see the package doc
// for the fields, levels and placement).
type Behavior struct {
	cfg                        Config // as given, for Validate
	log                        *zap.Logger
	success, failure, canceled zap.AtomicLevel
	deferred, refusal, inner   zap.AtomicLevel
	steps, client              zap.AtomicLevel
	maxInner                   int
	fields                     []func(ctx context.Context, req any) []zap.Field
	refusals                   *limiter
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

// never enables no level: the AddStacktrace option of the behavior's logger.
var never = zap.LevelEnablerFunc(func(zapcore.Level) bool { return false })

// New returns a logging behavior configured by cfg. Register it with mediator.Use; its
// Placement puts it at Order in mediator.StageDefault. It does not validate cfg: Validate does,
// and mediator's Build calls it.
func New(cfg Config) *Behavior {
	b := &Behavior{cfg: cfg, log: cfg.Logger, success: cfg.Success, failure: cfg.Failure, canceled: cfg.Cancelled,
		deferred: cfg.Deferred, refusal: cfg.Refusal, inner: cfg.Inner, steps: cfg.Steps, client: cfg.ClientError, maxInner: cfg.MaxInner,
		fields: cfg.Fields, breakers: cfg.Breakers}
	if b.log == nil {
		b.log = zap.L()
	}
	if !cfg.KeepStacktraces {
		b.log = b.log.WithOptions(zap.AddStacktrace(never))
	}
	for _, l := range []struct {
		level *zap.AtomicLevel
		def   zapcore.Level
	}{
		{&b.success, zapcore.DebugLevel}, {&b.failure, zapcore.ErrorLevel}, {&b.canceled, zapcore.DebugLevel},
		{&b.deferred, zapcore.InfoLevel}, {&b.refusal, zapcore.WarnLevel}, {&b.inner, zapcore.DebugLevel},
		{&b.steps, zapcore.DebugLevel}, {&b.client, zapcore.WarnLevel},
	} {
		if *l.level == (zap.AtomicLevel{}) {
			*l.level = zap.NewAtomicLevelAt(l.def)
		}
	}
	if b.maxInner <= 0 {
		b.maxInner = defaultMaxInner
	}
	b.refusals = newLimiter(cfg.Clock, orDefault(cfg.RefusalEvery, defaultRefusalEvery), orDefault(cfg.RefusalKeys, defaultRefusalKeys))
	return b
}

// orDefault returns v, or def when v is not positive.
func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Validate reports what Config.Validate reports; mediator's Build calls it.
func (b *Behavior) Validate() error { return b.cfg.Validate() }

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
// disabled: a success below the logger's level costs two clock readings, a level check and
// the outer request's scope (one allocation), which inner requests find in the context.
func (b *Behavior) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	if s, ok := ctx.Value(scopeKey{}).(*scope); ok && !s.isClosed() {
		return b.handleInner(s, ctx, req, next)
	}
	s := &scope{Context: ctx}
	ended := false
	defer func() {
		if !ended { // a panic passes through: what the scope holds explains it, at its own level
			inner, _ := s.close()
			for _, h := range inner {
				h.b.write(h.level, h.call, "", 0)
			}
		}
	}()
	start := time.Now()
	resp, err := next(s, req)
	took := time.Since(start)
	ended = true
	inner, dropped := s.close()
	outcome := behaviors.OutcomeOf(ctx, req, err)
	if len(inner) > 0 {
		demote := outcome == behaviors.OutcomeSucceeded || outcome == behaviors.OutcomeDeferred
		for i := range inner {
			h := &inner[i]
			level := h.level
			if demote {
				level = min(level, h.b.inner.Level())
			}
			h.b.write(level, h.call, outcome, 0)
			inner[i] = held{} // what the entry holds (a context, a request) is not kept past here
		}
	}
	b.write(b.levelOf(outcome), call{ctx: ctx, req: req, took: took, outcome: outcome, err: err}, "", dropped)
	return resp, err
}

// handleInner is Handle for a request sent while the outer request of s is in flight: its entry
// is written now when its level is at most Inner (nothing to decide) or disabled (nothing to
// write), and held in s otherwise, for the outer request's outcome to decide.
func (b *Behavior) handleInner(s *scope, ctx context.Context, req any, next mediator.Next) (any, error) {
	start := time.Now()
	resp, err := next(ctx, req)
	took := time.Since(start)
	outcome := behaviors.OutcomeOf(ctx, req, err)
	level := b.levelOf(outcome)
	c := call{ctx: ctx, req: req, took: took, outcome: outcome, err: err}
	if level > b.inner.Level() && b.log.Core().Enabled(level) {
		c.at = start.Add(took)
		if s.hold(held{b: b, level: level, call: c}, b.maxInner) {
			return resp, err
		}
	}
	b.write(level, c, "", 0)
	return resp, err
}

// levelOf returns the level of an entry with outcome.
func (b *Behavior) levelOf(outcome string) zapcore.Level {
	switch outcome {
	case behaviors.OutcomeSucceeded:
		return b.success.Level()
	case behaviors.OutcomeCancelled:
		return b.canceled.Level()
	case behaviors.OutcomeDeferred:
		return b.deferred.Level()
	case behaviors.OutcomeRefused:
		return b.refusal.Level()
	case behaviors.OutcomeClientError:
		return b.client.Level()
	}
	return b.failure.Level()
}

// call is what an entry says of one call.
type call struct {
	ctx     context.Context
	req     any
	at      time.Time // when it ended, for an entry written later; zero: now
	took    time.Duration
	outcome string
	err     error
}

// message is the message of an entry with outcome.
func message(outcome string) string {
	switch outcome {
	case behaviors.OutcomeSucceeded:
		return "switchboard: request handled"
	case behaviors.OutcomeCancelled:
		return "switchboard: request cancelled"
	case behaviors.OutcomeDeferred:
		return "switchboard: request deferred"
	case behaviors.OutcomeRefused:
		return "switchboard: request refused"
	case behaviors.OutcomeClientError:
		return "switchboard: request invalid"
	}
	return "switchboard: request failed"
}

// write writes the entry of c at level: outer is the outcome of the outer request of a held
// entry ("" for any other), dropped the number of inner entries the call's scope could not
// hold.
func (b *Behavior) write(level zapcore.Level, c call, outer string, dropped int) {
	ce := b.log.Check(level, message(c.outcome))
	if ce == nil {
		return
	}
	suppressed, shared := 0, false
	if c.outcome == behaviors.OutcomeRefused && level == b.refusal.Level() {
		ok := false
		if ok, suppressed, shared = b.refusals.allow(b.refusalKey(c.req, c.err)); !ok {
			return
		}
	}
	if !c.at.IsZero() {
		ce.Time = c.at
	}
	if p, ok := errors.AsType[*mediator.PanicError](c.err); ok {
		ce.Stack = string(p.Stack)
	}
	request := b.request
	if request == "" { // used without Build's binding (a hand-made pipeline)
		request = behaviors.RequestName(reflect.TypeOf(c.req))
	}
	attempt := retry.AttemptNumber(c.ctx)
	if x, ok := errors.AsType[*retry.ExhaustedError](c.err); ok && (b.retried || b.request == "") {
		attempt = x.Attempts // outside retry: the attempt whose error this is
	}
	fields := make([]zap.Field, 0, 12)
	fields = append(fields,
		zap.String("request", request),
		zap.Int("attempt", attempt),
		zap.Duration("duration", c.took),
		zap.String("outcome", c.outcome),
	)
	if c.err != nil {
		fields = append(fields, zap.String("error", c.err.Error()))
	}
	if key, ok := b.breakerKey(c.req, c.err); ok {
		fields = append(fields, zap.String("breaker", key))
	}
	switch {
	case suppressed > 0 && shared:
		// The count is of every key beyond RefusalKeys, not of this entry's key alone.
		fields = append(fields, zap.Int("suppressed_shared", suppressed))
	case suppressed > 0:
		fields = append(fields, zap.Int("suppressed", suppressed))
	}
	if outer != "" {
		fields = append(fields, zap.String("outer_outcome", outer))
	}
	if dropped > 0 {
		fields = append(fields, zap.Int("inner_dropped", dropped))
	}
	ce.Write(b.around(c.ctx, c.req, fields)...)
}

// around appends the fields every entry has after its own: trace_id and span_id of ctx's
// span context when valid, and Config.Fields.
func (b *Behavior) around(ctx context.Context, req any, fields []zap.Field) []zap.Field {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		fields = append(fields, zap.Stringer("trace_id", sc.TraceID()), zap.Stringer("span_id", sc.SpanID()))
	}
	for _, f := range b.fields {
		fields = append(fields, f(ctx, req)...)
	}
	return fields
}

// OnRetry implements retry.Observer (attach the behavior with mediator.Mediator.Observe;
// it also fits retry.Config.OnRetry): it writes a "switchboard: retrying" entry at
// Config.Steps (default debug) with request, attempt (the one that failed), delay (before the
// next one), error, and the fields every entry has (trace_id, span_id, Config.Fields). Nothing
// is built when the level is disabled.
func (b *Behavior) OnRetry(ctx context.Context, e retry.Event) {
	ce := b.log.Check(b.steps.Level(), "switchboard: retrying")
	if ce == nil {
		return
	}
	fields := make([]zap.Field, 0, 8)
	fields = append(fields, zap.String("request", behaviors.RequestName(reflect.TypeOf(e.Request))),
		zap.Int("attempt", e.Attempt), zap.Duration("delay", e.Delay), zap.String("error", errorText(e.Err)))
	ce.Write(b.around(ctx, e.Request, fields)...)
}

// OnFallback implements fallback.Observer (and fits fallback.Config.OnFallback): it writes a "switchboard: fallback" entry
// at Config.Steps (default debug) with request, fallback (what it did: answered, declined,
// failed or cancelled), error (the failure it handled), fallback_error (its function's error,
// when it failed), and the fields every entry has. Nothing is built when the level is
// disabled.
func (b *Behavior) OnFallback(ctx context.Context, f fallback.Fallback) {
	ce := b.log.Check(b.steps.Level(), "switchboard: fallback")
	if ce == nil {
		return
	}
	fields := make([]zap.Field, 0, 8)
	fields = append(fields, zap.String("request", behaviors.RequestName(reflect.TypeOf(f.Request))),
		zap.String("fallback", f.Verdict.String()), zap.String("error", errorText(f.Err)))
	if f.FallbackErr != nil {
		fields = append(fields, zap.String("fallback_error", f.FallbackErr.Error()))
	}
	ce.Write(b.around(ctx, f.Request, fields)...)
}

// OnHedge implements hedge.Observer (and fits hedge.Config.OnHedge): it writes a "switchboard: hedge" entry at
// Config.Steps (default debug) with request, key, hedge (what happened: sent, refused, won or
// cancelled), attempt (0 is the first attempt, 1 the first hedge), delay (the call's hedge
// delay, for sent and refused), error (the budget's refusal, for refused), and the fields
// every entry has. Nothing is built when the level is disabled.
func (b *Behavior) OnHedge(ctx context.Context, n hedge.Notice) {
	ce := b.log.Check(b.steps.Level(), "switchboard: hedge")
	if ce == nil {
		return
	}
	fields := make([]zap.Field, 0, 9)
	fields = append(fields, zap.String("request", behaviors.RequestName(reflect.TypeOf(n.Request))), zap.String("key", n.Key),
		zap.String("hedge", n.Phase.String()), zap.Int("attempt", n.Attempt))
	if n.Delay > 0 {
		fields = append(fields, zap.Duration("delay", n.Delay))
	}
	if n.Err != nil {
		fields = append(fields, zap.String("error", n.Err.Error()))
	}
	ce.Write(b.around(ctx, n.Request, fields)...)
}

// OnBudgetSpend implements budget.Observer (and fits budget.Config.OnSpend): for each retry the budget refused, it writes
// a "switchboard: retry budget refused a retry" entry at Config.Refusal (default warn: a
// dependency is failing more than its budget allows, and its callers get its errors without
// the retries they would have had), at most one per key per RefusalEvery as refusals are,
// with request, budget (its key), calls and retries (the key's counts over the window), and
// the fields every entry has. A retry the budget allowed writes nothing: the retry's own
// entry (OnRetry) says it happened.
func (b *Behavior) OnBudgetSpend(ctx context.Context, s budget.Spend) {
	if !s.Refused {
		return
	}
	ce := b.log.Check(b.refusal.Level(), "switchboard: retry budget refused a retry")
	if ce == nil {
		return
	}
	ok, suppressed, shared := b.refusals.allow("retry-budget\x00" + s.Key)
	if !ok {
		return
	}
	fields := make([]zap.Field, 0, 9)
	fields = append(fields, zap.String("request", behaviors.RequestName(reflect.TypeOf(s.Request))), zap.String("budget", s.Key),
		zap.Int("calls", s.Calls), zap.Int("retries", s.Retries))
	switch {
	case suppressed > 0 && shared:
		fields = append(fields, zap.Int("suppressed_shared", suppressed))
	case suppressed > 0:
		fields = append(fields, zap.Int("suppressed", suppressed))
	}
	ce.Write(b.around(ctx, s.Request, fields)...)
}

// errorText is err's text, "" for nil.
func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
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

// refusalKey is the key a refusal is rate-limited by: the refusing behavior's (a breaker's, a
// bulkhead's, a rate limit's: behaviors.RefusalInfo.Key) for a refusal of req itself; the
// request type's and that key for a refusal its handler passed on, so that the outer entries
// neither hide nor are hidden by the refused request's own; else the request type's.
func (b *Behavior) refusalKey(req any, err error) string {
	request := b.request
	if request == "" {
		request = behaviors.RequestName(reflect.TypeOf(req))
	}
	if r, ok := errors.AsType[behaviors.Refusal](err); ok {
		if k := r.Refusal().Key; k != "" {
			if behaviors.Refused(err, req) {
				return k
			}
			return request + "\x00" + k
		}
	}
	return request
}

// scopeKey is the context key under which an outer request's scope finds itself.
type scopeKey struct{}

// scope is the context an outer request's pipeline runs with: it holds the entries of the
// inner requests sent with it until the outer request ends. Being the context itself, and
// allocating its buffer only when an entry is held, it costs one allocation (48 bytes) per
// outer request, and closing a scope that holds nothing takes no lock.
type scope struct {
	context.Context
	state   atomic.Int32 // scopeEmpty, scopeHolding or scopeClosed
	mu      sync.Mutex   // guards held and dropped
	dropped int32
	held    *[]held
}

// The states of a scope.
const (
	scopeEmpty   = iota // open, nothing held
	scopeHolding        // open, entries held (under mu)
	scopeClosed         // the outer request has ended
)

// held is an inner entry waiting for its outer request's outcome.
type held struct {
	b     *Behavior // the inner request's bound behavior, which writes it
	level zapcore.Level
	call  call
}

// Value returns s for scopeKey and what the outer request's context holds otherwise.
func (s *scope) Value(key any) any {
	if _, ok := key.(scopeKey); ok {
		return s
	}
	return s.Context.Value(key)
}

func (s *scope) isClosed() bool { return s.state.Load() == scopeClosed }

// hold keeps h for the outer request (at most limit entries; the rest are counted) and reports
// true, or reports false when the outer request has ended already (a request sent by a
// goroutine its handler left behind): the caller then writes it at once.
func (s *scope) hold(h held, limit int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for st := s.state.Load(); st != scopeHolding; st = s.state.Load() {
		if st == scopeClosed {
			return false
		}
		if s.state.CompareAndSwap(scopeEmpty, scopeHolding) {
			break
		}
	}
	if s.held == nil {
		s.held = new([]held)
	}
	if len(*s.held) >= limit {
		s.dropped++
		return true
	}
	*s.held = append(*s.held, h)
	return true
}

// close ends the scope and returns what it holds. A scope that holds nothing closes with one
// atomic operation; one that does waits for the entry being held, if any, under mu.
func (s *scope) close() ([]held, int) {
	if s.state.CompareAndSwap(scopeEmpty, scopeClosed) {
		return nil, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state.Store(scopeClosed)
	if s.held == nil {
		return nil, int(s.dropped)
	}
	h := *s.held
	s.held = nil
	return h, int(s.dropped)
}
