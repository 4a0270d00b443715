package behaviors

import (
	"context"
	"time"
)

// Clock is the time source of the behaviors that wait or measure time. The zero value of every
// Clock field in this package means SystemClock, which uses the time package; inside a
// testing/synctest bubble its time is the bubble's fake time.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives once d has passed, and a function that stops the
	// timer early.
	After(d time.Duration) (c <-chan time.Time, stop func() bool)
}

// SystemClock is the Clock of the time package.
var SystemClock Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) After(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

func clockOr(c Clock) Clock {
	if c == nil {
		return SystemClock
	}
	return c
}

// sleep waits for d on c, or until ctx is done; it returns ctx.Err() in that case.
func sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	ch, stop := c.After(d)
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		stop()
		return ctx.Err()
	}
}
