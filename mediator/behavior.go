package mediator

import (
	"context"
	"fmt"
	"iter"
	"reflect"
	"strings"
)

// Stage groups behaviors. Stage always beats order: every Pre behavior is outside every Default
// behavior, which is outside every Post behavior, which is outside the handler.
type Stage int

const (
	// StagePre is for context population (authentication, locale, trace ids). Outermost.
	StagePre Stage = iota + 1
	// StageDefault is for resilience, validation and logging. The zero Stage means StageDefault.
	StageDefault
	// StagePost is for observation of the handler's result (metrics, audit). Innermost.
	StagePost
)

func (s Stage) String() string {
	switch s {
	case StagePre:
		return "pre"
	case StageDefault, 0:
		return "default"
	case StagePost:
		return "post"
	}
	return fmt.Sprintf("Stage(%d)", int(s))
}

// Next calls the rest of the pipeline: the inner behaviors and then the handler. It may be
// called more than once (a retry does) or not at all (a breaker that is open does not).
type Next func(ctx context.Context, req any) (any, error)

// Behavior wraps the handling of requests. req is the request pointer the caller sent; the
// returned value must be of the request's response type (or nil with an error).
type Behavior interface {
	Handle(ctx context.Context, req any, next Next) (any, error)
}

// BehaviorFunc adapts a function to a Behavior.
type BehaviorFunc func(ctx context.Context, req any, next Next) (any, error)

// Handle calls f.
func (f BehaviorFunc) Handle(ctx context.Context, req any, next Next) (any, error) {
	return f(ctx, req, next)
}

// StreamNext calls the rest of a stream pipeline.
type StreamNext func(ctx context.Context, req any) iter.Seq2[any, error]

// StreamBehavior wraps the handling of stream requests.
type StreamBehavior interface {
	HandleStream(ctx context.Context, req any, next StreamNext) iter.Seq2[any, error]
}

// StreamBehaviorFunc adapts a function to a StreamBehavior.
type StreamBehaviorFunc func(ctx context.Context, req any, next StreamNext) iter.Seq2[any, error]

// HandleStream calls f.
func (f StreamBehaviorFunc) HandleStream(ctx context.Context, req any, next StreamNext) iter.Seq2[any, error] {
	return f(ctx, req, next)
}

// RequestInfo describes one request type to behaviors at Build.
type RequestInfo struct {
	// Request is the request type as sent (a pointer type).
	Request reflect.Type
	// Response is the response type (for a stream request: the item type).
	Response reflect.Type
	// Stream is true for stream requests.
	Stream bool
	// Behaviors is set while Build binds behaviors (AppliesTo does not see it): the behaviors
	// that apply to the request type, outermost first, as they were registered. A behavior's
	// Bind may look among them for a peer it works with, as the durable deferral finds the
	// retry behavior whose policy decides what is worth trying again.
	Behaviors []Behavior
	// Observers is set while Build binds behaviors: the observers attached with
	// Mediator.Observe, in order. A behavior's Bind picks those implementing its observer
	// interface (ObserversOf) and calls them along with its own Config's hooks.
	Observers []any
}

// Placement says where a behavior sits in the pipelines: the name Explain shows, its stage and
// its order within the stage (lower is outer). Zero fields mean the defaults: the behavior's
// type name, StageDefault, order 0. Options given to Use win over it.
type Placement struct {
	// Name is what Explain shows. Default: the behavior's type name.
	Name string
	// Stage is the stage the behavior belongs to. Default StageDefault.
	Stage Stage
	// Order is the behavior's order within its stage; lower is outer. Default 0.
	Order int
}

// The optional interfaces below let a behavior describe itself.

// PlacedBehavior describes where a behavior belongs, so that Use needs no options for it.
type PlacedBehavior interface{ Placement() Placement }

// ValidatingBehavior reports invalid configuration; Build fails with every such error.
type ValidatingBehavior interface{ Validate() error }

// SelectiveBehavior decides at Build which request types a behavior applies to.
type SelectiveBehavior interface{ AppliesTo(info RequestInfo) bool }

// BindingBehavior is called once per request type at Build, after AppliesTo. It returns the
// behavior to use for that type (which may be itself, or a specialised copy with per-type
// state resolved up front), or an error naming what is wrong for that type (for example a
// fallback whose result type does not match the response type). A nil behavior with a nil
// error leaves the type out.
type BindingBehavior interface {
	Bind(info RequestInfo) (Behavior, error)
}

// BuiltBehavior is implemented by behaviors that must learn that a Build including them
// succeeded: Built is called once per registration, after the pipelines are in place. (The
// durable deferral closes its registry to new request types then, since Build decided which
// types it applies to.) A failed Build calls nothing.
type BuiltBehavior interface{ Built() }

// StreamBindingBehavior is BindingBehavior for stream behaviors.
type StreamBindingBehavior interface {
	BindStream(info RequestInfo) (StreamBehavior, error)
}

// Option configures one registration of a behavior.
type Option func(*behaviorConfig)

type behaviorConfig struct {
	name      string
	stage     Stage
	order     int
	filters   []func(RequestInfo) bool
	predicate func(req any) bool
	err       error // an option that cannot work; Build reports it
}

// WithStage puts the behavior in stage s.
func WithStage(s Stage) Option {
	return func(c *behaviorConfig) { c.stage = s }
}

// WithOrder sets the behavior's order within its stage; lower is outer. Default 0.
func WithOrder(order int) Option {
	return func(c *behaviorConfig) { c.order = order }
}

// WithName sets the name Explain shows. Default: the behavior's Placement, else its type name.
func WithName(name string) Option {
	return func(c *behaviorConfig) { c.name = name }
}

// ForRequest limits the behavior to request type Q (as sent, e.g. *GetUser).
func ForRequest[Q any]() Option {
	t := reflect.TypeFor[Q]()
	return func(c *behaviorConfig) {
		c.filters = append(c.filters, func(info RequestInfo) bool { return info.Request == t })
	}
}

// ForInterface limits the behavior to request types that implement interface I. I must be an
// interface type; Build fails otherwise.
func ForInterface[I any]() Option {
	t := reflect.TypeFor[I]()
	return func(c *behaviorConfig) {
		if t.Kind() != reflect.Interface {
			c.err = fmt.Errorf("ForInterface[%s]: not an interface type; use ForRequest for one request type", t)
			return
		}
		c.filters = append(c.filters, func(info RequestInfo) bool { return info.Request.Implements(t) })
	}
}

// forRequestOrInterface is ForInterface for interface types and ForRequest otherwise.
func forRequestOrInterface[Q any]() Option {
	if reflect.TypeFor[Q]().Kind() == reflect.Interface {
		return ForInterface[Q]()
	}
	return ForRequest[Q]()
}

// ForTypes limits the behavior to request types for which keep returns true. It is called once
// per request type at Build.
func ForTypes(keep func(RequestInfo) bool) Option {
	return func(c *behaviorConfig) { c.filters = append(c.filters, keep) }
}

// When adds a per-value predicate: for a request value where it returns false, the behavior is
// skipped. It runs on every dispatch, so keep it cheap.
func When(pred func(req any) bool) Option {
	return func(c *behaviorConfig) { c.predicate = pred }
}

// Step is one entry of an explained pipeline.
type Step struct {
	// Name is the behavior's name, or "handler" for the last step.
	Name string
	// Stage is the behavior's stage; zero for the handler.
	Stage Stage
	// Order is the behavior's order within its stage.
	Order int
	// Conditional is true when a per-value predicate may skip the behavior.
	Conditional bool
}

// Chain is the resolved pipeline of one request type, outermost first, ending with the handler.
type Chain []Step

// String renders the chain one step per line, for golden tests.
func (c Chain) String() string {
	var b strings.Builder
	for i, s := range c {
		b.WriteString(strings.Repeat("  ", i))
		if s.Stage == 0 {
			b.WriteString(s.Name)
		} else {
			fmt.Fprintf(&b, "%s (%s, %d)", s.Name, s.Stage, s.Order)
			if s.Conditional {
				b.WriteString(" [conditional]")
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func behaviorName(b any) string {
	t := reflect.TypeOf(b)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Name() == "" {
		return t.String()
	}
	return t.Name()
}
