package durable

import (
	"math"
	"time"
)

// Policy decides when a failed item is tried again and when it gives up. The zero value of each
// field means its default.
type Policy struct {
	// MaxAttempts is the number of durable attempts (scheduler dispatches) after which a failed
	// item becomes dead. In-process attempts made before the item was deferred do not count,
	// nor do attempts interrupted by a scheduler's shutdown (Item.Interruptions).
	// Default 10.
	MaxAttempts int
	// Initial is the delay after the first failure (and before the first attempt of a deferred
	// item). Default 1 s.
	Initial time.Duration
	// Multiplier grows the delay after each further failure. Default 2. Values below 1 mean 1.
	Multiplier float64
	// Max caps the delay before jitter. Default 1 h.
	Max time.Duration
	// Jitter spreads each delay uniformly by ± this fraction of it, so items that failed
	// together do not return together. Default 0.1; negative means none; capped at 1.
	Jitter float64
}

// DefaultPolicy is the policy used when none is given; every field holds its default.
var DefaultPolicy = Policy{MaxAttempts: 10, Initial: time.Second, Multiplier: 2, Max: time.Hour, Jitter: 0.1}

func (p Policy) withDefaults() Policy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultPolicy.MaxAttempts
	}
	if p.Initial <= 0 {
		p.Initial = DefaultPolicy.Initial
	}
	if p.Multiplier == 0 {
		p.Multiplier = DefaultPolicy.Multiplier
	}
	if p.Multiplier < 1 || math.IsNaN(p.Multiplier) {
		p.Multiplier = 1
	}
	if p.Max <= 0 {
		p.Max = DefaultPolicy.Max
	}
	if p.Max < p.Initial {
		p.Max = p.Initial
	}
	switch {
	case p.Jitter == 0:
		p.Jitter = DefaultPolicy.Jitter
	case p.Jitter < 0 || math.IsNaN(p.Jitter):
		p.Jitter = 0
	case p.Jitter > 1:
		p.Jitter = 1
	}
	return p
}

// Delay returns the wait after failed attempt n (n ≥ 1): min(Initial × Multiplier^(n−1), Max),
// spread by ± Jitter using r, a uniform random number in [0, 1) (0.5 means no spread). It never
// overflows: a huge n or multiplier yields Max.
func (p Policy) Delay(n int, r float64) time.Duration {
	p = p.withDefaults()
	if n < 1 {
		n = 1
	}
	d := float64(p.Max)
	// Initial × Multiplier^(n−1) computed in floating point: an overflow becomes +Inf, which
	// the cap turns into Max.
	if g := float64(p.Initial) * math.Pow(p.Multiplier, float64(n-1)); g < d {
		d = g
	}
	if p.Jitter > 0 {
		if r < 0 || r >= 1 || math.IsNaN(r) {
			r = 0.5
		}
		d *= 1 + p.Jitter*(2*r-1)
	}
	if d >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return max(0, time.Duration(d))
}
