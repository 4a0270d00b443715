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
	failed   map[string]bool // the ops that failed since the calls last recovered
}

// who is the instance field of h's lines.
func (h *Health) who() zap.Field {
	if h.Instance == "" {
		return zap.Skip()
	}
	return zap.String("instance", h.Instance)
}

// Note records the outcome of one call named op: Failed for an error; otherwise a success,
// which ends the failures only if op itself failed since they began. Several services share
// one Health, and a call that was already under way on a connection opened before the outage
// (another op's, sent before the first failure) may still succeed: it says nothing of the
// calls sent since. A later call of an op that failed does.
func (h *Health) Note(op string, err error) {
	if err != nil {
		h.Failed(op, err)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failing && h.failed[op] {
		h.recoveredLocked()
	}
}

// Failed records a failed call named op.
func (h *Health) Failed(op string, err error) {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failures++
	if h.failed == nil {
		h.failed = map[string]bool{}
	}
	h.failed[op] = true
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

// OK records a call that succeeded, of a caller whose calls are one at a time (a store's poll):
// after failures, one line says the calls recovered.
func (h *Health) OK() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failing {
		h.recoveredLocked()
	}
}

// recoveredLocked ends the failures with one line, h.mu held.
func (h *Health) recoveredLocked() {
	h.failing = false
	clear(h.failed)
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
