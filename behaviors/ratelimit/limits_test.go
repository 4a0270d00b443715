package ratelimit_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/ratelimit"
	"github.com/switchboard-go/switchboard/mediator"
)

// keyedRun sends calls of several keys through limiters as fast as they let them (a few
// callers per key and limiter, each waiting up to the limiter's MaxWait), and counts each
// key's calls per second of fake time.
type keyedRun struct {
	t     *testing.T
	start time.Time
	ctx   context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup
	mu    sync.Mutex
	per   map[string]map[int]int
}

func newKeyedRun(t *testing.T) *keyedRun {
	ctx, stop := context.WithCancel(context.Background())
	return &keyedRun{t: t, start: time.Now(), ctx: ctx, stop: stop, per: map[string]map[int]int{}}
}

func (r *keyedRun) send(rl *ratelimit.Behavior, keys ...string) {
	m := build(r.t, func(_ context.Context, c *Call) (*Reply, error) {
		r.mu.Lock()
		if r.per[c.Endpoint] == nil {
			r.per[c.Endpoint] = map[int]int{}
		}
		r.per[c.Endpoint][int(time.Since(r.start)/time.Second)]++
		r.mu.Unlock()
		return &Reply{}, nil
	}, rl)
	for _, key := range keys {
		for range 4 {
			r.wg.Go(func() {
				for r.ctx.Err() == nil {
					_, err := mediator.Send(r.ctx, m, &Call{Endpoint: key})
					if le, ok := errors.AsType[*ratelimit.LimitedError](err); ok {
						time.Sleep(le.Wait)
					}
				}
			})
		}
	}
}

func (r *keyedRun) end() {
	r.stop()
	r.wg.Wait()
}

// total is key's calls in seconds from..to-1.
func (r *keyedRun) total(key string, from, to int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for s := from; s < to; s++ {
		n += r.per[key][s]
	}
	return n
}

// inBand fails unless each second from..to-1 counted lo..hi calls of key.
func (r *keyedRun) inBand(key string, from, to, lo, hi int) {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for s := from; s < to; s++ {
		if n := r.per[key][s]; n < lo || n > hi {
			r.t.Errorf("%s, second %d: %d calls, want %d..%d (all: %v)", key, s, n, lo, hi, r.per[key])
		}
	}
}

// Keys listed in Limits keep to their own rate and burst, the others to Rate and Burst, with
// one limiter; the refusals, the snapshot and the observers say each key's own.
func TestRateLimitPerKeyRates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rl := ratelimit.New(ratelimit.Config{Rate: 10, MaxWait: time.Second, Key: endpointKey,
			Limits: map[string]ratelimit.Limit{"sms": {Rate: 50}, "email": {Rate: 100, Burst: 5}}})
		r := newKeyedRun(t)
		r.send(rl, "sms", "email", "push")
		time.Sleep(10 * time.Second)
		r.end()
		// Over 10 s: 500 permits at 50 a second, 1000 at 100 and 100 at 10, and the bursts
		// (4 more for email's five at once) at the start.
		for _, c := range []struct {
			key    string
			lo, hi int
		}{{"sms", 500, 501}, {"email", 1004, 1005}, {"push", 100, 101}} {
			if n := r.total(c.key, 0, 10); n < c.lo || n > c.hi {
				t.Errorf("%s: %d calls in 10 s, want %d..%d", c.key, n, c.lo, c.hi)
			}
		}
		snap := map[string]ratelimit.KeySnapshot{}
		for _, s := range rl.Snapshot() {
			snap[s.Key] = s
		}
		if s := snap["sms"]; s.Rate != 50 || s.Burst != 1 {
			t.Errorf("sms: %+v", s)
		}
		if s := snap["email"]; s.Rate != 100 || s.Burst != 5 {
			t.Errorf("email: %+v", s)
		}
		if s := snap["push"]; s.Rate != 10 || s.Burst != 1 {
			t.Errorf("push: %+v", s)
		}
		// A refusal names the key's own rate and the wait of its own interval.
		refusing := ratelimit.New(ratelimit.Config{Rate: 10, Key: endpointKey, Limits: map[string]ratelimit.Limit{"sms": {Rate: 50}}})
		m := build(t, ok, refusing)
		for _, c := range []struct {
			key  string
			rate float64
			wait time.Duration
		}{{"sms", 50, 20 * time.Millisecond}, {"push", 10, 100 * time.Millisecond}} {
			_, _ = mediator.Send(context.Background(), m, &Call{Endpoint: c.key})
			_, err := mediator.Send(context.Background(), m, &Call{Endpoint: c.key})
			if le, isLimited := errors.AsType[*ratelimit.LimitedError](err); !isLimited || le.Rate != c.rate || le.Wait != c.wait {
				t.Errorf("%s: %v, want a refusal at %v a second, next permit in %v", c.key, err, c.rate, c.wait)
			}
		}
	})
}

// Validate checks every entry of Limits as it checks Rate and Burst, naming the entry's key and
// field; Rate stays required with Limits, as the rate of the keys not listed.
func TestRateLimitLimitsValidate(t *testing.T) {
	err := ratelimit.Config{Rate: 10, Limits: map[string]ratelimit.Limit{
		"sms": {}, "email": {Rate: 1, Burst: -1}, "fax": {Rate: 0.001, Burst: 100_000_000}, "push": {Rate: 2e9}, "ok": {Rate: 5},
	}}.Validate()
	for _, want := range []string{`Limits["sms"].Rate 0 must be`, `Limits["email"].Burst -1 must not be negative`,
		`Limits["fax"].Burst 100000000 at Rate 0.001`, `Limits["push"].Rate 2e+09`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v lacks %s", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), `"ok"`) {
		t.Errorf("a valid entry reported: %v", err)
	}
	err = ratelimit.Config{Limits: map[string]ratelimit.Limit{"sms": {Rate: 5}}}.Validate()
	if err == nil || !strings.Contains(err.Error(), "ratelimit Rate 0") || !strings.Contains(err.Error(), "required with Limits") {
		t.Errorf("Limits without Rate: %v", err)
	}
	if err := (ratelimit.Config{Rate: 1, Limits: map[string]ratelimit.Limit{"sms": {Rate: 5, Burst: 10}}}).Validate(); err != nil {
		t.Error(err)
	}
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, ok)
	m.Use(ratelimit.New(ratelimit.Config{Rate: 1, Limits: map[string]ratelimit.Limit{"sms": {Rate: -1}}}))
	if err := m.Build(); !errors.Is(err, mediator.ErrInvalidBehavior) || !strings.Contains(err.Error(), `Limits["sms"].Rate -1`) {
		t.Errorf("Build: %v", err)
	}
}

// LimitFor gives keys computed at run time a limit of their own, asked once when the key's
// limit is made (again after MaxKeys dropped it); Limits wins over it. A Limit out of bounds
// fails the call with an error naming the key and the field, not a refusal, and is asked
// again at the next call; for a request type's limit, Build fails.
func TestRateLimitLimitFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		asked := map[string]int{}
		var fixed atomic.Bool
		limitFor := func(key string) (ratelimit.Limit, bool) {
			mu.Lock()
			asked[key]++
			mu.Unlock()
			switch key {
			case "gold", "sms":
				return ratelimit.Limit{Rate: 5}, true
			case "broken":
				if fixed.Load() {
					return ratelimit.Limit{Rate: 20}, true
				}
				return ratelimit.Limit{Rate: -1, Burst: -2}, true
			}
			return ratelimit.Limit{}, false
		}
		askedOf := func(key string) int { mu.Lock(); defer mu.Unlock(); return asked[key] }
		rl := ratelimit.New(ratelimit.Config{Rate: 1, Key: endpointKey, LimitFor: limitFor, MaxKeys: 3,
			Limits: map[string]ratelimit.Limit{"sms": {Rate: 50}}})
		m := build(t, ok, rl)
		send := func(key string) error {
			_, err := mediator.Send(context.Background(), m, &Call{Endpoint: key})
			return err
		}
		for _, c := range []struct {
			key  string
			wait time.Duration
		}{{"gold", 200 * time.Millisecond}, {"sms", 20 * time.Millisecond}, {"bronze", time.Second}} {
			if err := send(c.key); err != nil {
				t.Fatalf("%s: %v", c.key, err)
			}
			if err := send(c.key); behaviors.RetryAfter(err) != c.wait {
				t.Errorf("%s: %v, want the next permit in %v", c.key, err, c.wait)
			}
		}
		if askedOf("gold") != 1 || askedOf("bronze") != 1 || askedOf("sms") != 0 {
			t.Errorf("LimitFor asked %v: once a key made, never for a key of Limits", asked)
		}
		for i := 1; i <= 2; i++ {
			err := send("broken")
			if err == nil || !strings.Contains(err.Error(), `LimitFor("broken").Rate -1`) || !strings.Contains(err.Error(), `LimitFor("broken").Burst -2`) ||
				errors.Is(err, ratelimit.ErrLimited) || behaviors.IsRefusal(err) || behaviors.Retryable(err) {
				t.Errorf("call %d of a key LimitFor gives a limit out of bounds: %v", i, err)
			}
			if askedOf("broken") != i {
				t.Errorf("LimitFor asked %d times for %d calls of the broken key", askedOf("broken"), i)
			}
		}
		fixed.Store(true)
		if err := send("broken"); err != nil {
			t.Errorf("once LimitFor gives a limit in bounds: %v", err)
		}
		// Past MaxKeys (3), idle keys are dropped: gold's limit is made, and LimitFor asked,
		// again at its next call.
		time.Sleep(2 * time.Second)
		if err := send("new"); err != nil {
			t.Fatal(err)
		}
		if err := send("gold"); err != nil {
			t.Fatal(err)
		}
		if askedOf("gold") != 2 {
			t.Errorf("LimitFor asked %d times for gold, dropped and made again", askedOf("gold"))
		}
	})
	// A request type's limit (Key nil) is made at Build: an answer out of bounds fails Build.
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, ok)
	m.Use(ratelimit.New(ratelimit.Config{Rate: 1, LimitFor: func(string) (ratelimit.Limit, bool) { return ratelimit.Limit{}, true }}))
	if err := m.Build(); err == nil || !strings.Contains(err.Error(), `LimitFor("*testkit.Call").Rate 0`) {
		t.Errorf("Build with LimitFor out of bounds for the request type: %v", err)
	}
}

// Three instances share two keys of their own rates through one store: each key keeps to its
// own rate across them, and, while the store is away, each instance keeps to its share of each
// key's own rate (the key's rate divided by the instances).
func TestSharedLimitPerKeyRates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemStore(200 * time.Millisecond)
		var mu sync.Mutex
		var events []ratelimit.FallbackEvent
		observe := func(_ context.Context, e ratelimit.FallbackEvent) { mu.Lock(); events = append(events, e); mu.Unlock() }
		r := newKeyedRun(t)
		var rls []*ratelimit.Behavior
		for i := range 3 {
			rl := ratelimit.New(ratelimit.Config{Rate: 100, MaxWait: time.Second, Key: endpointKey, Store: instance{store, string(rune('a' + i))},
				Limits:     map[string]ratelimit.Limit{"sms": {Rate: 50}},
				OnFallback: []func(context.Context, ratelimit.FallbackEvent){observe}})
			rls = append(rls, rl)
			r.send(rl, "sms", "email")
		}
		time.Sleep(3 * time.Second)
		store.fail.Store(true)
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		for _, s := range rls[0].Snapshot() {
			want := map[string]float64{"sms": 50, "email": 100}[s.Key]
			if !s.Fallback || s.Instances != 3 || s.Rate != want {
				t.Errorf("falling back: %+v, want rate %v", s, want)
			}
		}
		time.Sleep(3 * time.Second)
		store.fail.Store(false)
		time.Sleep(3 * time.Second)
		r.end()
		for _, rl := range rls {
			_ = rl.Close()
		}
		t.Logf("sms per second: %v; email: %v", r.per["sms"], r.per["email"])
		r.inBand("sms", 1, 9, 45, 53)
		r.inBand("email", 1, 9, 90, 105)
		mu.Lock()
		defer mu.Unlock()
		into := map[string]int{}
		for _, e := range events {
			if !e.Active {
				continue
			}
			into[e.Key]++
			if want := map[string]float64{"sms": 50.0 / 3, "email": 100.0 / 3}[e.Key]; e.Instances != 3 || e.Share != want {
				t.Errorf("%+v: want the share %v", e, want)
			}
		}
		if into["sms"] != 3 || into["email"] != 3 {
			t.Errorf("moves into the share: %v", into)
		}
	})
}
