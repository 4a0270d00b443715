package durable

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Policy decides when a failed item is tried again and when it gives up. The zero value of each
// field means its default. Validate reports fields set to values outside their range; Open
// (Config.Policy) and Register (WithPolicy) refuse such a policy.
type Policy struct {
	// MaxAttempts is the number of durable attempts (scheduler dispatches) after which a failed
	// item becomes dead. In-process attempts made before the item was deferred do not count,
	// nor do attempts interrupted by a scheduler's shutdown (Item.Interruptions). Must not be
	// negative. Default 10: with the default delays the attempts span about eight and a half
	// minutes, enough to outlast a restart or failover of the downstream; raise it for
	// downstreams whose outages last longer.
	MaxAttempts int
	// Initial is the delay after the first failure (and before the first attempt of a deferred
	// item). Must not be negative; an Initial above Max waits Max. Default 1 s: long enough
	// for a blip to pass, short enough that a deferred item is not noticeably late.
	Initial time.Duration
	// Multiplier grows the delay after each further failure. When set, it must be a finite
	// number of at least 1 (1 keeps the delay at Initial). Default 2: the delay doubles, the
	// usual exponential backoff, so a long outage costs few attempts.
	Multiplier float64
	// Max caps every delay, jitter included: a delay at the cap is only ever spread downwards,
	// as the in-process retry behavior does, so Delay never returns more than Max. Must not be
	// negative. Default 1 h: however many attempts a policy allows, the backoff stays short
	// enough that a failing item runs again soon after its downstream recovers.
	Max time.Duration
	// Jitter spreads each delay uniformly by ± this fraction of it, so items that failed
	// together do not return together. Must not be NaN or above 1 (1 spreads a delay between 0
	// and twice its value, within Max); negative means no jitter. Default 0.1: enough to
	// spread a burst of failures without making due times hard to predict.
	Jitter float64
}

// DefaultPolicy is the policy used when none is given; every field holds its default.
var DefaultPolicy = Policy{MaxAttempts: 10, Initial: time.Second, Multiplier: 2, Max: time.Hour, Jitter: 0.1}

// ErrInvalidPolicy reports a Policy field set to a value outside its range. Policy.Validate
// returns one *InvalidPolicyError per invalid field, joined.
var ErrInvalidPolicy = errors.New("durable: invalid policy")

// InvalidPolicyError names one invalid field of a Policy and its value. It matches
// ErrInvalidPolicy.
type InvalidPolicyError struct {
	// Field is the name of the Policy field, such as "Multiplier".
	Field string
	// Value is the field's value: an int, a time.Duration or a float64.
	Value any
	// Problem says what is wrong with the value, such as "is negative".
	Problem string
}

// Error names the field, its value and the problem.
func (e *InvalidPolicyError) Error() string {
	return fmt.Sprintf("durable: invalid policy: %s %v %s", e.Field, e.Value, e.Problem)
}

// Is reports whether target is ErrInvalidPolicy.
func (e *InvalidPolicyError) Is(target error) bool { return target == ErrInvalidPolicy }

// Validate reports every field set to an invalid value, each as an *InvalidPolicyError, joined
// with errors.Join; nil when p is valid. Zero fields are valid: they take their defaults.
func (p Policy) Validate() error {
	var errs []error
	bad := func(field string, value any, problem string) {
		errs = append(errs, &InvalidPolicyError{Field: field, Value: value, Problem: problem})
	}
	if p.MaxAttempts < 0 {
		bad("MaxAttempts", p.MaxAttempts, "is negative")
	}
	if p.Initial < 0 {
		bad("Initial", p.Initial, "is negative")
	}
	if p.Max < 0 {
		bad("Max", p.Max, "is negative")
	}
	if p.Multiplier != 0 && (!(p.Multiplier >= 1) || math.IsInf(p.Multiplier, 0)) {
		bad("Multiplier", p.Multiplier, "is not a finite number of at least 1")
	}
	if math.IsNaN(p.Jitter) || p.Jitter > 1 {
		bad("Jitter", p.Jitter, "is not a number of at most 1")
	}
	return errors.Join(errs...)
}

// withDefaults returns p with its zero fields set to their defaults, and the fields Validate
// rejects clamped into range, so that Delay is defined for every policy.
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
	if !(p.Multiplier >= 1) { // below 1 or NaN
		p.Multiplier = 1
	}
	if p.Max <= 0 {
		p.Max = DefaultPolicy.Max
	}
	p.Initial = min(p.Initial, p.Max)
	switch {
	case p.Jitter == 0:
		p.Jitter = DefaultPolicy.Jitter
	case p.Jitter < 0 || math.IsNaN(p.Jitter):
		// No jitter. It stays negative, so that applying the defaults again (Delay does, on
		// the policy the queue resolved for an item) does not turn it into the default.
		p.Jitter = -1
	case p.Jitter > 1:
		p.Jitter = 1
	}
	return p
}

// Delay returns the wait after failed attempt n (n ≥ 1): min(Initial × Multiplier^(n−1), Max),
// spread by ± Jitter using r, a uniform random number in [0, 1) (0.5 means no spread), and
// capped at Max again. It never overflows: a huge n or multiplier yields Max.
//
// Delay does not validate p: zero fields take their defaults, and fields Validate rejects are
// clamped (a negative Initial or Max takes its default, a Multiplier below 1 or NaN means 1,
// an infinite one yields Max after the first failure, a Jitter above 1 means 1, a NaN Jitter
// none).
func (p Policy) Delay(n int, r float64) time.Duration {
	p = p.withDefaults()
	if n < 1 {
		n = 1
	}
	maxD := float64(p.Max)
	d := maxD
	// Initial × Multiplier^(n−1) computed in floating point: an overflow becomes +Inf, which
	// the cap turns into Max.
	if g := float64(p.Initial) * math.Pow(p.Multiplier, float64(n-1)); g < d {
		d = g
	}
	if p.Jitter > 0 {
		if r < 0 || r >= 1 || math.IsNaN(r) {
			r = 0.5
		}
		d = min(d*(1+p.Jitter*(2*r-1)), maxD)
	}
	if d >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return max(0, time.Duration(d))
}
