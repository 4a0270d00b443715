package gate

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable/internal/store"
)

// sharedStore is a breaker.Store in memory on the test's clock, with the contract's
// compare-and-swap: a claim of the probes applies once the open time, or the previous holder's
// claim, has run out.
type sharedStore struct {
	mu    sync.Mutex
	clock *movingClock
	rows  map[string]breaker.Shared
}

func (s *sharedStore) Transition(_ context.Context, t breaker.Transition) (breaker.Shared, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	row, ok := s.rows[t.Key]
	if !ok {
		row = breaker.Shared{Key: t.Key, State: breaker.StateClosed}
	}
	row.Now = now
	allowed := row.Epoch == t.From
	if allowed && t.To == breaker.StateHalfOpen {
		allowed = row.Epoch == 0 || row.State == breaker.StateOpen && !now.Before(row.OpenUntil) ||
			row.State == breaker.StateHalfOpen && !now.Before(row.ProbeUntil)
	}
	if !allowed {
		return row, false, nil
	}
	row.Epoch++
	row.State, row.Failures, row.By = t.To, t.Failures, t.Owner
	row.ProbeOwner, row.ProbeClaim, row.ProbeUntil = "", "", time.Time{}
	switch t.To {
	case breaker.StateOpen:
		row.OpenedAt, row.OpenUntil = now, now.Add(t.OpenFor)
	case breaker.StateHalfOpen:
		row.ProbeOwner, row.ProbeClaim, row.ProbeUntil, row.LastProbeAt = t.Owner, t.Claim, now.Add(t.ProbeFor), now
	}
	s.rows[t.Key] = row
	return row, true, nil
}

func (s *sharedStore) Load(context.Context) ([]breaker.Shared, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []breaker.Shared
	for _, row := range s.rows {
		if row.State != breaker.StateClosed {
			row.Now = s.clock.Now()
			out = append(out, row)
		}
	}
	return out, nil
}

func (s *sharedStore) Subscribe(func(breaker.Shared)) (stop func()) { return func() {} }

// heldElsewhere returns a gate whose breaker of "api" is shared through a store in which
// another instance ("dead") holds the probes until t0 + probeFor, and the gate's clock.
func heldElsewhere(t *testing.T, probeFor time.Duration) (*Gate, *movingClock, *sharedStore) {
	t.Helper()
	clock := &movingClock{now: t0}
	st := &sharedStore{clock: clock, rows: map[string]breaker.Shared{"api": {Key: "api", State: breaker.StateHalfOpen, Epoch: 6,
		OpenedAt: t0.Add(-time.Second), ProbeOwner: "dead", ProbeClaim: "claim-of-the-dead", ProbeUntil: t0.Add(probeFor),
		LastProbeAt: t0, By: "dead"}}}
	reg := breaker.NewRegistry(breaker.Config{Clock: clock, Store: st, Instance: "i", OpenDuration: time.Second, ProbeTimeout: probeFor})
	if a := reg.Admission("api"); a.State != breaker.StateHalfOpen || a.FreeProbes != 0 {
		t.Fatalf("the registry does not follow the claim of the other instance: %+v", a)
	}
	g := newGate(&fakeStore{}, reg, nil, false)
	g.cfg.Clock = clock
	return g, clock, st
}

// dueWithin fails unless comp parks its item on "api" to wait for the probes, due no sooner
// than from and no later than a tenth of wait after it.
func dueWithin(t *testing.T, what string, comp store.Completion, from time.Time, wait time.Duration) {
	t.Helper()
	if comp.ParkedKey != "api" || comp.State != store.StatePending || charged(comp) {
		t.Fatalf("%s: not parked on the breaker: %+v", what, comp)
	}
	if comp.NextAt.Before(from) || comp.NextAt.After(from.Add(wait/10)) {
		t.Fatalf("%s: due %v after the claim; want when the probes run out, %v (spread by a tenth at most)",
			what, comp.NextAt.Sub(t0), from.Sub(t0))
	}
}

// An item refused because another instance holds the probes of its shared breaker waits no
// longer than that claim holds (ProbeUntil): the holder may have died, or its probe's verdict
// may never have reached the store, and no state change then tells this instance anything; at
// ProbeUntil this instance may claim the probes itself. It used to wait out Recheck (a minute).
func TestParkedBehindAnotherInstancesProbeDueWhenItsClaimRunsOut(t *testing.T) {
	g, clock, st := heldElsewhere(t, 2*time.Second)
	dispatch := func() context.Context { return context.Background() }
	c := claimed(1)
	comp := completion(c)
	if _, got, ok := g.Admit(c, &work{}, &comp, dispatch); ok {
		t.Fatal("admitted while another instance holds the probes")
	} else {
		dueWithin(t, "refused by the gate", got, t0.Add(2*time.Second), 2*time.Second)
	}
	// The same refusal met inside the handler (its breaker asked by the call itself).
	judged := g.Judge(c, &work{}, &Ticket{Context: context.Background()}, completion(c),
		&breaker.OpenError{Key: "api"}, false, pol, alwaysRetry)
	dueWithin(t, "refused inside the handler", judged, t0.Add(2*time.Second), 2*time.Second)

	// When it is due, the claim has run out: this instance takes the probes over.
	clock.now = t0.Add(2 * time.Second)
	comp = completion(c)
	comp.EndedAt = clock.now
	tk, got, ok := g.Admit(c, &work{}, &comp, dispatch)
	if !ok {
		t.Fatalf("refused once the other instance's claim ran out: %+v", got)
	}
	tk.Release()
	if row := st.rows["api"]; row.ProbeOwner != "dead" {
		t.Fatalf("the gate claimed in the store itself: %+v", row)
	}
}

// An item refused because this instance's own probe is out waits no longer than the breaker
// waits for that probe (ProbeTimeout after it began): a probe that hangs opens the breaker again
// then, which nothing else would make happen while every item waits.
func TestParkedBehindAProbeDueWhenItTimesOut(t *testing.T) {
	clock := &movingClock{now: t0}
	reg := breaker.NewRegistry(breaker.Config{Clock: clock, OpenDuration: time.Second, ProbeTimeout: 3 * time.Second})
	trip(t, reg, "api")
	clock.now = t0.Add(2 * time.Second)
	p, err := reg.Gate("api") // a call of the process's own takes the probe
	if err != nil || !p.Probe() {
		t.Fatalf("no probe: %v", err)
	}
	g := newGate(&fakeStore{}, reg, nil, false)
	g.cfg.Clock = clock
	c := claimed(1)
	comp := completion(c)
	comp.EndedAt = clock.now
	if _, got, ok := g.Admit(c, &work{}, &comp, func() context.Context { return context.Background() }); ok {
		t.Fatal("admitted while the probe is out")
	} else {
		dueWithin(t, "refused by the gate", got, t0.Add(5*time.Second), 3*time.Second)
	}
	p.Release()
}

// A probe the gate let through that ends without a verdict (a rate limit refused the call it
// made, which says nothing of the dependency) frees its slot without a state change: the items
// refused meanwhile are freed at once, not a Recheck later.
func TestProbeEndedWithoutAVerdictFreesTheItemsBehindIt(t *testing.T) {
	g := halfOpenGate(t, 1)
	st := g.cfg.Store.(*fakeStore)
	g.Start()
	defer g.Stop()
	reg := g.cfg.Default
	dispatch := func() context.Context { return context.Background() }
	first, second := claimed(1), claimed(1)
	second.ID = 8
	c1, c2 := completion(first), completion(second)
	tk, _, ok := g.Admit(first, &work{}, &c1, dispatch)
	if !ok {
		t.Fatal("the probe was refused")
	}
	if _, got, ok := g.Admit(second, &work{}, &c2, dispatch); ok || !got.Verdict {
		t.Fatalf("a second item got past the one probe slot: ok %v %+v", ok, got)
	}
	// The first item's handler: its call takes the breaker's probe slot, and a rate limit
	// refuses it (not counted: the slot is freed, no verdict).
	p, err := reg.Gate("api")
	if err != nil || !p.Probe() {
		t.Fatalf("the item's call got no probe: %v", err)
	}
	p.Done(context.Background(), errRateLimited{})
	tk.Release()
	g.Turn()
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.unparked) != 1 || st.unparked[0] != "api" {
		t.Fatalf("after the probe ended without a verdict: unparked %v, reparked %v; want the items on api freed", st.unparked, st.reparked)
	}
}

// errRateLimited is a rate limit's refusal: not counted by a breaker.
type errRateLimited struct{}

func (errRateLimited) Error() string { return "rate limited" }
func (errRateLimited) Refusal() behaviors.RefusalInfo {
	return behaviors.RefusalInfo{By: "ratelimit", Key: "api"}
}
