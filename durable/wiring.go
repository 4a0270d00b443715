package durable

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/mediator"
)

// checkSender refuses a sender that cannot send anything: nil, or a nil pointer (a nil
// *mediator.Mediator) that would crash the first dispatch with a nil dereference.
func checkSender(op string, sender mediator.Sender) error {
	if sender == nil {
		return fmt.Errorf("durable: %s: a sender (the mediator) is required", op)
	}
	switch v := reflect.ValueOf(sender); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice, reflect.Interface:
		if v.IsNil() {
			return fmt.Errorf("durable: %s: the sender is a nil %T: pass the built mediator", op, sender)
		}
	}
	return nil
}

// buildProbe is a type no mediator has a handler for: asking for its pipeline tells a built
// mediator (mediator.ErrNoHandler) from one that was not built (mediator.ErrNotBuilt).
type buildProbe struct{}

// checkHandlers refuses a sender that says it cannot dispatch the registered and scheduled
// request types: a mediator that was not built, or one without a handler for some of them,
// named all in one error. Every item of such a type would otherwise fail its first attempt and
// go dead, and every run of such a schedule fail. A sender that cannot say (it does not list
// pipelines, as *mediator.Mediator does) is taken as it is.
func (q *Queue) checkHandlers(sender mediator.Sender) error {
	p, ok := sender.(pipelineLister)
	if !ok {
		return nil
	}
	if _, err := p.Pipeline(reflect.TypeFor[*buildProbe]()); errors.Is(err, mediator.ErrNotBuilt) {
		return fmt.Errorf("durable: Start: the mediator is not built (its Build was not called, or returned an error): build it before Start, or every item it is given fails: %w", err)
	}
	var errs []error
	missing := func(what string, t reflect.Type) {
		_, err := p.Pipeline(t)
		if _, ok := errors.AsType[*mediator.NoHandlerError](err); ok {
			errs = append(errs, fmt.Errorf("durable: Start: %s: %w", what, err))
		}
	}
	for _, r := range q.reg.list() {
		missing(fmt.Sprintf("registered request %q", r.name), r.typ)
	}
	for _, e := range q.schedules.list() {
		missing(fmt.Sprintf("schedule %q", e.name), e.typ)
	}
	return errors.Join(errs...)
}

// breakers returns the breaker registries that guard q's items: def (Config.Breakers)
// and those the registrations' WithBreaker name, each once.
func (q *Queue) breakers(def *breaker.Registry) []*breaker.Registry {
	var out []*breaker.Registry
	if def != nil {
		out = append(out, def)
	}
	for _, r := range q.reg.list() {
		if r.guard != nil && !slices.Contains(out, r.guard.reg) {
			out = append(out, r.guard.reg)
		}
	}
	return out
}

// list returns the registrations in name order.
func (r *registry) list() []*registration {
	r.mu.RLock()
	out := make([]*registration, 0, len(r.byName))
	for _, reg := range r.byName {
		out = append(out, reg)
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b *registration) int { return cmp.Compare(a.name, b.name) })
	return out
}

// noHandler reports whether err is the sender's answer that it has nothing to run req with:
// no handler for req's type (a mediator.NoHandlerError naming that type, not a request the
// handler sent), or a mediator that was not built. The handler did not run.
func noHandler(err error, req any) bool {
	if e, ok := errors.AsType[*mediator.NoHandlerError](err); ok && e.Type == reflect.TypeOf(req) {
		return true
	}
	// Compared, not matched in the chain: an unbuilt sender answers ErrNotBuilt itself, before
	// any handler runs, whereas a handler that met an unbuilt mediator of its own did run.
	return err == mediator.ErrNotBuilt
}
