package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// Propagator carries the enqueuing caller's context values to the dispatch (see
// Config.Propagators), shaped as OpenTelemetry's TextMapPropagator. It is called
// concurrently, touches only its own entries, and must not keep the carrier.
//
// One that also has the method
//
//	Dispatching(ctx context.Context, req any, item int64, name string, attempt int, instance string) context.Context
//
// is told of every item dispatch and replay (attempt 0) after Extract, in standard types (for
// package tracing); its context is the dispatch's. A panic or nil context is logged, skipped.
type Propagator interface {
	Inject(ctx context.Context, carrier map[string]string) // write ctx's values into carrier
	Extract(ctx context.Context, carrier map[string]string) context.Context
}

// Carry returns a Propagator of one key's value, JSON-encoded under its name (so
// keep it stable; Open refuses two alike). A WithFor value is not carried; one
// that does not encode or decode is left out and logged. Carry panics on a nil
// or unnamed key.
func Carry[T any](key *mediator.ContextKey[T]) Propagator {
	if key == nil || key.String() == "" {
		panic("durable: Carry: a key with a name is required")
	}
	return &carried[T]{key: key}
}

// carried is the Propagator Carry returns.
type carried[T any] struct{ key *mediator.ContextKey[T] }

func (c *carried[T]) name() string { return c.key.String() }

// Inject implements Propagator.
func (c *carried[T]) Inject(ctx context.Context, carrier map[string]string) {
	_ = c.inject(ctx, carrier)
}

// Extract implements Propagator.
func (c *carried[T]) Extract(ctx context.Context, carrier map[string]string) context.Context {
	ctx, _ = c.extract(ctx, carrier)
	return ctx
}

func (c *carried[T]) inject(ctx context.Context, carrier map[string]string) error {
	v, ok := c.key.Get(ctx)
	if !ok {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("durable: metadata %q: %w", c.name(), err)
	}
	carrier[c.name()] = string(b)
	return nil
}

func (c *carried[T]) extract(ctx context.Context, carrier map[string]string) (context.Context, error) {
	s, ok := carrier[c.name()]
	if !ok {
		return ctx, nil
	}
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return ctx, fmt.Errorf("durable: metadata %q: %w", c.name(), err)
	}
	return c.key.With(ctx, v), nil
}

// checkedPropagator is a Propagator that reports its failures (Carry's).
type checkedPropagator interface {
	name() string
	inject(ctx context.Context, carrier map[string]string) error
	extract(ctx context.Context, carrier map[string]string) (context.Context, error)
}

// checkPropagators reports nil propagators and carried keys that share a name.
func checkPropagators(ps []Propagator) []error {
	var errs []error
	seen := map[string]bool{}
	for i, p := range ps {
		if p == nil {
			errs = append(errs, fmt.Errorf("durable: Config: Propagators[%d] is nil", i))
			continue
		}
		if c, ok := p.(checkedPropagator); ok {
			if seen[c.name()] {
				errs = append(errs, fmt.Errorf("durable: Config: Propagators[%d] carries a second key named %q: their values would overwrite each other", i, c.name()))
			}
			seen[c.name()] = true
		}
	}
	return errs
}

// metadata returns the metadata q's propagators take from ctx, JSON-encoded; nil when they
// take nothing. A propagator that panics (or, made by Carry, cannot encode its value)
// contributes nothing and is logged with the queue's Config.Logger: the item is stored without it rather
// than not at all (the deferral of a failing request must not fail over its trace context).
// Metadata larger than MaxMetadataSize is an error matching ErrMetadataTooLarge.
func (q *Queue) metadata(ctx context.Context, name string) ([]byte, error) {
	if len(q.propagators) == 0 {
		return nil, nil
	}
	carrier := map[string]string{}
	for i, p := range q.propagators {
		part := map[string]string{}
		if err := inject(ctx, p, part); err != nil {
			q.log.Error("durable: a propagator failed at enqueue; the item is stored without its values",
				zap.String("name", name), zap.Int("propagator", i), zap.Error(err))
			continue
		}
		maps.Copy(carrier, part)
	}
	if len(carrier) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(carrier)
	if err != nil {
		return nil, fmt.Errorf("durable: metadata of %s: %w", name, err) // cannot happen: strings encode
	}
	if len(b) > MaxMetadataSize {
		return nil, fmt.Errorf("%w: %s: %d bytes, the limit is %d (durable.MaxMetadataSize)", ErrMetadataTooLarge, name, len(b), MaxMetadataSize)
	}
	return b, nil
}

// inject runs one propagator's Inject, turning a panic into an error.
func inject(ctx context.Context, p Propagator, carrier map[string]string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	if c, ok := p.(checkedPropagator); ok {
		return c.inject(ctx, carrier)
	}
	p.Inject(ctx, carrier)
	return nil
}

// withMetadata returns ctx with the values q's propagators extract from an item's stored
// metadata. A propagator that panics (or, made by Carry, cannot decode its value) is skipped
// and logged: the item is dispatched without its values rather than not at all. Metadata that is
// not a JSON object of strings (written by hand) is logged and ignored.
func (q *Queue) withMetadata(ctx context.Context, md []byte, log *zap.Logger, item record.ItemID, name string) context.Context {
	if len(md) == 0 || len(q.propagators) == 0 {
		return ctx
	}
	var carrier map[string]string
	if err := json.Unmarshal(md, &carrier); err != nil {
		log.Error("durable: item metadata does not decode; dispatching without it", zap.Int64("item", int64(item)),
			zap.String("name", name), zap.Error(err))
		return ctx
	}
	for i, p := range q.propagators {
		next, err := extract(ctx, p, carrier)
		if err != nil {
			log.Error("durable: a propagator failed at dispatch; dispatching without its values",
				zap.Int64("item", int64(item)), zap.String("name", name), zap.Int("propagator", i), zap.Error(err))
			continue
		}
		ctx = next
	}
	return ctx
}

// extract runs one propagator's Extract, turning a panic into an error. The propagator gets its
// own copy of the carrier, so one that writes to it does not change what the next one reads.
func extract(ctx context.Context, p Propagator, carrier map[string]string) (out context.Context, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("panic: %v", r)
		}
	}()
	carrier = maps.Clone(carrier)
	if c, ok := p.(checkedPropagator); ok {
		return c.extract(ctx, carrier)
	}
	out = p.Extract(ctx, carrier)
	if out == nil {
		return nil, errors.New("Extract returned a nil context")
	}
	return out, nil
}

// decodeMetadata returns stored metadata as a map; nil when there is none or it does not decode.
func decodeMetadata(md []byte) map[string]string {
	if len(md) == 0 {
		return nil
	}
	var m map[string]string
	if json.Unmarshal(md, &m) != nil {
		return nil
	}
	return m
}

// dispatching is the optional method of a Propagator told of each dispatch (see Propagator).
type dispatching interface {
	Dispatching(ctx context.Context, req any, item int64, name string, attempt int, instance string) context.Context
}

// dispatcher is a propagator that has the Dispatching method, with its place in
// Config.Propagators (for the log).
type dispatcher struct {
	index int
	p     dispatching
}

// withDispatch returns ctx marked as the dispatch d of req (FromContext), with what the
// propagators that have a Dispatching method make of it. One that panics or returns a nil
// context is skipped and logged.
func (q *Queue) withDispatch(ctx context.Context, req any, d Dispatch, log *zap.Logger) context.Context {
	ctx = dispatchKey.WithFor(ctx, req, d)
	for _, dp := range q.dispatchers {
		next, err := tellDispatch(ctx, dp.p, req, d)
		if err != nil {
			log.Error("durable: a propagator failed at dispatch; dispatching without its values",
				zap.Int64("item", int64(d.ItemID)), zap.String("name", d.Name), zap.Int("propagator", dp.index), zap.Error(err))
			continue
		}
		ctx = next
	}
	return ctx
}

// tellDispatch runs one propagator's Dispatching, turning a panic or a nil context into an
// error.
func tellDispatch(ctx context.Context, p dispatching, req any, d Dispatch) (out context.Context, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("panic in Dispatching: %v", r)
		}
	}()
	if out = p.Dispatching(ctx, req, int64(d.ItemID), d.Name, d.Attempt, d.Instance); out == nil {
		return nil, errors.New("Dispatching returned a nil context")
	}
	return out, nil
}
