package behaviors

import "time"

// Clock is the one time source of the module's behaviors: those that wait or measure time take
// one. The zero value of every Clock field means SystemClock, which uses the time package;
// inside a testing/synctest bubble its time is the bubble's fake time.
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
