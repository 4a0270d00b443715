// Package dbhealth logs the failures of a database's calls without flooding the log: the first
// failure at once, then at most every Repeat while they go on, and one line when a call
// succeeds again. The queue's services (the claim loop, the gate, rescue, the notifier) and
// the fleet stores each keep one.
package dbhealth

import (
	"sync"
	"time"

	"go.uber.org/zap"
)

// Repeat is how often a database failure that persists is logged again.
const Repeat = 30 * time.Second

// Health is the failure state of one caller's database calls. Its zero value logs nothing: set
// Log.
type Health struct {
	// Log gets the lines.
	Log *zap.Logger
	// Instance names the instance in each line; empty: no instance field (a fleet store's).
	Instance string

	mu       sync.Mutex
	failing  bool
	since    time.Time
	failures int
	lastLog  time.Time
}

// who is the instance field of h's lines.
func (h *Health) who() zap.Field {
	if h.Instance == "" {
		return zap.Skip()
	}
	return zap.String("instance", h.Instance)
}

// Note records the outcome of one call named op: Failed for an error, OK otherwise.
func (h *Health) Note(op string, err error) {
	if err != nil {
		h.Failed(op, err)
	} else {
		h.OK()
	}
}

// Failed records a failed call named op.
func (h *Health) Failed(op string, err error) {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failures++
	switch {
	case !h.failing:
		h.failing, h.since, h.lastLog, h.failures = true, now, now, 1
		h.Log.Error("durable: database call failed", h.who(), zap.String("op", op), zap.Error(err))
	case now.Sub(h.lastLog) >= Repeat:
		h.lastLog = now
		h.Log.Error("durable: database calls still failing", h.who(), zap.String("op", op),
			zap.Error(err), zap.Int("failures", h.failures), zap.Time("since", h.since))
	}
}

// OK records a call that succeeded: after failures, one line says the calls recovered.
func (h *Health) OK() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.failing {
		return
	}
	h.failing = false
	h.Log.Info("durable: database calls recovered", h.who(), zap.Int("failures", h.failures),
		zap.Duration("after", time.Since(h.since)))
}

// Failures returns the number of calls that failed in a row; 0 while the calls succeed.
func (h *Health) Failures() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.failing {
		return 0
	}
	return h.failures
}
