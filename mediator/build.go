package mediator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"reflect"
	"slices"
)

// Build resolves every handler from the injector once and composes every pipeline once. It
// returns every problem found, joined: request types without a handler or with several,
// handler constructors that failed, invalid behavior configuration. After a successful Build,
// registration is closed and dispatch may begin; after a failed one, registration stays open so
// the problems can be fixed and Build called again.
func (m *Mediator) Build() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.built {
		return ErrRegistrationClosed
	}
	errs := slices.Clone(m.problems)
	behaviors := m.checkBehaviors(m.behaviors, &errs)
	streamBs := m.checkBehaviors(m.streamBs, &errs)
	t := &table{byType: map[reflect.Type]Chain{}, direct: map[reflect.Type]any{}, pipelines: map[reflect.Type][]Behavior{}}
	requests := map[uintptr]route{}
	streams := map[uintptr]streamEntry{}
	notifs := map[uintptr][]notifCall{}
	for _, reg := range sortedRegs(m.requests) {
		h, ok := m.resolveOne(reg, &errs)
		if !ok {
			continue
		}
		rh := h.(resolvedHandler)
		info := reg.info
		info.Observers = m.observers
		call, chain, bound := composeRequest(info, rh.call, behaviors, &errs)
		r := route{call: call}
		t.pipelines[reg.info.Request] = bound
		if len(chain) == 1 {
			t.direct[reg.info.Request] = rh.typed
			r.bare = rh.bare
		}
		requests[keyOfType(reg.info.Request)] = r
		t.byType[reg.info.Request] = chain
		t.infos = append(t.infos, reg.info)
	}
	for _, reg := range sortedRegs(m.streams) {
		h, ok := m.resolveOne(reg, &errs)
		if !ok {
			continue
		}
		sh := h.(streamPipe)
		info := reg.info
		info.Observers = m.observers
		call, chain := composeStream(info, sh.stream, streamBs, &errs)
		e := streamEntry{call: call}
		if len(chain) == 1 {
			e.direct = sh.typed()
		}
		streams[keyOfType(reg.info.Request)] = e
		t.byType[reg.info.Request] = chain
		t.infos = append(t.infos, reg.info)
	}
	for _, typ := range slices.SortedFunc(maps.Keys(m.notifs), func(a, b reflect.Type) int { return cmp.Compare(a.String(), b.String()) }) {
		reg := m.notifs[typ]
		calls := make([]notifCall, 0, len(reg.handlers))
		for _, resolve := range reg.handlers {
			c, err := resolve(m.injector)
			if err != nil {
				errs = append(errs, &HandlerError{Type: typ, Err: err})
				continue
			}
			calls = append(calls, c)
		}
		notifs[keyOfType(typ)] = calls
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	t.requests, t.streams, t.notifs = newTypeIndex(requests), newTypeIndex(streams), newTypeIndex(notifs)
	m.built = true
	m.table.Store(t)
	for _, r := range slices.Concat(m.behaviors, m.streamBs) {
		if b, ok := r.b.(BuiltBehavior); ok {
			b.Built()
		}
	}
	return nil
}

func sortedRegs(regs map[reflect.Type]*requestReg) []*requestReg {
	out := make([]*requestReg, 0, len(regs))
	for _, r := range regs {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *requestReg) int { return cmp.Compare(a.info.Request.String(), b.info.Request.String()) })
	return out
}

func (m *Mediator) resolveOne(reg *requestReg, errs *[]error) (any, bool) {
	switch n := len(reg.handlers); {
	case n == 0:
		kind := "request"
		if reg.info.Stream {
			kind = "stream request"
		}
		*errs = append(*errs, &NoHandlerError{Type: reg.info.Request, Kind: kind})
		return nil, false
	case n > 1:
		*errs = append(*errs, &DuplicateHandlerError{Type: reg.info.Request, Count: n})
		return nil, false
	}
	h, err := reg.handlers[0](m.injector)
	if err != nil {
		*errs = append(*errs, &HandlerError{Type: reg.info.Request, Err: err})
		return nil, false
	}
	return h, true
}

// checkBehaviors validates behavior registrations and returns them sorted: by stage, then
// order, then registration.
func (m *Mediator) checkBehaviors(regs []behaviorReg, errs *[]error) []behaviorReg {
	out := make([]behaviorReg, 0, len(regs))
	for _, r := range regs {
		if r.config.err != nil {
			*errs = append(*errs, &BehaviorError{Behavior: r.config.name, Err: r.config.err})
			continue
		}
		if r.config.stage < StagePre || r.config.stage > StagePost {
			*errs = append(*errs, &BehaviorError{Behavior: r.config.name, Err: fmt.Errorf("stage %d is not one of StagePre, StageDefault, StagePost", int(r.config.stage))})
			continue
		}
		if v, ok := r.b.(ValidatingBehavior); ok {
			if err := v.Validate(); err != nil {
				*errs = append(*errs, &BehaviorError{Behavior: r.config.name, Err: err})
				continue
			}
		}
		out = append(out, r)
	}
	slices.SortStableFunc(out, func(a, b behaviorReg) int {
		if a.config.stage != b.config.stage {
			return int(a.config.stage) - int(b.config.stage)
		}
		if a.config.order != b.config.order {
			if a.config.order < b.config.order {
				return -1
			}
			return 1
		}
		return a.seq - b.seq
	})
	return out
}

// applies reports whether the registration applies to the request type.
func (r behaviorReg) applies(info RequestInfo) bool {
	for _, f := range r.config.filters {
		if !f(info) {
			return false
		}
	}
	if s, ok := r.b.(SelectiveBehavior); ok && !s.AppliesTo(info) {
		return false
	}
	return true
}

func (r behaviorReg) step() Step {
	return Step{Name: r.config.name, Stage: r.config.stage, Order: r.config.order, Conditional: r.config.predicate != nil}
}

// compose binds the behaviors that apply to info and wraps handler in them, outermost first.
// bind specialises one behavior for the request type (ok false leaves it out); wrap puts one
// bound behavior around the rest of the pipeline.
func compose[B, N any](info RequestInfo, handler N, regs []behaviorReg, errs *[]error,
	bind func(B, RequestInfo) (nb B, ok bool, err error), wrap func(B, func(any) bool, N) N) (N, Chain, []B) {
	var applying []behaviorReg
	for _, r := range regs {
		if r.applies(info) {
			applying = append(applying, r)
		}
	}
	if !info.Stream {
		for _, r := range applying {
			if b, ok := r.b.(Behavior); ok {
				info.Behaviors = append(info.Behaviors, b)
			}
		}
	}
	var bound []B
	var preds []func(any) bool
	var chain Chain
	for _, r := range applying {
		b, ok, err := bind(r.b.(B), info)
		if err != nil {
			*errs = append(*errs, &BehaviorError{Behavior: r.config.name, Request: info.Request, Err: err})
			continue
		}
		if !ok {
			continue
		}
		bound = append(bound, b)
		preds = append(preds, r.config.predicate)
		chain = append(chain, r.step())
	}
	chain = append(chain, Step{Name: "handler"})
	call := handler
	for i := len(bound) - 1; i >= 0; i-- {
		call = wrap(bound[i], preds[i], call)
	}
	return call, chain, bound
}

func composeRequest(info RequestInfo, handler Next, regs []behaviorReg, errs *[]error) (Next, Chain, []Behavior) {
	return compose(info, handler, regs, errs, func(b Behavior, info RequestInfo) (Behavior, bool, error) {
		binder, ok := b.(BindingBehavior)
		if !ok {
			return b, true, nil
		}
		nb, err := binder.Bind(info)
		return nb, nb != nil, err
	}, link)
}

func link(b Behavior, pred func(any) bool, next Next) Next {
	if pred == nil {
		if f, ok := b.(BehaviorFunc); ok {
			return func(ctx context.Context, req any) (any, error) { return f(ctx, req, next) }
		}
		return func(ctx context.Context, req any) (any, error) { return b.Handle(ctx, req, next) }
	}
	return func(ctx context.Context, req any) (any, error) {
		if !pred(req) {
			return next(ctx, req)
		}
		return b.Handle(ctx, req, next)
	}
}

func composeStream(info RequestInfo, handler StreamNext, regs []behaviorReg, errs *[]error) (StreamNext, Chain) {
	call, chain, _ := compose(info, handler, regs, errs, func(b StreamBehavior, info RequestInfo) (StreamBehavior, bool, error) {
		binder, ok := b.(StreamBindingBehavior)
		if !ok {
			return b, true, nil
		}
		nb, err := binder.BindStream(info)
		return nb, nb != nil, err
	}, linkStream)
	return call, chain
}

func linkStream(b StreamBehavior, pred func(any) bool, next StreamNext) StreamNext {
	return func(ctx context.Context, req any) iter.Seq2[any, error] {
		if pred != nil && !pred(req) {
			return next(ctx, req)
		}
		return b.HandleStream(ctx, req, next)
	}
}

// terminal adapts a typed handler to the untyped pipeline. A panic in the handler becomes a
// *PanicError so behaviors (a breaker, a retry) see it as a failure.
func terminal[Q Request[R], R any](h Handler[Q, R]) Next {
	return func(ctx context.Context, req any) (resp any, err error) {
		returned := false
		defer func() {
			if !returned { // the guard of bareSend
				if p := recover(); p != nil {
					resp, err = nil, NewPanicError(p)
				}
			}
		}()
		r, err := h.Handle(ctx, req.(Q))
		returned = true
		return r, err
	}
}
