package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
)

// selfChanges collects the state changes into the same state that a registry's listeners hear.
type selfChanges struct {
	mu  sync.Mutex
	got []string
}

func (s *selfChanges) listen(name string, r *breaker.Registry) {
	r.AddListener(func(c breaker.StateChange) {
		if c.From == c.To {
			s.mu.Lock()
			s.got = append(s.got, fmt.Sprintf("%s: %s → %s (%s)", name, c.From, c.To, c.Reason))
			s.mu.Unlock()
		}
	})
}

func (s *selfChanges) check(t *testing.T, what string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.got) > 0 {
		t.Errorf("%s: listeners heard a state change into the same state: %s", what, strings.Join(s.got, ", "))
	}
	s.got = nil
}

// No listener is told of a change from a state into the same state: not when another
// instance's claim of the probes reaches an instance probing on its own, not when an instance
// takes over the probes of a holder whose claim ran out, not when an open breaker is tripped
// again by hand.
func TestSharedListenersNeverHearAStateIntoItself(t *testing.T) {
	var self selfChanges

	// Another instance's claim reaches an instance probing on its own (its claim failed).
	st, clock, regs := fleet(2, breaker.Config{FailureThreshold: 1, OpenDuration: 10 * time.Second, ProbeTimeout: time.Minute})
	self.listen("instance-1", regs[0])
	self.listen("instance-2", regs[1])
	fail(t, regs[0], "k", 1)
	clock.Advance(10 * time.Second)
	st.down.Store(true)
	// The claim gets no answer: the call is refused, and the registry looks the breaker up;
	// that gets none either, so a call probes on its own.
	var local breaker.Permit
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err := regs[1].Gate("k")
		if err == nil && p.Probe() {
			local = p
			break
		}
		if err == nil || !errors.Is(err, breaker.ErrOpen) || time.Now().After(deadline) {
			t.Fatalf("instance 2 with the store away: %v (probe %v); want a local probe", err, p.Probe())
		}
		time.Sleep(time.Millisecond)
	}
	st.down.Store(false)
	if p, err := regs[0].Gate("k"); err != nil || !p.Probe() {
		t.Fatalf("instance 1's claim: %v", err)
	}
	if s, _ := regs[1].Get("k"); s.State != breaker.StateHalfOpen || s.ProbeOwner != "instance-1" {
		t.Fatalf("instance 2 after instance 1's claim: %+v", s)
	}
	local.Failure() // its half-open period was superseded: nothing to say
	self.check(t, "another's claim while probing locally")

	// A takeover of the probes of a holder whose claim ran out.
	_, clock, regs = fleet(2, breaker.Config{FailureThreshold: 1, OpenDuration: 10 * time.Second, ProbeTimeout: 5 * time.Second})
	self.listen("instance-1", regs[0])
	self.listen("instance-2", regs[1])
	fail(t, regs[0], "k", 1)
	clock.Advance(10 * time.Second)
	if p, err := regs[0].Gate("k"); err != nil || !p.Probe() {
		t.Fatalf("instance 1's claim: %v", err)
	}
	clock.Advance(5 * time.Second)
	if p, err := regs[1].Gate("k"); err != nil || !p.Probe() {
		t.Fatalf("instance 2's takeover: %v", err)
	}
	self.check(t, "a takeover of the probes")

	// An open breaker tripped again by hand, with a store and without.
	_, _, regs = fleet(1, breaker.Config{OpenDuration: time.Hour})
	alone := breaker.NewRegistry(breaker.Config{OpenDuration: time.Hour})
	for i, r := range []*breaker.Registry{regs[0], alone} {
		self.listen(fmt.Sprintf("registry %d", i+1), r)
		r.Declare("k")
		for range 2 {
			if err := r.Trip("k"); err != nil {
				t.Fatal(err)
			}
		}
	}
	self.check(t, "an open breaker tripped again")
}

// lateClaims is a Store over a memStore whose claims of the probes (moves to half-open) are
// made in the store but answered with a timeout, as a claim that commits after its caller gave
// up is.
type lateClaims struct{ *memStore }

func (s lateClaims) Transition(ctx context.Context, t breaker.Transition) (breaker.Shared, bool, error) {
	sh, applied, err := s.memStore.Transition(ctx, t)
	if t.To == breaker.StateHalfOpen && err == nil {
		return breaker.Shared{}, false, context.DeadlineExceeded
	}
	return sh, applied, err
}

// A claim of the probes that commits after its caller gave up is the registry's own: the call
// probes once under it, its verdict is published over it, and the registry does not take the
// claim, when it learns of it, for a new half-open period with a probe of its own. The other
// instance refuses while the claim holds and adopts the verdict.
func TestSharedLateClaimIsUsedOnce(t *testing.T) {
	clock := &stepClock{}
	st := newMemStore(clock)
	var regs []*breaker.Registry
	var self selfChanges
	for i := range 2 {
		name := fmt.Sprintf("instance-%d", i+1)
		regs = append(regs, breaker.NewRegistry(breaker.Config{Store: lateClaims{st}, Clock: clock, Instance: name,
			FailureThreshold: 1, OpenDuration: 10 * time.Second, ProbeTimeout: time.Minute}))
		self.listen(name, regs[i])
	}
	fail(t, regs[0], "k", 1)
	clock.Advance(10 * time.Second)
	p, err := regs[0].Gate("k")
	if err != nil || !p.Probe() {
		t.Fatalf("the call whose claim timed out: %v; want it to probe", err)
	}
	if row := st.row("k"); row.State != breaker.StateHalfOpen || row.ProbeOwner != "instance-1" {
		t.Fatalf("stored %+v; want instance 1's claim", row)
	}
	if _, err := regs[1].Gate("k"); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("instance 2 while instance 1 holds the probes: %v", err)
	}
	p.Failure() // the dependency is still down

	// The store answers again (a second past the timeout, when the registry asks it again):
	// the verdict is published over the claim, and instance 1 lets nothing through before its
	// next open time.
	clock.Advance(time.Second)
	fail(t, regs[0], "other", 1) // a store call that succeeds: the verdict on k is published after it
	deadline := time.Now().Add(10 * time.Second)
	state := func(r *breaker.Registry) breaker.State { s, _ := r.Get("k"); return s.State }
	for st.row("k").State == breaker.StateHalfOpen && state(regs[0]) == breaker.StateOpen {
		if time.Now().After(deadline) {
			t.Fatalf("the probe's verdict was not published over the claim: stored %+v", st.row("k"))
		}
		time.Sleep(time.Millisecond)
	}
	for i, r := range regs {
		if s, _ := r.Get("k"); s.State != breaker.StateOpen {
			t.Fatalf("instance %d after the verdict: %+v, stored %+v; want open", i+1, s, st.row("k"))
		}
		if p, err := r.Gate("k"); err == nil {
			t.Fatalf("instance %d let a call through (probe %v) in the open period after its probe failed", i+1, p.Probe())
		}
	}
	self.check(t, "a late claim")
}
