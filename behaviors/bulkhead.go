package behaviors

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"time"

	"github.com/switchboard-go/switchboard/mediator"
)

// BulkheadConfig configures NewBulkhead.
type BulkheadConfig struct {
	// Limit is the number of calls per key that may run at once. Required: at least 1.
	Limit int
	// MaxWait is how long a call waits for a free slot before it is rejected. Default 0:
	// rejected at once.
	MaxWait time.Duration
	// Key maps a request to its bulkhead's key. nil: one bulkhead per request type.
	Key KeyFunc
	// Clock is the time source of the wait. nil: SystemClock.
	Clock Clock
}

// Bulkhead is a behavior that lets at most Limit calls per key run at once; a call that finds
// no free slot (within MaxWait) fails with a *BulkheadFullError, which breakers do not count
// and Retry does not retry. It is in StageDefault at BulkheadOrder, innermost, so a slot is
// held only while the handler runs.
type Bulkhead struct {
	cfg   BulkheadConfig
	clock Clock
	fixed *slots // the request type's slots, bound at Build when Key is nil

	mu    sync.Mutex
	byKey map[string]*slots
	typed map[string]*slots // slots bound per request type, for InFlight
}

type slots struct {
	key  string
	sem  chan struct{}
	refs int // guarded by Bulkhead.mu; keyed slots are dropped when no call holds or awaits them
}

// NewBulkhead returns a Bulkhead behavior configured by cfg.
func NewBulkhead(cfg BulkheadConfig) *Bulkhead {
	return &Bulkhead{cfg: cfg, clock: clockOr(cfg.Clock), byKey: map[string]*slots{}, typed: map[string]*slots{}}
}

// Name returns "bulkhead".
func (b *Bulkhead) Name() string { return "bulkhead" }

// Stage returns mediator.StageDefault.
func (b *Bulkhead) Stage() mediator.Stage { return mediator.StageDefault }

// Order returns BulkheadOrder.
func (b *Bulkhead) Order() int { return BulkheadOrder }

// Validate reports a limit below 1 or a negative wait.
func (b *Bulkhead) Validate() error {
	if b.cfg.Limit < 1 {
		return errors.New("bulkhead limit must be at least 1")
	}
	if b.cfg.MaxWait < 0 {
		return errors.New("bulkhead MaxWait must not be negative")
	}
	return nil
}

// Bind gives each request type its own slots when no key function was given.
func (b *Bulkhead) Bind(info mediator.RequestInfo) (mediator.Behavior, error) {
	if b.cfg.Key != nil {
		return b, nil
	}
	s := &slots{key: TypeKey(info.Request), sem: make(chan struct{}, b.cfg.Limit)}
	b.mu.Lock()
	b.typed[s.key] = s
	b.mu.Unlock()
	return &Bulkhead{cfg: b.cfg, clock: b.clock, fixed: s}, nil
}

// Handle runs next in a slot.
func (b *Bulkhead) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	s := b.fixed
	if s == nil {
		key := TypeKey(reflect.TypeOf(req))
		if b.cfg.Key != nil {
			key = b.cfg.Key(req)
		}
		s = b.acquireKey(key)
		defer b.releaseKey(s)
	}
	if err := b.enter(ctx, s); err != nil {
		if bf, ok := err.(*BulkheadFullError); ok {
			bf.req = req
		}
		return nil, err
	}
	defer func() { <-s.sem }()
	return next(ctx, req)
}

func (b *Bulkhead) enter(ctx context.Context, s *slots) error {
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
	return &BulkheadFullError{Key: s.key, Limit: b.cfg.Limit}
}

func (b *Bulkhead) acquireKey(key string) *slots {
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

func (b *Bulkhead) releaseKey(s *slots) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.refs--; s.refs == 0 {
		delete(b.byKey, s.key)
	}
}

// InFlight returns the number of calls holding a slot of key (a request type's TypeKey when
// no key function was given).
func (b *Bulkhead) InFlight(key string) int {
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
