package durable

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// WithDebounce debounces the item by key: while an item of the same request type with the key
// is pending and no scheduler has claimed it yet, Enqueue stores no new item but updates that
// one (Enqueued.Debounced): its payload, metadata, breaker key (WithBreakerKey) and deadline
// become this enqueue's, and it is due window from now, but never later than maxDelay after
// the enqueue that stored it, so a steady stream of updates cannot put it off for ever. It
// keeps its id and its place in its ordering key's order. Once a scheduler has claimed the
// item (it runs, or waits for a retry), the next enqueue of the key stores a new item, which
// runs only after the claimed one has ended: a burst of updates of one record becomes one
// delivery of its last state, and an update made while a delivery runs is delivered after it.
//
// The key is non-empty UTF-8 without NUL, window positive, and maxDelay at least window
// (equal: the item runs window after the first enqueue, whatever follows). A dedupe key
// (WithDedupeKey, or the request's DedupeKey method), WithUniqueFor, WithToken, WithDelay and
// WithRunAt are refused beside it: each would decide what the debounce decides.
func WithDebounce(key string, window, maxDelay time.Duration) EnqueueOption {
	return func(c *enqueueConfig) { c.debounce = &debounceConfig{key: key, window: window, maxDelay: maxDelay} }
}

// debounceConfig is WithDebounce's arguments.
type debounceConfig struct {
	key              string
	window, maxDelay time.Duration
}

// checkDebounce refuses a WithDebounce of an enqueue of name configured by c that is wrong in
// itself or beside another option, naming every problem; dedupe is the item's dedupe key, from WithDedupeKey or the
// request's DedupeKey method.
func (c *enqueueConfig) checkDebounce(name, dedupe string) error {
	d := c.debounce
	if d == nil {
		return nil
	}
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if problem := keyProblem("debounce key", d.key); d.key == "" {
		fail("the key is empty")
	} else if problem != nil {
		fail("%v", problem)
	}
	if d.window <= 0 {
		fail("the window %v is not positive", d.window)
	}
	if d.maxDelay < d.window {
		fail("the maximum delay %v is shorter than the window %v", d.maxDelay, d.window)
	}
	switch {
	case dedupe != "" && c.dedupe != nil:
		fail("with WithDedupeKey(%q): a debounced enqueue updates the pending item of its key, where a dedupe key's enqueue would store nothing; give one of them", dedupe)
	case dedupe != "":
		fail("with the dedupe key %q of the request's DedupeKey method: a debounced enqueue updates the pending item of its key, where a dedupe key's enqueue would store nothing; WithDedupeKey(\"\") drops the request's key", dedupe)
	}
	if c.uniqueFor != nil && *c.uniqueFor != 0 {
		fail("with WithUniqueFor(%v): a uniqueness window holds a dedupe key, which a debounced item has none of", *c.uniqueFor)
	}
	if c.token != nil {
		fail("with WithToken(%q): a later enqueue of the key gives the item its own token, so the token cannot tell whether this enqueue was stored; enqueueing the latest payload again is what settles an unknown outcome", *c.token)
	}
	if c.after > 0 {
		fail("with WithDelay(%v): the window decides when the item is due", c.after)
	}
	if !c.at.IsZero() {
		fail("with WithRunAt(%v): the window decides when the item is due", c.at.Format(time.RFC3339Nano))
	}
	if len(problems) > 0 {
		return fmt.Errorf("durable: Enqueue %s: WithDebounce(%s, %v, %v): %s", name, strconv.Quote(d.key), d.window, d.maxDelay, strings.Join(problems, "; "))
	}
	return nil
}
