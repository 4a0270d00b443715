package durable_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
)

// lateClaimStore is a registry's breaker store whose moves to half-open (the claims of the
// probes) commit at once but reach the caller only after delay: past the registry's
// StoreTimeout the caller has its timeout, and the claim stands in the database, as when a
// claim queued on the breaker's row commits after its client gave up. With claims set, the
// claims go through that store (of the same name, on the same database), so the registry's
// store learns of them by its poll, as of another instance's, as it does of a claim whose
// statement its Transition gave up on; without, the registry's store made them and never tells
// of them: the registry learns of its claim only from the store's answers to its own later
// transitions.
type lateClaimStore struct {
	*durable.BreakerStore
	claims *durable.BreakerStore
	delay  time.Duration
}

func (s lateClaimStore) Transition(ctx context.Context, t breaker.Transition) (breaker.Shared, bool, error) {
	if t.To != breaker.StateHalfOpen {
		return s.BreakerStore.Transition(ctx, t)
	}
	late := time.NewTimer(s.delay)
	defer late.Stop()
	via := s.BreakerStore
	if s.claims != nil {
		via = s.claims
	}
	sh, applied, err := via.Transition(context.WithoutCancel(ctx), t)
	select {
	case <-late.C:
		return sh, applied, err
	case <-ctx.Done():
		return breaker.Shared{}, false, ctx.Err()
	}
}

// A call let through by one registry of the fleet.
type fleetCall struct {
	instance int
	at       time.Duration // since the trip
}

// Three registries on one PostgreSQL schema share a breaker whose claims of the probes commit
// after their callers' timeout, against a dependency that is down: every call let through fails
// and opens the breaker again for its open duration. Over 5 s the fleet probes about once per
// open period (one more for a claim that came late), never twice from one registry in one
// period, and no listener hears a state change into the same state.
func TestFleetBreakerLateClaimProbesOncePerPeriod(t *testing.T) {
	t.Parallel()
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	for _, told := range []bool{true, false} {
		name := "told back by the poll"
		if !told {
			name = "never told back"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			lateClaimFleet(t, postgresBackend(t, dsn), told)
		})
	}
}

// lateClaimFleet runs TestFleetBreakerLateClaimProbesOncePerPeriod on b; told: see
// lateClaimStore.
func lateClaimFleet(t *testing.T, b backend, told bool) {
	const (
		open   = time.Second
		gate   = 20 * time.Millisecond
		run    = 5 * time.Second
		n      = 3
		period = open / 2 // calls closer than this are in one open period
	)
	var (
		mu    sync.Mutex
		calls []fleetCall
		self  []string // the changes into the same state listeners heard
		start time.Time
	)
	regs := make([]*breaker.Registry, n)
	for i := range regs {
		q := b.bare(t, durable.Config{})
		cfg := durable.BreakerStoreConfig{RefreshInterval: 100 * time.Millisecond, Timeout: 5 * time.Second}
		st := lateClaimStore{BreakerStore: newBreakerStore(t, q, "fleet", cfg), delay: 300 * time.Millisecond}
		if told {
			st.claims = newBreakerStore(t, q, "fleet", cfg)
		}
		regs[i] = breaker.NewRegistry(breaker.Config{Store: st, Instance: fmt.Sprintf("r%d", i), FailureThreshold: 1, OpenDuration: open,
			OnStateChange: []func(breaker.StateChange){func(c breaker.StateChange) {
				if c.From == c.To {
					mu.Lock()
					self = append(self, fmt.Sprintf("r%d %s → %s (%s)", i, c.From, c.To, c.Reason))
					mu.Unlock()
				}
			}}})
		regs[i].Declare("k")
		select { // its store listens: it hears the others' transitions at once
		case <-durable.BreakerStoreListening(st.BreakerStore):
		case <-time.After(10 * time.Second):
			t.Fatalf("r%d's store does not listen after 10 s", i)
		}
	}
	p, err := regs[0].Gate("k")
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	p.Failure()
	eventually(t, 10*time.Second, "every registry seeing the trip", func() bool {
		for _, r := range regs {
			if s, _ := r.Get("k"); s.State != breaker.StateOpen {
				return false
			}
		}
		return true
	})
	var wg sync.WaitGroup
	for i, r := range regs {
		wg.Go(func() {
			tick := time.NewTicker(gate)
			defer tick.Stop()
			for now := range tick.C {
				if now.Sub(start) > run {
					return
				}
				p, err := r.Gate("k")
				if err != nil {
					continue
				}
				mu.Lock()
				calls = append(calls, fleetCall{instance: i, at: time.Since(start)})
				mu.Unlock()
				p.Failure() // the dependency is down
			}
		})
	}
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	slices.SortFunc(calls, func(a, b fleetCall) int { return int(a.at - b.at) })
	var log strings.Builder
	for _, c := range calls {
		fmt.Fprintf(&log, "\n  %6dms r%d", c.at.Milliseconds(), c.instance)
	}
	t.Logf("%d calls let through in %v:%s", len(calls), run, log.String())
	var problems []string
	last := map[int]time.Duration{}
	for _, c := range calls {
		if prev, ok := last[c.instance]; ok && c.at-prev < period {
			problems = append(problems, fmt.Sprintf("r%d let two calls through %dms apart (at %dms and %dms)",
				c.instance, (c.at-prev).Milliseconds(), prev.Milliseconds(), c.at.Milliseconds()))
		}
		last[c.instance] = c.at
	}
	// The open periods: runs of calls each within period of the one before.
	for i := 0; i < len(calls); {
		j := i + 1
		for j < len(calls) && calls[j].at-calls[j-1].at < period {
			j++
		}
		if j-i > 2 {
			problems = append(problems, fmt.Sprintf("%d calls in one open period from %dms (one probe, and one late claim at most)",
				j-i, calls[i].at.Milliseconds()))
		}
		i = j
	}
	if len(calls) < 2 {
		problems = append(problems, fmt.Sprintf("%d calls let through in %v: the fleet stopped probing", len(calls), run))
	}
	if len(self) > 0 {
		problems = append(problems, "listeners heard changes into the same state: "+strings.Join(self, ", "))
	}
	if len(problems) > 0 {
		t.Fatal(strings.Join(problems, "\n"))
	}
}
