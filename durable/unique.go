package durable

import (
	"fmt"
	"time"
)

// WithUniqueFor holds the item's dedupe key (WithDedupeKey, or the request's DedupeKey method)
// for d after the item succeeded, not only while it is pending or running: until then an
// Enqueue with the key inserts nothing and returns the item (Enqueued.Duplicate), as it does
// for an item still pending. An item that ends otherwise (dead, cancelled) releases the key at
// once. It overrides the registration's WithUniqueWindow; zero: none for this item. An Enqueue
// with a window and no dedupe key is an error, and so is a negative d.
func WithUniqueFor(d time.Duration) EnqueueOption {
	return func(c *enqueueConfig) { c.uniqueFor = &d }
}

// WithUniqueWindow is WithUniqueFor for every item of the registration that has a dedupe key:
// the key is held for d after the item succeeded. Items without a key have no window. An
// enqueue's WithUniqueFor overrides it. Register fails on a negative d.
func WithUniqueWindow(d time.Duration) RegisterOption {
	return func(r *registration) { r.uniqueFor = d }
}

// uniqueFor returns the window of an item of name enqueued with c and the dedupe key key:
// WithUniqueFor's, or its registration's when it has a key.
func (q *Queue) uniqueFor(name string, c enqueueConfig, key string) (time.Duration, error) {
	if c.uniqueFor == nil {
		if key == "" {
			return 0, nil
		}
		return q.reg.uniqueFor(name), nil
	}
	switch d := *c.uniqueFor; {
	case d < 0:
		return 0, fmt.Errorf("durable: Enqueue %s: WithUniqueFor %v is negative", name, d)
	case d > 0 && key == "":
		return 0, fmt.Errorf("durable: Enqueue %s: WithUniqueFor %v with no dedupe key: the window holds a key (WithDedupeKey, or the request's DedupeKey method)", name, d)
	default:
		return d, nil
	}
}
