package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Clock is the time the scheduler and the accounting read: the real one in a run, a bubble's
// under testing/synctest or a fake in tests, so that an hour-long scenario is tested in no time.
type Clock interface {
	// Now is the current time.
	Now() time.Time
	// After delivers the time on the channel once d has passed.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// RealClock is the wall clock, the default when a Clock is nil.
var RealClock Clock = realClock{}

// Fault is the action of a phase kind: kill a replica, restart PostgreSQL, hold connections.
// The scheduler calls Start when a phase of its kind begins and Stop when it ends, even when the
// scenario is aborted in between, so that what Start took (connections, a stopped server) is
// given back.
type Fault interface {
	// Start begins the fault for the phase; it returns once the fault is in place. A periodic
	// fault (repeated-kill, pg-backend-kill) starts its own loop and returns.
	Start(ctx context.Context, p Phase) error
	// Stop ends the fault and releases what it holds.
	Stop(ctx context.Context, p Phase) error
}

// Window is when one phase ran.
type Window struct {
	// Phase is the phase that ran.
	Phase Phase
	// Start and End bound the phase on the scheduler's clock; End is when it was cut short for
	// an aborted scenario.
	Start, End time.Time
}

// Contains reports whether t falls in the window: at or after Start and before End.
func (w Window) Contains(t time.Time) bool { return !t.Before(w.Start) && t.Before(w.End) }

// Timeline is what the scheduler did with a scenario: the windows of the phases it began, in
// order, and whether it ran them all.
type Timeline struct {
	// Scenario is the scenario run.
	Scenario Scenario
	// Windows are the phases begun, in order.
	Windows []Window
	// TimedOut is set when the scenario ran past its timeout and was aborted; the phases not
	// begun have no window.
	TimedOut bool
	// Err is the first error of a fault's Start or Stop, which also aborts the scenario.
	Err error
}

// Window returns the window of the phase labelled label, and whether it ran.
func (t Timeline) Window(label string) (Window, bool) {
	for _, w := range t.Windows {
		if w.Phase.Label == label {
			return w, true
		}
	}
	return Window{}, false
}

// ErrTimeout is the error of a scenario aborted by its timeout.
var ErrTimeout = errors.New("chaos: scenario timed out")

// Scheduler runs the phases of a scenario in order on a clock, starting and stopping the fault
// of each phase kind at the phase's boundaries.
type Scheduler struct {
	// Clock is the time the phases are measured on; nil is RealClock.
	Clock Clock
	// Faults are the actions of the phase kinds that have one; a scenario with a faulty phase
	// whose kind is missing here is refused before it starts.
	Faults map[Kind]Fault
	// OnPhase, when set, is called as each phase begins, before its fault starts: the load
	// generator reads the phase's RateFactor from it.
	OnPhase func(Phase)
	// OnPhaseEnd, when set, is called as each phase ends, after its fault stopped: the
	// PostgreSQL diagnostics are sampled there.
	OnPhaseEnd func(Window)
}

// Run runs the scenario. It returns the timeline and an error: the scenario's invalidity or a
// missing fault (nothing ran then), the caller's cancellation (ctx.Err(), not a timeout), a
// fault's error, or ErrTimeout.
func (s *Scheduler) Run(ctx context.Context, sc Scenario) (Timeline, error) {
	tl := Timeline{Scenario: sc}
	if err := sc.Validate(); err != nil {
		return tl, err
	}
	for _, p := range sc.Phases {
		if p.Faulty() && s.Faults[p.Kind] == nil {
			return tl, fmt.Errorf("chaos: scenario %q: phase %q needs a Fault for kind %q", sc.Name, p.Label, p.Kind)
		}
	}
	clock := s.Clock
	if clock == nil {
		clock = RealClock
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	timedOut := make(chan struct{})
	deadline := clock.After(sc.EffectiveTimeout())
	go func() {
		select {
		case <-deadline:
			close(timedOut)
			cancel()
		case <-ctx.Done():
		}
	}()
	abort := func(err error) (Timeline, error) {
		select {
		case <-timedOut:
			tl.TimedOut, err = true, ErrTimeout
		default:
		}
		if tl.Err == nil && !tl.TimedOut && ctx.Err() == nil {
			tl.Err = err
		}
		return tl, err
	}
	for _, p := range sc.Phases {
		if ctx.Err() != nil {
			return abort(ctx.Err())
		}
		if s.OnPhase != nil {
			s.OnPhase(p)
		}
		w := Window{Phase: p, Start: clock.Now()}
		tl.Windows = append(tl.Windows, w)
		last := &tl.Windows[len(tl.Windows)-1]
		f := s.Faults[p.Kind]
		if !p.Faulty() {
			f = nil
		}
		var runErr error
		if f != nil {
			if err := f.Start(ctx, p); err != nil {
				runErr = fmt.Errorf("chaos: phase %q: start %s: %w", p.Label, p.Kind, err)
			}
		}
		if runErr == nil {
			select {
			case <-clock.After(p.Duration - clock.Now().Sub(w.Start)):
			case <-ctx.Done():
				runErr = ctx.Err()
			}
		}
		if f != nil {
			// Stop gets a context the abort has not cancelled: what Start took is given back.
			if err := f.Stop(context.WithoutCancel(ctx), p); err != nil && runErr == nil {
				runErr = fmt.Errorf("chaos: phase %q: stop %s: %w", p.Label, p.Kind, err)
			}
		}
		last.End = clock.Now()
		if s.OnPhaseEnd != nil {
			s.OnPhaseEnd(*last)
		}
		if runErr != nil {
			return abort(runErr)
		}
	}
	return tl, nil
}
