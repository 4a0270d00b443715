package chaos

import (
	"fmt"
	"time"
)

// Kind is what a phase does to the system under test or to its PostgreSQL. The names are the
// method's phase types, so a scenario reads the same here and in its description.
type Kind string

// The phase kinds. Warmup, clean, high-load and recovery only set the offered rate; the others
// also name a Fault the scheduler starts at the phase's beginning and stops at its end.
const (
	// Warmup runs the offered rate to absorb start-up artifacts; its samples are left out of
	// every figure.
	Warmup Kind = "warmup"
	// Clean is the steady baseline at the offered rate; recovery is measured against it.
	Clean Kind = "clean"
	// HighLoad offers HighLoadMultiplier times the offered rate.
	HighLoad Kind = "high-load"
	// Recovery returns to the offered rate after a stress phase, to see the system catch up.
	Recovery Kind = "recovery"
	// IdleInTx holds one transaction with an XID assigned for the whole phase, pinning the
	// cluster's xmin so that vacuum cannot reclaim dead tuples.
	IdleInTx Kind = "idle-in-tx"
	// ActiveReaders holds Readers REPEATABLE READ connections scanning the hot tables over and
	// over, the analytics-on-OLTP pattern that also pins the horizon.
	ActiveReaders Kind = "active-readers"
	// KillWorker kills replica Instance (SIGKILL: no graceful stop) and leaves it down.
	KillWorker Kind = "kill-worker"
	// StartWorker starts replica Instance again.
	StartWorker Kind = "start-worker"
	// RepeatedKill kills and restarts replica Instance every Period for the whole phase.
	RepeatedKill Kind = "repeated-kill"
	// PostgresRestart stops PostgreSQL for half the phase, then starts it for the rest.
	PostgresRestart Kind = "postgres-restart"
	// PGBackendKill terminates Rate of the system's PostgreSQL backends per second.
	PGBackendKill Kind = "pg-backend-kill"
	// PoolExhaustion holds IdleConns idle connections to the system's database for the phase.
	PoolExhaustion Kind = "pool-exhaustion"
)

// HighLoadMultiplier is the factor a HighLoad phase applies to the offered rate: the method's
// 1.5, enough to outpace a system sized for the offered rate without a burst that no system
// could absorb.
const HighLoadMultiplier = 1.5

var kinds = map[Kind]bool{Warmup: true, Clean: true, HighLoad: true, Recovery: true, IdleInTx: true,
	ActiveReaders: true, KillWorker: true, StartWorker: true, RepeatedKill: true,
	PostgresRestart: true, PGBackendKill: true, PoolExhaustion: true}

// Phase is one step of a scenario: a kind run for a duration.
type Phase struct {
	// Label names the phase in reports ("baseline", "kill", …); unique within a scenario.
	Label string
	// Kind is what the phase does.
	Kind Kind
	// Duration is how long the phase lasts.
	Duration time.Duration
	// Instance is the replica a KillWorker, StartWorker or RepeatedKill phase acts on.
	Instance int
	// Period is how often a RepeatedKill phase kills its replica.
	Period time.Duration
	// Rate is how many backends per second a PGBackendKill phase terminates.
	Rate float64
	// IdleConns is how many connections a PoolExhaustion phase holds.
	IdleConns int
	// Readers is how many connections an ActiveReaders phase scans with.
	Readers int
}

// RateFactor is the factor of the offered rate during the phase: HighLoadMultiplier for a
// HighLoad phase, 1 for every other.
func (p Phase) RateFactor() float64 {
	if p.Kind == HighLoad {
		return HighLoadMultiplier
	}
	return 1
}

// Faulty reports whether the phase injects a fault or pressure, that is needs a Fault.
func (p Phase) Faulty() bool {
	switch p.Kind {
	case Warmup, Clean, HighLoad, Recovery:
		return false
	}
	return true
}

// Class sorts scenarios into the two halves of the scorecard.
type Class string

const (
	// Chaos scenarios break something (a replica, PostgreSQL, its connections) and see the
	// system recover.
	Chaos Class = "chaos"
	// Pressure scenarios load the system or its database without breaking anything.
	Pressure Class = "pressure"
)

// Scenario is an ordered list of phases run one after the other, and what passing it means.
type Scenario struct {
	// Name is the method's name of the scenario.
	Name string
	// Class is the scorecard half the scenario counts in.
	Class Class
	// Phases run in order.
	Phases []Phase
	// RecoveryBound is how long after its last fault or pressure phase ends the system may take
	// to get back to 90 % of its clean throughput and still pass.
	RecoveryBound time.Duration
	// Timeout aborts the scenario when it runs this long (a fault that hangs, a system that
	// does not stop); zero is the sum of the phases' durations plus a quarter of it, room for
	// the faults' own start and stop.
	Timeout time.Duration
}

// Duration is the sum of the phases' durations.
func (s Scenario) Duration() time.Duration {
	var d time.Duration
	for _, p := range s.Phases {
		d += p.Duration
	}
	return d
}

// EffectiveTimeout is Timeout, or its default when zero.
func (s Scenario) EffectiveTimeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	d := s.Duration()
	return d + d/4
}

// Validate reports the first thing wrong with the scenario: no phases, a phase with no label,
// a repeated label, an unknown kind, a duration that is not positive, or a fault phase without
// the parameter it needs.
func (s Scenario) Validate() error {
	if len(s.Phases) == 0 {
		return fmt.Errorf("chaos: scenario %q has no phases", s.Name)
	}
	seen := map[string]bool{}
	for i, p := range s.Phases {
		switch {
		case p.Label == "":
			return fmt.Errorf("chaos: scenario %q: phase %d has no label", s.Name, i)
		case seen[p.Label]:
			return fmt.Errorf("chaos: scenario %q: phase label %q is repeated", s.Name, p.Label)
		case !kinds[p.Kind]:
			return fmt.Errorf("chaos: scenario %q: phase %q has unknown kind %q", s.Name, p.Label, p.Kind)
		case p.Duration <= 0:
			return fmt.Errorf("chaos: scenario %q: phase %q has duration %v, want > 0", s.Name, p.Label, p.Duration)
		case p.Kind == RepeatedKill && p.Period <= 0:
			return fmt.Errorf("chaos: scenario %q: phase %q (repeated-kill) has period %v, want > 0", s.Name, p.Label, p.Period)
		case p.Kind == PGBackendKill && p.Rate <= 0:
			return fmt.Errorf("chaos: scenario %q: phase %q (pg-backend-kill) has rate %v, want > 0", s.Name, p.Label, p.Rate)
		case p.Kind == PoolExhaustion && p.IdleConns <= 0:
			return fmt.Errorf("chaos: scenario %q: phase %q (pool-exhaustion) has idle conns %d, want > 0", s.Name, p.Label, p.IdleConns)
		}
		seen[p.Label] = true
	}
	return nil
}
