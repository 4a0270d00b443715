package mediator

import (
	"cmp"
	"reflect"
	"slices"
)

// Explain returns the resolved pipeline of a request or stream request type, outermost first.
func (m *Mediator) Explain(requestType reflect.Type) (Chain, error) {
	t := m.table.Load()
	if t == nil {
		return nil, ErrNotBuilt
	}
	c, ok := t.byType[requestType]
	if !ok {
		kind := "request"
		if requestType != nil && requestType.Implements(reflect.TypeFor[streamMarker]()) {
			kind = "stream request"
		}
		return nil, &NoHandlerError{Type: requestType, Kind: kind}
	}
	return slices.Clone(c), nil
}

// Explain returns the resolved pipeline of request type Q, outermost first.
func Explain[Q any](m *Mediator) (Chain, error) { return m.Explain(reflect.TypeFor[Q]()) }

// Pipeline returns the behaviors of request type requestType's pipeline as Build bound them,
// outermost first: the same steps Explain names, as values. Code that cooperates with a
// behavior of the pipeline finds it here (a durable scheduler finds the retry behavior whose
// policy decides what is worth trying again). It fails with ErrNotBuilt before Build and with
// a NoHandlerError for a type without a handler.
func (m *Mediator) Pipeline(requestType reflect.Type) ([]Behavior, error) {
	t := m.table.Load()
	if t == nil {
		return nil, ErrNotBuilt
	}
	bs, ok := t.pipelines[requestType]
	if !ok {
		return nil, &NoHandlerError{Type: requestType, Kind: "request"}
	}
	return slices.Clone(bs), nil
}

// Requests lists every request and stream request type with a pipeline, sorted by name.
func (m *Mediator) Requests() []RequestInfo {
	t := m.table.Load()
	if t == nil {
		return nil
	}
	out := slices.Clone(t.infos)
	slices.SortFunc(out, func(a, b RequestInfo) int { return cmp.Compare(a.Request.String(), b.Request.String()) })
	return out
}
