package retry_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/retry"
)

func TestPolicyDefaults(t *testing.T) {
	p := retry.Policy{}.Resolved()
	if p.MaxAttempts != 1 || p.Strategy != retry.Fixed || p.BaseDelay != 500*time.Millisecond ||
		p.Multiplier != 2 || p.MaxDelay != 30*time.Second || p.Jitter != behaviors.Off ||
		p.RetryOnTimeout != behaviors.Off || p.RetryOnTransport != behaviors.Off || p.WaitForBreaker != behaviors.Off || p.MaxAge != 0 {
		t.Fatalf("defaults %+v", p)
	}
}

func TestPolicyDelay(t *testing.T) {
	exp := retry.Policy{Strategy: retry.Exponential, BaseDelay: 200 * time.Millisecond, MaxDelay: 5 * time.Second}
	for n, want := range map[int]time.Duration{1: 200 * time.Millisecond, 2: 400 * time.Millisecond, 3: 800 * time.Millisecond, 5: 3200 * time.Millisecond, 6: 5 * time.Second, 10_000: 5 * time.Second} {
		if got := exp.Delay(n, rand.Float64()); got != want {
			t.Errorf("exponential Delay(%d) = %s, want %s", n, got, want)
		}
	}
	fixed := retry.Policy{}
	if fixed.Delay(1, 0) != 500*time.Millisecond || fixed.Delay(7, 0.9) != 500*time.Millisecond {
		t.Error("fixed delay")
	}
	j := retry.Policy{BaseDelay: time.Second, Jitter: behaviors.On}
	seen := map[time.Duration]bool{}
	for range 100 {
		d := j.Delay(1, rand.Float64())
		if d < 900*time.Millisecond || d > 1100*time.Millisecond {
			t.Fatalf("jittered delay %s outside ±10%%", d)
		}
		seen[d] = true
	}
	if len(seen) < 10 {
		t.Fatal("jitter does not vary")
	}
	// The draw decides the spread: 0 is -10 %, 0.5 none, just below 1 almost +10 %; a draw
	// outside [0, 1) or NaN means no spread. An attempt below 1 counts as the first.
	for r, want := range map[float64]time.Duration{0: 900 * time.Millisecond, 0.5: time.Second, 0.75: 1050 * time.Millisecond,
		-1: time.Second, 1: time.Second, 7: time.Second, math.NaN(): time.Second, math.Inf(1): time.Second} {
		if got := j.Delay(1, r); got != want {
			t.Errorf("jittered Delay(1, %v) = %s, want %s", r, got, want)
		}
	}
	if exp.Delay(0, 0.5) != 200*time.Millisecond || exp.Delay(-3, 0.5) != 200*time.Millisecond {
		t.Error("an attempt below 1 is not the first")
	}
	// At the cap the spread only goes down.
	capped := retry.Policy{BaseDelay: time.Second, MaxDelay: time.Second, Jitter: behaviors.On}
	if capped.Delay(1, 0.99) != time.Second || capped.Delay(1, 0) != 900*time.Millisecond {
		t.Error("jitter at the cap")
	}
	// A behavior's Rand makes its jittered delays predictable.
	var delays []time.Duration
	rt := retry.New(retry.Config{
		Policy:  retry.Policy{MaxAttempts: 3, BaseDelay: time.Millisecond, Jitter: behaviors.On},
		Rand:    func() float64 { return 0 },
		OnRetry: []func(context.Context, retry.Event){func(_ context.Context, e retry.Event) { delays = append(delays, e.Delay) }},
	})
	_, _ = rt.Handle(context.Background(), nil, func(context.Context, any) (any, error) { return nil, &statusErr{Code: 503} })
	if len(delays) != 2 || delays[0] != 900*time.Microsecond || delays[1] != 900*time.Microsecond {
		t.Errorf("delays with Rand 0: %v", delays)
	}
	// The backoff.BackOff of a policy stops after MaxAttempts-1 delays.
	bo := retry.Policy{MaxAttempts: 3, BaseDelay: time.Second}.NewBackOff()
	if a, b, c := bo.NextBackOff(), bo.NextBackOff(), bo.NextBackOff(); a != time.Second || b != time.Second || c != backoff.Stop {
		t.Fatal(a, b, c)
	}
	bo.Reset()
	if bo.NextBackOff() != time.Second {
		t.Fatal("reset")
	}
}

func TestPolicyValidate(t *testing.T) {
	bad := []retry.Policy{
		{MaxAttempts: -1}, {BaseDelay: -1}, {MaxDelay: -1}, {Multiplier: 0.5}, {Multiplier: math.NaN()},
		{Multiplier: math.Inf(1)}, {Strategy: 9}, {Jitter: 7}, {MaxAge: -1},
	}
	for _, p := range bad {
		if p.Validate() == nil {
			t.Errorf("%+v accepted", p)
		}
	}
	for _, p := range []retry.Policy{{MaxAttempts: 3, Multiplier: 1.5}, {Multiplier: 1}, {Multiplier: 1e308}, {MaxAge: time.Nanosecond}} {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
	// A negative MaxAge is named, beside every other invalid field.
	err := retry.Policy{MaxAge: -time.Second, BaseDelay: -1}.Validate()
	var ie *retry.InvalidPolicyError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "retry: invalid retry policy: MaxAge -1s is negative") ||
		!strings.Contains(err.Error(), "BaseDelay -1ns is negative") {
		t.Fatalf("negative MaxAge: %v", err)
	}
}

func policyOf(attempts int, strategy, jitter, timeout, wait uint8, base, maxD int64, mult float64, codes int8, age int64) retry.Policy {
	p := retry.Policy{
		MaxAttempts:    attempts,
		Strategy:       retry.Strategy(strategy % 3),
		BaseDelay:      time.Duration(base),
		MaxDelay:       time.Duration(maxD),
		Multiplier:     mult,
		Jitter:         behaviors.Switch(jitter % 3),
		RetryOnTimeout: behaviors.Switch(timeout % 3),
		WaitForBreaker: behaviors.Switch(wait % 3),
		// The wait byte's higher digits in base 3 give RetryOnTransport.
		RetryOnTransport: behaviors.Switch(wait / 3 % 3),
		MaxAge:           time.Duration(age),
	}
	if codes >= 0 {
		p.RetryableStatusCodes = make([]int, codes%4)
	}
	return p
}

// Merging takes every set field of the upper layer and keeps the lower layer's value for
// every unset one; unset over anything is the identity.
func FuzzPolicyMerge(f *testing.F) {
	f.Add(3, uint8(2), uint8(1), uint8(0), uint8(2), int64(200e6), int64(5e9), 2.0, int8(-1), int64(0),
		0, uint8(0), uint8(2), uint8(1), uint8(0), int64(0), int64(1e9), 0.0, int8(2), int64(3e9))
	f.Add(0, uint8(0), uint8(0), uint8(0), uint8(0), int64(0), int64(0), 0.0, int8(-1), int64(2e9),
		1, uint8(1), uint8(0), uint8(0), uint8(1), int64(-5), int64(0), 1.5, int8(0), int64(0))
	f.Fuzz(func(t *testing.T,
		a1 int, s1, j1, t1, w1 uint8, b1, m1 int64, x1 float64, c1 int8, g1 int64,
		a2 int, s2, j2, t2, w2 uint8, b2, m2 int64, x2 float64, c2 int8, g2 int64) {
		lo := policyOf(a1, s1, j1, t1, w1, b1, m1, x1, c1, g1)
		hi := policyOf(a2, s2, j2, t2, w2, b2, m2, x2, c2, g2)
		got := lo.Merge(hi)
		pick := func(set bool, h, l any) any {
			if set {
				return h
			}
			return l
		}
		check := func(name string, got, want any) {
			if g, w := got, want; g != w && !(isNaN(g) && isNaN(w)) {
				t.Fatalf("%s = %v, want %v (lo %+v, hi %+v)", name, g, w, lo, hi)
			}
		}
		check("MaxAttempts", got.MaxAttempts, pick(hi.MaxAttempts != 0, hi.MaxAttempts, lo.MaxAttempts))
		check("Strategy", got.Strategy, pick(hi.Strategy != 0, hi.Strategy, lo.Strategy))
		check("BaseDelay", got.BaseDelay, pick(hi.BaseDelay != 0, hi.BaseDelay, lo.BaseDelay))
		check("MaxDelay", got.MaxDelay, pick(hi.MaxDelay != 0, hi.MaxDelay, lo.MaxDelay))
		check("Multiplier", got.Multiplier, pick(hi.Multiplier != 0, hi.Multiplier, lo.Multiplier))
		check("Jitter", got.Jitter, pick(hi.Jitter != 0, hi.Jitter, lo.Jitter))
		check("RetryOnTimeout", got.RetryOnTimeout, pick(hi.RetryOnTimeout != 0, hi.RetryOnTimeout, lo.RetryOnTimeout))
		check("WaitForBreaker", got.WaitForBreaker, pick(hi.WaitForBreaker != 0, hi.WaitForBreaker, lo.WaitForBreaker))
		check("RetryOnTransport", got.RetryOnTransport, pick(hi.RetryOnTransport != 0, hi.RetryOnTransport, lo.RetryOnTransport))
		check("MaxAge", got.MaxAge, pick(hi.MaxAge != 0, hi.MaxAge, lo.MaxAge))
		wantCodes := lo.RetryableStatusCodes
		if hi.RetryableStatusCodes != nil {
			wantCodes = hi.RetryableStatusCodes
		}
		if (got.RetryableStatusCodes == nil) != (wantCodes == nil) || len(got.RetryableStatusCodes) != len(wantCodes) {
			t.Fatalf("codes %v, want %v", got.RetryableStatusCodes, wantCodes)
		}
		// Identity and associativity.
		same(t, lo.Merge(retry.Policy{}), lo)
		same(t, retry.Policy{}.Merge(hi), hi)
		mid := policyOf(a2^a1, s1^s2, j2, t1, w2, b1^b2, m2, x1, c1, g1^g2)
		same(t, lo.Merge(mid).Merge(hi), lo.Merge(mid.Merge(hi)))
		// The resolved policy has every field set, but MaxAge and Classifier, whose defaults are
		// none; MaxAge is the merged one.
		r := got.Resolved()
		if r.MaxAge != got.MaxAge {
			t.Fatalf("resolved MaxAge %s, merged %s", r.MaxAge, got.MaxAge)
		}
		if r.MaxAttempts == 0 || r.Strategy == 0 || r.BaseDelay == 0 || r.MaxDelay == 0 || r.Multiplier == 0 ||
			r.Jitter == 0 || r.RetryOnTimeout == 0 || r.WaitForBreaker == 0 || r.RetryOnTransport == 0 || r.RetryableStatusCodes == nil {
			t.Fatalf("resolved %+v has unset fields", r)
		}
	})
}

func isNaN(v any) bool {
	f, ok := v.(float64)
	return ok && math.IsNaN(f)
}

func same(t *testing.T, a, b retry.Policy) {
	t.Helper()
	if a.MaxAttempts != b.MaxAttempts || a.Strategy != b.Strategy || a.BaseDelay != b.BaseDelay ||
		a.MaxDelay != b.MaxDelay || (a.Multiplier != b.Multiplier && !(math.IsNaN(a.Multiplier) && math.IsNaN(b.Multiplier))) ||
		a.Jitter != b.Jitter || a.RetryOnTimeout != b.RetryOnTimeout || a.WaitForBreaker != b.WaitForBreaker ||
		a.RetryOnTransport != b.RetryOnTransport || a.MaxAge != b.MaxAge ||
		len(a.RetryableStatusCodes) != len(b.RetryableStatusCodes) || (a.RetryableStatusCodes == nil) != (b.RetryableStatusCodes == nil) {
		t.Fatalf("%+v != %+v", a, b)
	}
}

// Delays are never negative, never above the resolved MaxDelay and do not overflow, for any
// field values and any attempt up to and past 10,000.
func FuzzBackoffDelay(f *testing.F) {
	f.Add(uint8(2), int64(500e6), int64(30e9), 2.0, uint8(1), 10_000, 0.5)
	f.Add(uint8(2), int64(math.MaxInt64), int64(math.MaxInt64), 1e308, uint8(1), 10_000, 0.5)
	f.Add(uint8(1), int64(-1), int64(-1), -3.0, uint8(2), 1, 0.0)
	f.Add(uint8(2), int64(1), int64(math.MaxInt64), math.Inf(1), uint8(1), math.MaxInt, 0.5)
	f.Add(uint8(2), int64(1), int64(0), math.NaN(), uint8(0), -5, math.NaN())
	f.Fuzz(func(t *testing.T, strategy uint8, base, maxD int64, mult float64, jitter uint8, n int, r float64) {
		p := retry.Policy{
			Strategy:   retry.Strategy(strategy % 3),
			BaseDelay:  time.Duration(base),
			MaxDelay:   time.Duration(maxD),
			Multiplier: mult,
			Jitter:     behaviors.Switch(jitter % 3),
		}
		limit := max(p.Resolved().MaxDelay, 0)
		for _, k := range []int{n, 1, 2, 63, 64, 1000, 10_000, 10_001} {
			d := p.Delay(k, r)
			if d < 0 || d > limit {
				t.Fatalf("Delay(%d) = %s outside [0, %s] for %+v", k, d, limit, p)
			}
		}
		// Monotone without jitter: a later retry never waits less.
		if p.Jitter != behaviors.On && n > 1 && n < 1<<20 && p.Delay(n, r) < p.Delay(n-1, r) {
			t.Fatalf("Delay(%d) = %s < Delay(%d) = %s", n, p.Delay(n, r), n-1, p.Delay(n-1, r))
		}
	})
}

// A MaxDelay shorter than the BaseDelay it caps would cut every delay to MaxDelay without a
// word: it is an error, naming both, whether one layer sets both or the layer's BaseDelay
// passes the MaxDelay of the default below it (the behavior validates its layer over
// DefaultPolicy).
func TestPolicyMaxDelayShorterThanBaseDelayIsInvalid(t *testing.T) {
	err := retry.Policy{BaseDelay: 2 * time.Second, MaxDelay: time.Second}.Validate()
	var ip *retry.InvalidPolicyError
	if !errors.As(err, &ip) || ip.Field != "MaxDelay" || !strings.Contains(err.Error(), "BaseDelay 2s") {
		t.Fatalf("Validate: %v", err)
	}
	if err := (retry.Policy{BaseDelay: time.Second, MaxDelay: time.Second}).Validate(); err != nil {
		t.Fatalf("equal delays: %v", err)
	}
	err = retry.Config{Policy: retry.Policy{BaseDelay: time.Minute}}.Validate()
	if !errors.Is(err, retry.ErrInvalidPolicy) || !strings.Contains(err.Error(), "MaxDelay 30s") {
		t.Fatalf("a BaseDelay over the default MaxDelay: %v", err)
	}
}
