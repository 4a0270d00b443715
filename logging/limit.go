package logging

import (
	"sync"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
)

// limiter lets one entry per key through every interval, for at most keys keys; the keys
// beyond share one window.
type limiter struct {
	clock behaviors.Clock
	every time.Duration
	keys  int

	mu       sync.Mutex
	windows  map[string]*window
	swept    time.Time // the last sweep
	overflow window    // the keys that did not fit
}

// window is one key's rate-limit state: when its last entry was let through, and how many
// were held back since.
type window struct {
	last       time.Time
	suppressed int
}

func newLimiter(clock behaviors.Clock, every time.Duration, keys int) *limiter {
	if clock == nil {
		clock = behaviors.SystemClock
	}
	return &limiter{clock: clock, every: every, keys: keys, windows: map[string]*window{}}
}

// allow reports whether an entry of key may be written now and, when it may, how many entries
// of key were held back since the last one written, and whether key shares the overflow
// window (the count is then that of every key in it).
func (l *limiter) allow(key string) (ok bool, suppressed int, shared bool) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.windows[key]
	if !ok {
		if len(l.windows) >= l.keys && now.Sub(l.swept) >= l.every {
			l.sweep(now) // at most once an interval: no window expires sooner
		}
		if len(l.windows) < l.keys {
			w = &window{}
			l.windows[key] = w
		} else {
			w = &l.overflow
		}
	}
	shared = w == &l.overflow
	if !w.last.IsZero() && now.Sub(w.last) < l.every {
		w.suppressed++
		return false, 0, shared
	}
	n := w.suppressed
	w.last, w.suppressed = now, 0
	return true, n, shared
}

// sweep forgets the windows whose interval has passed with nothing held back: the next entry
// of such a key is let through whether it is remembered or not. A window with entries held
// back is kept, so that its next entry counts them.
func (l *limiter) sweep(now time.Time) {
	l.swept = now
	for k, w := range l.windows {
		if w.suppressed == 0 && now.Sub(w.last) >= l.every {
			delete(l.windows, k)
		}
	}
}
