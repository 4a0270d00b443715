package durable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/mediator"
)

// Propagator carries chosen values of a context (trace context, tenant, correlation id) from
// the caller that enqueues an item to the item's dispatch, as the item's metadata: Inject
// writes them into the carrier when the item is stored, Extract restores them into the
// dispatch's context. It has the shape of OpenTelemetry's propagation.TextMapPropagator, which
// an adapter of a few lines turns into one. Carry makes one for a mediator.ContextKey.
//
// Both methods are called from several goroutines at once. A propagator reads and writes only
// its own entries of the carrier, and Extract must not keep the carrier.
type Propagator interface {
	// Inject writes the values of ctx it carries into carrier.
	Inject(ctx context.Context, carrier map[string]string)
	// Extract returns ctx with the values it finds in carrier.
	Extract(ctx context.Context, carrier map[string]string) context.Context
}

// ErrMetadataTooLarge reports an item whose metadata, JSON-encoded, is larger than
// MaxMetadataSize; nothing was stored.
var ErrMetadataTooLarge = errors.New("durable: request metadata too large")

// MaxMetadataSize is the largest metadata an item may carry, in bytes of its JSON encoding. It
// leaves room for a full W3C trace context and baggage header (whose own limit is 8 KiB) and a
// few identifiers, and stops a propagator that carries far more than it should before it makes
// every row and every claim of the queue heavier.
const MaxMetadataSize = 16 << 10

// Carry returns a Propagator that carries the value of one typed context key: at Enqueue, the
// value key.Get finds in the caller's context is JSON-encoded into the metadata under the
// key's name (its String); at dispatch, it is decoded into a new T and set with key.With, so
// the handler, and the requests it sends, see it. A context without a value carries nothing,
// and the dispatch then has none either. A value bound to one request with WithFor is not
// carried: it belongs to that dispatch.
//
// The key's name becomes the stored entry's name, so keep it stable, and distinct from the
// other carried names (Open refuses two carried keys of one name). A value that does not encode
// (a T that encoding/json cannot handle) is left out of the metadata and logged; one that no
// longer decodes into T (the type changed since it was stored) is left out of the dispatch's
// context and logged. Carry panics on a nil key or a key with an empty name.
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
			errs = append(errs, fmt.Errorf("durable: Open: Propagators[%d] is nil", i))
			continue
		}
		if c, ok := p.(checkedPropagator); ok {
			if seen[c.name()] {
				errs = append(errs, fmt.Errorf("durable: Open: Propagators[%d] carries a second key named %q: their values would overwrite each other", i, c.name()))
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
func (q *Queue) withMetadata(ctx context.Context, md []byte, log *zap.Logger, item ItemID, name string) context.Context {
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
