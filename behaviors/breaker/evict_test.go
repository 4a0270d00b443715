package breaker_test

import (
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
)

// An eviction listener hears the key of every breaker a sweep evicts, by Sweep and under
// MaxBreakers pressure, once it is gone (it may call the registry); never a declared key or one
// still inside its open duration; and nothing once removed.
func TestEvictionListener(t *testing.T) {
	clock := &stepClock{}
	r := breaker.NewRegistry(breaker.Config{FailureThreshold: 1, MaxBreakers: -1, Clock: clock})
	var mu sync.Mutex
	var heard []string
	remove := r.AddEvictionListener(func(key string) {
		if _, err := r.Get(key); err == nil {
			t.Errorf("%s: heard while the registry still holds it", key)
		}
		mu.Lock()
		heard = append(heard, key)
		mu.Unlock()
	})
	r.Declare("declared")
	for _, k := range []string{"a", "b"} {
		p, _ := r.Gate(k)
		p.Success()
	}
	fail(t, r, "open", 1)
	r.Sweep() // clears the marks
	r.Sweep() // evicts a and b; open is inside its open duration, declared is never evicted
	slices.Sort(heard)
	if !slices.Equal(heard, []string{"a", "b"}) {
		t.Fatalf("heard %v, want [a b]", heard)
	}
	clock.Advance(time.Minute) // past the open duration
	r.Sweep()
	if !slices.Equal(heard, []string{"a", "b", "open"}) {
		t.Fatalf("heard %v, want [a b open]", heard)
	}

	remove()
	p, _ := r.Gate("c")
	p.Success()
	r.Sweep()
	r.Sweep()
	if len(heard) != 3 {
		t.Fatalf("heard %v after the listener was removed", heard)
	}
}

// A sweep under MaxBreakers pressure announces its evictions too, to the goroutine whose new
// key set it off, before that call returns.
func TestEvictionListenerUnderPressure(t *testing.T) {
	const bound = 100
	r := breaker.NewRegistry(breaker.Config{MaxBreakers: bound})
	evicted := 0
	r.AddEvictionListener(func(string) { evicted++ }) // no lock: only this goroutine sweeps
	for i := range 10 * bound {
		p, err := r.Gate("k" + strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		p.Success()
		if got := i + 1 - r.Len(); got != evicted {
			t.Fatalf("after %d keys: %d evicted, %d heard", i+1, got, evicted)
		}
	}
	if evicted == 0 {
		t.Fatal("no eviction under pressure")
	}
}

// With the system clock, a new key sweeps once the last sweep is IdleTTL old, however many
// times over: not before (a sweep in between starts the time over), and again an IdleTTL after
// each sweep. A registry holding half its MaxBreakers or more reads the time only when a timer
// says a sweep may be due; one holding fewer reads it for each new key; both sweep alike.
func TestIdleSweepsKeepComing(t *testing.T) {
	for _, bound := range []int{0, 8} { // 0: the default, 10,000; 8: four keys are half of it
		t.Run("MaxBreakers="+strconv.Itoa(bound), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { idleSweepsKeepComing(t, bound) })
		})
	}
}

func idleSweepsKeepComing(t *testing.T, bound int) {
	r := breaker.NewRegistry(breaker.Config{IdleTTL: time.Minute, MaxBreakers: bound})
	use := func(k string) {
		p, err := r.Gate(k)
		if err != nil {
			t.Fatal(err)
		}
		p.Success()
	}
	held := func(when string, want map[string]bool) {
		for k, w := range want {
			if _, err := r.Get(k); (err == nil) != w {
				t.Fatalf("%s: %s held %v, want %v", when, k, err == nil, w)
			}
		}
	}
	wait := func(d time.Duration) { time.Sleep(d); synctest.Wait() }
	for _, k := range []string{"f1", "f2", "f3", "a"} {
		use(k)
	}
	wait(30 * time.Second)
	r.Sweep() // the keys are new: they stay
	wait(31 * time.Second)
	use("b") // 61 s: the last sweep is 31 s old
	held("61 s", map[string]bool{"a": true, "f1": true, "b": true})
	wait(30 * time.Second)
	use("c") // 91 s: the last sweep is 61 s old
	held("91 s", map[string]bool{"a": false, "f1": false, "f3": false, "b": true, "c": true})
	wait(61 * time.Second)
	use("d") // 152 s: the last sweep, at 91 s, is 61 s old
	held("152 s", map[string]bool{"b": false, "c": false, "d": true})
}
