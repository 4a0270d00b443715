package durable

import "time"

// Clock tells the time used for due times, leases and attempt timestamps. Inject a fake one in
// tests to make items due or leases expire without waiting. Polling, heartbeat and sweep
// intervals are measured with real timers whatever the Clock says.
type Clock interface {
	Now() time.Time
}

// ClockFunc adapts a function to a Clock.
type ClockFunc func() time.Time

// Now calls f.
func (f ClockFunc) Now() time.Time { return f() }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// SystemClock is the wall clock; the default Clock.
var SystemClock Clock = systemClock{}
