package bulkhead

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/mediator"
)

// ErrFull reports a call rejected because its bulkhead had no free slot.
var ErrFull = errors.New("bulkhead: full")

// FullError reports a call rejected by a bulkhead. It matches ErrFull and is a
// behaviors.Refusal, so a breaker does not count it: it says nothing about the dependency's
// health.
type FullError struct {
	// Key is the bulkhead's key.
	Key string
	// Limit is the bulkhead's concurrency limit.
	Limit int

	req any // the request refused; see Request
}

// Error names the key and the limit.
func (e *FullError) Error() string {
	return fmt.Sprintf("bulkhead: %q full (%d concurrent calls)", e.Key, e.Limit)
}

// Is reports whether target is ErrFull.
func (e *FullError) Is(target error) bool { return target == ErrFull }

// Retryable reports false: a full bulkhead says the caller is sending too much at once, and
// retrying at once only adds to it.
func (e *FullError) Retryable() bool { return false }

// Refusal implements behaviors.Refusal: By "bulkhead", the bulkhead's Key, and the request it
// refused (nil for a FullError made by hand).
func (e *FullError) Refusal() behaviors.RefusalInfo {
	return behaviors.RefusalInfo{By: "bulkhead", Key: e.Key, Request: e.req}
}

// Config configures New.
type Config struct {
	// Limit is the number of calls per key that may run at once. Required: at least 1, since
	// no limit suits every dependency.
	Limit int
	// MaxWait is how long a call waits for a free slot before it is rejected. Default 0:
	// rejected at once, so that a saturated dependency does not also hold its callers.
	MaxWait time.Duration
	// Key maps a request to its bulkhead's key. nil: one bulkhead per request type, keyed by
	// behaviors.TypeKey, because a request type usually names one dependency.
	Key behaviors.KeyFunc
	// Clock is the time source of the wait. nil: behaviors.SystemClock.
	Clock behaviors.Clock
}

// Validate reports a limit below 1 or a negative wait.
func (c Config) Validate() error {
	if c.Limit < 1 {
		return errors.New("bulkhead limit must be at least 1")
	}
	if c.MaxWait < 0 {
		return errors.New("bulkhead MaxWait must not be negative")
	}
	return nil
}

// Behavior is the bulkhead behavior: it lets at most Limit calls per key run at once; a call
// that finds no free slot (within MaxWait) fails with a *FullError, which breakers do not
// count and retry does not retry. It is in mediator.StageDefault at behaviors.BulkheadOrder,
// innermost, so a slot is held only while the handler runs.
type Behavior struct {
	cfg   Config
	clock behaviors.Clock
	fixed *slots // the request type's slots, bound at Build when Key is nil

	mu    sync.Mutex
	byKey map[string]*slots
	typed map[string]*slots // slots bound per request type, for InFlight
}

type slots struct {
	key  string
	sem  chan struct{}
	refs int // guarded by Behavior.mu; keyed slots are dropped when no call holds or awaits them
}

// New returns a bulkhead behavior configured by cfg. It does not validate cfg: Validate does,
// and mediator's Build calls it, so that Build reports every invalid behavior at once.
func New(cfg Config) *Behavior {
	b := &Behavior{cfg: cfg, clock: cfg.Clock, byKey: map[string]*slots{}, typed: map[string]*slots{}}
	if b.clock == nil {
		b.clock = behaviors.SystemClock
	}
	return b
}

// Placement implements mediator.PlacedBehavior: Explain shows it as "bulkhead", in
// mediator.StageDefault, at behaviors.BulkheadOrder (see the table of orders in package behaviors).
func (b *Behavior) Placement() mediator.Placement {
	return mediator.Placement{Name: "bulkhead", Stage: mediator.StageDefault, Order: behaviors.BulkheadOrder}
}

// Validate reports what Config.Validate reports.
func (b *Behavior) Validate() error { return b.cfg.Validate() }

// Bind gives each request type its own slots when no key function was given.
func (b *Behavior) Bind(info mediator.RequestInfo) (mediator.Behavior, error) {
	if b.cfg.Key != nil {
		return b, nil
	}
	s := &slots{key: behaviors.TypeKey(info.Request), sem: make(chan struct{}, b.cfg.Limit)}
	b.mu.Lock()
	b.typed[s.key] = s
	b.mu.Unlock()
	return &Behavior{cfg: b.cfg, clock: b.clock, fixed: s}, nil
}

// Handle runs next in a slot.
func (b *Behavior) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	s := b.fixed
	if s == nil {
		s = b.acquireKey(b.keyOf(req))
		defer b.releaseKey(s)
	}
	if err := b.enter(ctx, s); err != nil {
		if bf, ok := err.(*FullError); ok {
			bf.req = req
		}
		return nil, err
	}
	defer func() { <-s.sem }()
	return next(ctx, req)
}

// keyOf is req's key: Config.Key's, else its type's (for a Behavior used without Build).
func (b *Behavior) keyOf(req any) string {
	if b.cfg.Key != nil {
		return b.cfg.Key(req)
	}
	return behaviors.TypeKey(reflect.TypeOf(req))
}

func (b *Behavior) enter(ctx context.Context, s *slots) error {
	select {
	case s.sem <- struct{}{}:
		return nil
	default:
	}
	if b.cfg.MaxWait > 0 {
		ch, stop := b.clock.After(b.cfg.MaxWait)
		select {
		case s.sem <- struct{}{}:
			stop()
			return nil
		case <-ctx.Done():
			stop()
			return ctx.Err()
		case <-ch:
		}
	}
	return &FullError{Key: s.key, Limit: b.cfg.Limit}
}

func (b *Behavior) acquireKey(key string) *slots {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.byKey[key]
	if s == nil {
		s = &slots{key: key, sem: make(chan struct{}, b.cfg.Limit)}
		b.byKey[key] = s
	}
	s.refs++
	return s
}

func (b *Behavior) releaseKey(s *slots) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.refs--; s.refs == 0 {
		delete(b.byKey, s.key)
	}
}

// InFlight returns the number of calls holding a slot of key (a request type's behaviors.TypeKey when
// no key function was given).
func (b *Behavior) InFlight(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.typed[key]; s != nil {
		return len(s.sem)
	}
	if s := b.byKey[key]; s != nil {
		return len(s.sem)
	}
	return 0
}
