package durabletest

import (
	"sync"
	"time"
)

// ManualClock is a behaviors.Clock that moves only when told to. Give the same ManualClock to the queue
// (durable.Config.Clock) and to a breaker registry (breaker.Config.Clock), then Advance it to
// make retries due, leases expire and breakers half-open, without waiting. Timers from After
// fire when Advance reaches their deadline. A ManualClock is safe for concurrent use.
type ManualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*clockTimer
}

type clockTimer struct {
	at time.Time
	ch chan time.Time
}

// NewManualClock returns a ManualClock that reads now until it is advanced.
func NewManualClock(now time.Time) *ManualClock { return &ManualClock{now: now} }

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that receives the clock's time once Advance has moved it d or more
// ahead, and a function that stops the timer (reporting whether it was still pending).
func (c *ManualClock) After(d time.Duration) (<-chan time.Time, func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &clockTimer{at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		return t.ch, func() bool { return false }
	}
	c.timers = append(c.timers, t)
	return t.ch, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, o := range c.timers {
			if o == t {
				c.timers = append(c.timers[:i], c.timers[i+1:]...)
				return true
			}
		}
		return false
	}
}

// Advance moves the clock d forward and fires the timers whose deadline it reached.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(c.now) {
			kept = append(kept, t)
			continue
		}
		t.ch <- c.now
	}
	clear(c.timers[len(kept):])
	c.timers = kept
}
