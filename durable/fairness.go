package durable

import (
	"fmt"
	"reflect"
	"time"

	"github.com/switchboard-go/switchboard/durable/driver"
)

// MaxPriority is the highest priority an item may have; 0, the lowest, is the default.
const MaxPriority = driver.MaxPriority

// DefaultPriorityAging is Config.PriorityAging's default: a minute per priority level.
const DefaultPriorityAging = time.Minute

// WithPriority sets the item's priority, 0 (the default) to MaxPriority: a higher priority item
// goes before the lower priority items that came due less than (the difference of the
// priorities × Config.PriorityAging) before it. Priorities order the items of one fairness key,
// and the keys' turns in one claim; they never take a turn from another key (see
// WithFairnessKey). It overrides the registration's WithDefaultPriority. Out of range: Enqueue
// fails, naming it, and stores nothing.
func WithPriority(p int) EnqueueOption { return func(c *enqueueConfig) { c.priority = &p } }

// WithDefaultPriority is WithPriority for every item of the registration that its enqueue
// gives no priority. Register fails on a priority out of range.
func WithDefaultPriority(p int) RegisterOption {
	return func(r *registration) { r.priority = p }
}

// WithFairnessKey sets the key the item is claimed in turn by. The claim takes the due items of
// different keys in turn, one of each key, then a second of each, and so on, so that a key's
// backlog (an endpoint back from an outage, a tenant's bulk import) delays no other key's items
// by more than a turn. Without it: the registration's WithFairness, else the request's method
// FairnessKey() string, else the key of the circuit breaker that guards the item (WithBreakerKey,
// WithBreaker, Config.Breakers: its endpoint), else the registration's name. An empty key is
// no key: the next of these that gives one applies. Keys should be
// few: endpoints, tenants, request types, not one per item, since a claim looks at each key
// that has pending items.
func WithFairnessKey(key string) EnqueueOption { return func(c *enqueueConfig) { c.fairKey = &key } }

// WithFairness sets the fairness key of the registration's items from their requests (see
// WithFairnessKey, which overrides it). Q must be the registered request type; Register fails
// otherwise, and on a nil key.
func WithFairness[Q any](key func(Q) string) RegisterOption {
	f := &fairness{keyType: reflect.TypeFor[Q]()}
	if key != nil {
		f.key = func(req any) string { return key(req.(Q)) }
	}
	return func(r *registration) { r.fairness = f }
}

// fairness is a registration's WithFairness.
type fairness struct {
	keyType reflect.Type
	key     func(req any) string
}

// fair is a request type that carries its own fairness key (see WithFairnessKey).
type fair interface{ FairnessKey() string }

// checkFairness reports what is wrong with reg's WithDefaultPriority and WithFairness.
func checkFairness(reg *registration) error {
	if reg.priority < 0 || reg.priority > MaxPriority {
		return fmt.Errorf("durable: Register %s: WithDefaultPriority %d is out of range 0..%d", reg.typ, reg.priority, MaxPriority)
	}
	if f := reg.fairness; f != nil {
		switch {
		case f.key == nil:
			return fmt.Errorf("durable: Register %s: WithFairness: nil key function", reg.typ)
		case f.keyType != reg.typ:
			return fmt.Errorf("durable: Register %s: WithFairness: the key function takes %s, not the registered type", reg.typ, f.keyType)
		}
	}
	return nil
}

// fairnessOf sets the priority, head start and fairness key of it, an item of req enqueued with c.
func (q *Queue) fairnessOf(it *driver.NewItem, req any, c enqueueConfig) error {
	reg := q.reg.lookupName(it.Name)
	switch {
	case c.priority != nil:
		it.Priority = *c.priority
	case reg != nil:
		it.Priority = reg.priority
	}
	if it.Priority < 0 || it.Priority > MaxPriority {
		return fmt.Errorf("durable: Enqueue %s: WithPriority %d is out of range 0..%d", it.Name, it.Priority, MaxPriority)
	}
	it.HeadStart = time.Duration(it.Priority) * q.priorityAging
	// The first key that is not empty: an empty one is no key.
	key := ""
	if c.fairKey != nil {
		key = *c.fairKey
	}
	if key == "" && reg != nil && reg.fairness != nil {
		key = reg.fairness.key(req)
	}
	if f, ok := req.(fair); key == "" && ok {
		key = f.FairnessKey()
	}
	if key == "" {
		key = it.GuardKey
	}
	if key == "" && reg != nil && reg.guard != nil {
		key = reg.guard.keyOf(req)
	}
	if key == "" && q.schedCfg.Breakers != nil {
		key = q.schedCfg.Breakers.KeyOf(req)
	}
	it.FairnessKey = key // empty: the store uses the registration's name
	return checkKey(it.Name, "fairness key", it.FairnessKey)
}
