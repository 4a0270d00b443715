package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// eventFault records its starts and stops with the time of each, since the bubble's start.
type eventFault struct {
	t0     time.Time
	mu     sync.Mutex
	events []string
	block  bool // Start waits for its context to end
}

func (f *eventFault) log(what string, p Phase) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, fmt.Sprintf("%s %s %v", what, p.Label, time.Since(f.t0)))
}

func (f *eventFault) Start(ctx context.Context, p Phase) error {
	f.log("start", p)
	if f.block {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (f *eventFault) Stop(_ context.Context, p Phase) error {
	f.log("stop", p)
	return nil
}

func testScenario() Scenario {
	return Scenario{Name: "test", Class: Chaos, RecoveryBound: 5 * time.Second, Phases: []Phase{
		{Label: "warmup", Kind: Warmup, Duration: 2 * time.Second},
		{Label: "baseline", Kind: Clean, Duration: 10 * time.Second},
		{Label: "kill", Kind: KillWorker, Duration: 5 * time.Second},
		{Label: "pressure", Kind: HighLoad, Duration: 3 * time.Second},
		{Label: "exhaustion", Kind: PoolExhaustion, Duration: 4 * time.Second, IdleConns: 10},
		{Label: "recovery", Kind: Recovery, Duration: 10 * time.Second},
	}}
}

func TestSchedulerRunsPhasesInOrderWithFaultsAtBoundaries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		f := &eventFault{t0: t0}
		var factors []float64
		var ended []string
		s := Scheduler{Faults: map[Kind]Fault{KillWorker: f, PoolExhaustion: f},
			OnPhase:    func(p Phase) { factors = append(factors, p.RateFactor()) },
			OnPhaseEnd: func(w Window) { ended = append(ended, w.Phase.Label) }}
		sc := testScenario()
		tl, err := s.Run(t.Context(), sc)
		if err != nil || tl.TimedOut || tl.Err != nil {
			t.Fatalf("Run: err %v, timed out %v, tl.Err %v", err, tl.TimedOut, tl.Err)
		}
		if len(tl.Windows) != len(sc.Phases) {
			t.Fatalf("%d windows, want %d", len(tl.Windows), len(sc.Phases))
		}
		at := t0
		for i, w := range tl.Windows {
			if w.Phase.Label != sc.Phases[i].Label {
				t.Errorf("window %d is %q, want %q", i, w.Phase.Label, sc.Phases[i].Label)
			}
			if !w.Start.Equal(at) || w.End.Sub(w.Start) != sc.Phases[i].Duration {
				t.Errorf("window %q runs %v+%v, want %v+%v", w.Phase.Label, w.Start.Sub(t0), w.End.Sub(w.Start),
					at.Sub(t0), sc.Phases[i].Duration)
			}
			at = w.End
		}
		want := []string{"start kill 12s", "stop kill 17s", "start exhaustion 20s", "stop exhaustion 24s"}
		if !slices.Equal(f.events, want) {
			t.Errorf("fault events %q, want %q", f.events, want)
		}
		if want := []float64{1, 1, 1, 1.5, 1, 1}; !slices.Equal(factors, want) {
			t.Errorf("rate factors %v, want %v", factors, want)
		}
		if len(ended) != 6 || ended[5] != "recovery" {
			t.Errorf("phase ends %q", ended)
		}
		if w, ok := tl.Window("kill"); !ok || !w.Contains(t0.Add(12*time.Second)) || w.Contains(t0.Add(17*time.Second)) {
			t.Errorf("Window(kill) = %v, %v", w, ok)
		}
	})
}

func TestSchedulerTimeoutAbortsAndStopsTheFault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		f := &eventFault{t0: t0, block: true}
		sc := testScenario()
		sc.Timeout = 30 * time.Second
		tl, err := (&Scheduler{Faults: map[Kind]Fault{KillWorker: f, PoolExhaustion: f}}).Run(t.Context(), sc)
		if !errors.Is(err, ErrTimeout) || !tl.TimedOut {
			t.Fatalf("Run = %v, timed out %v; want ErrTimeout", err, tl.TimedOut)
		}
		if tl.Err != nil {
			t.Errorf("tl.Err = %v, want nil for a timeout", tl.Err)
		}
		// The kill phase's fault hangs from 12 s until the timeout at 30 s; nothing after it runs.
		if want := []string{"start kill 12s", "stop kill 30s"}; !slices.Equal(f.events, want) {
			t.Errorf("fault events %q, want %q", f.events, want)
		}
		if len(tl.Windows) != 3 || tl.Windows[2].End.Sub(t0) != 30*time.Second {
			t.Errorf("windows %v, want 3 ending at 30s", tl.Windows)
		}
	})
}

func TestSchedulerCallerCancelIsNotATimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		s := Scheduler{OnPhase: func(p Phase) {
			if p.Label == "b" {
				cancel()
			}
		}}
		sc := Scenario{Name: "c", Phases: []Phase{{Label: "a", Kind: Clean, Duration: time.Second},
			{Label: "b", Kind: Clean, Duration: time.Second}}}
		tl, err := s.Run(ctx, sc)
		if !errors.Is(err, context.Canceled) || tl.TimedOut || tl.Err != nil {
			t.Fatalf("Run = %v, timed out %v, tl.Err %v; want context.Canceled only", err, tl.TimedOut, tl.Err)
		}
	})
}

func TestSchedulerRefusesAMissingFault(t *testing.T) {
	tl, err := (&Scheduler{}).Run(t.Context(), testScenario())
	if err == nil || !strings.Contains(err.Error(), `phase "kill" needs a Fault for kind "kill-worker"`) {
		t.Fatalf("Run = %v", err)
	}
	if len(tl.Windows) != 0 {
		t.Errorf("%d windows ran", len(tl.Windows))
	}
}

func TestScenarioValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*Scenario)
		wants string
	}{
		{"no phases", func(s *Scenario) { s.Phases = nil }, "has no phases"},
		{"no label", func(s *Scenario) { s.Phases[1].Label = "" }, "phase 1 has no label"},
		{"repeated", func(s *Scenario) { s.Phases[1].Label = "warmup" }, `label "warmup" is repeated`},
		{"kind", func(s *Scenario) { s.Phases[1].Kind = "nap" }, `unknown kind "nap"`},
		{"duration", func(s *Scenario) { s.Phases[1].Duration = 0 }, "duration 0s, want > 0"},
		{"conns", func(s *Scenario) { s.Phases[4].IdleConns = 0 }, "idle conns 0, want > 0"},
	} {
		sc := testScenario()
		tc.edit(&sc)
		if err := sc.Validate(); err == nil || !strings.Contains(err.Error(), tc.wants) {
			t.Errorf("%s: Validate = %v, want %q", tc.name, err, tc.wants)
		}
	}
	if err := testScenario().Validate(); err != nil {
		t.Errorf("valid scenario: %v", err)
	}
}

func TestMethodScenarios(t *testing.T) {
	chaos, pressure := ChaosScenarios(), PressureCells()
	if len(chaos) != 5 || len(pressure) != 4 {
		t.Fatalf("%d chaos scenarios and %d pressure cells, want 5 and 4", len(chaos), len(pressure))
	}
	for _, sc := range append(chaos, pressure...) {
		if err := sc.Validate(); err != nil {
			t.Error(err)
		}
		if sc.Phases[0].Kind != Warmup || sc.RecoveryBound != sc.Phases[len(sc.Phases)-1].Duration {
			t.Errorf("%s: first phase %s, recovery bound %v", sc.Name, sc.Phases[0].Kind, sc.RecoveryBound)
		}
	}
	if d := chaos[2].Duration(); d != 30*time.Second+60*time.Second+120*time.Second+60*time.Second {
		t.Errorf("%s lasts %v", chaos[2].Name, d)
	}
	if p := chaos[2].Phases[2]; p.Kind != RepeatedKill || p.Period != 20*time.Second {
		t.Errorf("%s fault phase %+v", chaos[2].Name, p)
	}
	q := chaos[2].Scaled(10)
	if q.Phases[2].Period != 2*time.Second || q.RecoveryBound != 6*time.Second || chaos[2].Phases[2].Period != 20*time.Second {
		t.Errorf("Scaled(10): period %v, bound %v; original period %v", q.Phases[2].Period, q.RecoveryBound, chaos[2].Phases[2].Period)
	}
}
