package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
)

// memStore is a breaker.Store in memory, with the contract's compare-and-swap and its own
// clock: several registries on one memStore are the instances of a fleet.
type memStore struct {
	mu      sync.Mutex
	clock   *stepClock
	rows    map[string]breaker.Shared
	subs    map[int]func(breaker.Shared)
	nextSub int
	took    []string // the transitions applied, as "key:state"
	calls   atomic.Int64
	down    atomic.Bool // every call fails
	hang    atomic.Bool // every Transition waits for its context to end
}

func newMemStore(clock *stepClock) *memStore {
	return &memStore{clock: clock, rows: map[string]breaker.Shared{}, subs: map[int]func(breaker.Shared){}}
}

var errStoreDown = errors.New("store down")

func (s *memStore) Transition(ctx context.Context, t breaker.Transition) (breaker.Shared, bool, error) {
	s.calls.Add(1)
	if s.hang.Load() {
		<-ctx.Done()
		return breaker.Shared{}, false, ctx.Err()
	}
	if s.down.Load() {
		return breaker.Shared{}, false, errStoreDown
	}
	s.mu.Lock()
	now := s.clock.Now()
	row, ok := s.rows[t.Key]
	row.Now = now
	if !ok {
		row = breaker.Shared{Key: t.Key, State: breaker.StateClosed, Now: now}
	}
	allowed := row.Epoch == t.From
	if allowed && t.To == breaker.StateHalfOpen {
		allowed = row.State == breaker.StateOpen && !now.Before(row.OpenUntil) ||
			row.State == breaker.StateHalfOpen && !now.Before(row.ProbeUntil) || row.Epoch == 0
	}
	if !allowed {
		s.mu.Unlock()
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
	case breaker.StateClosed:
		row.OpenedAt, row.OpenUntil = time.Time{}, time.Time{}
	}
	s.rows[t.Key] = row
	s.took = append(s.took, t.Key+":"+t.To.String())
	subs := make([]func(breaker.Shared), 0, len(s.subs))
	for _, fn := range s.subs {
		subs = append(subs, fn)
	}
	s.mu.Unlock()
	for _, fn := range subs {
		fn(row)
	}
	return row, true, nil
}

func (s *memStore) Load(context.Context) ([]breaker.Shared, error) {
	s.calls.Add(1)
	if s.down.Load() {
		return nil, errStoreDown
	}
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

func (s *memStore) Subscribe(fn func(breaker.Shared)) (stop func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextSub
	s.nextSub++
	s.subs[id] = fn
	return func() {
		s.mu.Lock()
		delete(s.subs, id)
		s.mu.Unlock()
	}
}

func (s *memStore) transitions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.took...)
}

func (s *memStore) row(key string) breaker.Shared {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rows[key]
}

// fleet makes n registries sharing one memStore and one clock, each an instance.
func fleet(n int, cfg breaker.Config) (*memStore, *stepClock, []*breaker.Registry) {
	clock := &stepClock{}
	st := newMemStore(clock)
	cfg.Store, cfg.Clock = st, clock
	var regs []*breaker.Registry
	for i := range n {
		c := cfg
		c.Instance = fmt.Sprintf("instance-%d", i+1)
		regs = append(regs, breaker.NewRegistry(c))
	}
	return st, clock, regs
}

// A trip by one instance opens the breaker in every instance; two instances tripping at once
// make one trip in the store (one epoch), and the second adopts the first's open time.
func TestSharedTripOpensEverywhere(t *testing.T) {
	st, clock, regs := fleet(3, breaker.Config{FailureThreshold: 2, OpenDuration: 10 * time.Second})
	fail(t, regs[0], "k", 2)
	for i, r := range regs {
		if a := r.Admission("k"); a.State != breaker.StateOpen || a.Remaining != 10*time.Second {
			t.Fatalf("instance %d: %+v", i+1, a)
		}
	}
	if row := st.row("k"); row.Epoch != 1 || row.By != "instance-1" {
		t.Fatalf("stored %+v", row)
	}

	// Both count their failures locally before either hears of the other's trip.
	st2, _, pair := fleet(2, breaker.Config{FailureThreshold: 1, OpenDuration: 10 * time.Second})
	st2.down.Store(true)
	p1, _ := pair[0].Gate("x")
	p2, _ := pair[1].Gate("x")
	st2.down.Store(false)
	clock.Advance(time.Second)
	p1.Failure()
	p2.Failure()
	if row := st2.row("x"); row.Epoch != 1 || fmt.Sprint(st2.transitions()) != "[x:open]" {
		t.Fatalf("two trips stored %+v, transitions %v", row, st2.transitions())
	}
}

// At the half-open moment exactly one probe reaches the dependency in the whole fleet: one
// instance claims the probes in the store, the others keep refusing until it reports; its
// success closes the breaker everywhere.
func TestSharedHalfOpenOneProbePerFleet(t *testing.T) {
	st, clock, regs := fleet(3, breaker.Config{FailureThreshold: 1, OpenDuration: 10 * time.Second, ProbeTimeout: time.Minute})
	fail(t, regs[0], "k", 1)
	clock.Advance(10 * time.Second)
	var probes atomic.Int64
	var permits []breaker.Permit
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, r := range regs {
		for range 100 {
			wg.Go(func() {
				if p, err := r.Gate("k"); err == nil {
					probes.Add(1)
					mu.Lock()
					permits = append(permits, p)
					mu.Unlock()
				} else if !errors.Is(err, breaker.ErrOpen) {
					t.Errorf("refusal %v", err)
				}
			})
		}
	}
	wg.Wait()
	if probes.Load() != 1 || !permits[0].Probe() {
		t.Fatalf("%d calls let through in the fleet, want one probe", probes.Load())
	}
	holder := st.row("k").ProbeOwner
	for i, r := range regs {
		a := r.Admission("k")
		if a.State != breaker.StateHalfOpen || a.FreeProbes != 0 {
			t.Fatalf("instance %d while %s probes: %+v", i+1, holder, a)
		}
		if s, err := r.Get("k"); err != nil || s.ProbeOwner != holder {
			t.Fatalf("instance %d shows the probes held by %q (%v), want %s", i+1, s.ProbeOwner, err, holder)
		}
	}
	permits[0].Success()
	for i, r := range regs {
		if a := r.Admission("k"); a.State != breaker.StateClosed {
			t.Fatalf("instance %d after the probe: %+v", i+1, a)
		}
	}
	if got := fmt.Sprint(st.transitions()); got != "[k:open k:half-open k:closed]" {
		t.Fatalf("store took %s", got)
	}
}

// A holder that dies with the probes (its claim runs out) lets another instance claim them;
// meanwhile the other instance's Admission says when that claim runs out (Recheck), and then
// that its first call would claim the probes.
func TestSharedProbeClaimRunsOut(t *testing.T) {
	st, clock, regs := fleet(2, breaker.Config{FailureThreshold: 1, OpenDuration: 10 * time.Second, ProbeTimeout: 5 * time.Second})
	fail(t, regs[0], "k", 1)
	clock.Advance(10 * time.Second)
	if p, err := regs[0].Gate("k"); err != nil || !p.Probe() {
		t.Fatalf("first claim: %v", err)
	} // instance 1 dies with the probe
	if _, err := regs[1].Gate("k"); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("while instance 1 holds the probes: %v", err)
	}
	clock.Advance(2 * time.Second)
	if a := regs[1].Admission("k"); a != (breaker.Admission{State: breaker.StateHalfOpen, Recheck: 3 * time.Second}) {
		t.Fatalf("while instance 1 holds the probes: %+v, want half-open, its claim running out in 3s", a)
	}
	var heard []string
	regs[1].AddListener(func(c breaker.StateChange) { heard = append(heard, fmt.Sprintf("%s→%s %s", c.From, c.To, c.Reason)) })
	clock.Advance(3 * time.Second)
	if a := regs[1].Admission("k"); a != (breaker.Admission{State: breaker.StateHalfOpen, FreeProbes: 1}) {
		t.Fatalf("once instance 1's claim ran out: %+v, want the probes free to claim", a)
	}
	p, err := regs[1].Gate("k")
	if err != nil || !p.Probe() || st.row("k").ProbeOwner != "instance-2" {
		t.Fatalf("after the claim ran out: %v, stored %+v", err, st.row("k"))
	}
	// The holder's probe timed out, as a hung probe of its own would have (never a change
	// from half-open into half-open), and this instance's claim made it half-open again.
	if got := fmt.Sprint(heard); got != "[half-open→open probe-timed-out open→half-open open-duration-elapsed]" {
		t.Fatalf("the takeover was announced as %v, want the previous holder's probe timed out, then the claim", got)
	}
}

// A registry started on a store whose breaker is open starts open: no call reaches the
// dependency before the fleet's open time has passed.
func TestSharedRestartStartsOpen(t *testing.T) {
	st, clock, regs := fleet(1, breaker.Config{FailureThreshold: 1, OpenDuration: time.Minute})
	fail(t, regs[0], "k", 1)
	clock.Advance(20 * time.Second)
	restarted := breaker.NewRegistry(breaker.Config{Store: st, Clock: clock, Instance: "restarted", OpenDuration: time.Minute})
	if _, err := restarted.Gate("k"); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("restarted instance let a call through: %v", err)
	}
	if a := restarted.Admission("k"); a.State != breaker.StateOpen || a.Remaining != 40*time.Second {
		t.Fatalf("restarted: %+v", a)
	}
}

// A reset or a trip from any instance reaches every one, and a reset there frees what waits
// on the breaker (its listeners hear the close).
func TestSharedResetAndTripFromAnyInstance(t *testing.T) {
	_, _, regs := fleet(3, breaker.Config{FailureThreshold: 1, OpenDuration: time.Hour})
	regs[2].Declare("k")
	var heard []string
	regs[1].AddListener(func(c breaker.StateChange) { heard = append(heard, c.To.String()+" "+c.Reason.String()) })
	if err := regs[2].Trip("k"); err != nil {
		t.Fatal(err)
	}
	for i, r := range regs {
		if a := r.Admission("k"); a.State != breaker.StateOpen {
			t.Fatalf("instance %d after the trip: %+v", i+1, a)
		}
	}
	if err := regs[0].Reset("k"); err != nil {
		t.Fatal(err)
	}
	for i, r := range regs {
		if a := r.Admission("k"); a.State != breaker.StateClosed {
			t.Fatalf("instance %d after the reset: %+v", i+1, a)
		}
	}
	if fmt.Sprint(heard) != "[open applied closed applied]" {
		t.Fatalf("instance 2 heard %v", heard)
	}
}

// With the store away the breakers work on local state (a trip still fails fast, within the
// store's timeout), the error is reported, and once the store answers again the local trip is
// published.
func TestSharedStoreAwayKeepsLocalState(t *testing.T) {
	var storeErrs atomic.Int64
	st, clock, regs := fleet(2, breaker.Config{FailureThreshold: 1, OpenDuration: 10 * time.Second,
		OnStoreError: []func(error){func(error) { storeErrs.Add(1) }}})
	st.down.Store(true)
	fail(t, regs[0], "k", 1)
	if _, err := regs[0].Gate("k"); !errors.Is(err, breaker.ErrOpen) || storeErrs.Load() == 0 {
		t.Fatalf("with the store away: %v, %d store errors", err, storeErrs.Load())
	}
	if a := regs[1].Admission("k"); a.State != breaker.StateClosed {
		t.Fatalf("the other instance cannot know: %+v", a)
	}
	st.down.Store(false)
	fail(t, regs[0], "other", 1) // a store call that succeeds: the trip of k is published after it
	deadline := time.Now().Add(10 * time.Second)
	for st.row("k").State != breaker.StateOpen {
		if time.Now().After(deadline) {
			t.Fatalf("the local trip was not published: %+v", st.row("k"))
		}
		time.Sleep(time.Millisecond)
	}
	if a := regs[1].Admission("k"); a.State != breaker.StateOpen {
		t.Fatalf("instance 2 after the store came back: %+v", a)
	}
	_ = clock
}

// The closed success path makes no store call.
func TestSharedClosedPathMakesNoStoreCall(t *testing.T) {
	st, _, regs := fleet(1, breaker.Config{})
	before := st.calls.Load()
	for range 10_000 {
		p, err := regs[0].Gate("k")
		if err != nil {
			t.Fatal(err)
		}
		p.Success()
	}
	if n := st.calls.Load() - before; n != 0 {
		t.Fatalf("%d store calls on the closed success path", n)
	}
}

// A store whose clock is behind this instance's refuses the claim of the probes until its own
// time has come: the registry takes the store's open time and does not ask again at every call.
func TestSharedClaimFollowsTheStoresClock(t *testing.T) {
	st, clock, regs := fleet(1, breaker.Config{FailureThreshold: 1, OpenDuration: 10 * time.Second})
	fail(t, regs[0], "k", 1)
	st.mu.Lock()
	row := st.rows["k"]
	row.OpenUntil = row.OpenUntil.Add(5 * time.Second) // the store's clock lags by 5 s
	st.rows["k"] = row
	st.mu.Unlock()
	clock.Advance(10 * time.Second)
	before := st.calls.Load()
	for range 100 {
		if _, err := regs[0].Gate("k"); !errors.Is(err, breaker.ErrOpen) {
			t.Fatalf("a call before the store's open time: %v", err)
		}
	}
	if n := st.calls.Load() - before; n != 1 {
		t.Fatalf("%d store calls for 100 calls before the store's open time, want the one claim", n)
	}
	if a := regs[0].Admission("k"); a.State != breaker.StateOpen || a.Remaining != 5*time.Second {
		t.Fatalf("after the refused claim: %+v", a)
	}
	clock.Advance(5 * time.Second)
	if p, err := regs[0].Gate("k"); err != nil || !p.Probe() {
		t.Fatalf("at the store's open time: %v", err)
	}
}

// A store that hangs costs a call at most one StoreTimeout: after a trip that timed out, the
// claim of the probes within the retry interval probes locally without a wait, and the trips
// that follow do not wait at all.
func TestSharedHangingStoreCostsOneTimeout(t *testing.T) {
	st, clock, regs := fleet(1, breaker.Config{FailureThreshold: 1, OpenDuration: 500 * time.Millisecond, StoreTimeout: 50 * time.Millisecond})
	st.hang.Store(true)
	began := time.Now()
	fail(t, regs[0], "k", 1)
	if took := time.Since(began); took > 500*time.Millisecond {
		t.Fatalf("a trip took %s with StoreTimeout 50ms", took)
	}
	clock.Advance(500 * time.Millisecond) // within the retry interval (a second)
	began = time.Now()
	p, err := regs[0].Gate("k")
	if took := time.Since(began); err != nil || !p.Probe() || took > 40*time.Millisecond {
		t.Fatalf("the half-open call took %s (%v), want no wait: the store is taken to be away after the trip's timeout", took, err)
	}
	began = time.Now()
	p.Failure()
	fail(t, regs[0], "other", 1)
	if took := time.Since(began); took > 40*time.Millisecond {
		t.Fatalf("the transitions while the store is away took %s", took)
	}
	st.hang.Store(false)
}

// While a claim of the probes waits for the store, the breaker refuses with no open time left
// (the claim decides), and its Admission says to look again within StoreTimeout, when the
// claim has its answer or has given up.
func TestSharedAdmissionWhileClaiming(t *testing.T) {
	st, clock, regs := fleet(1, breaker.Config{FailureThreshold: 1, OpenDuration: 10 * time.Second, StoreTimeout: 500 * time.Millisecond})
	fail(t, regs[0], "k", 1)
	clock.Advance(10 * time.Second)
	st.hang.Store(true)
	before := st.calls.Load()
	claimed := make(chan error, 1)
	go func() {
		_, err := regs[0].Gate("k")
		claimed <- err
	}()
	for st.calls.Load() == before { // the claim reached the store, which holds it for StoreTimeout
		select {
		case err := <-claimed:
			t.Fatalf("the claim ended before it reached the store: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	if a := regs[0].Admission("k"); a != (breaker.Admission{State: breaker.StateOpen, Recheck: 500 * time.Millisecond}) {
		t.Errorf("while the claim waits for the store: %+v, want open with no time left, to look again within StoreTimeout", a)
	}
	if err := <-claimed; !errors.Is(err, breaker.ErrOpen) {
		t.Errorf("the claim the store did not answer: %v, want refused", err)
	}
	st.hang.Store(false)
}
