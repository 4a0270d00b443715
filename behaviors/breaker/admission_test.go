package breaker_test

import (
	"errors"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
)

// Admission says what a call made now would meet, without making one: closed; open with the
// time to the probe; half-open with the probe slots still free, fewer as probes start and
// none once all are out (Refuses), and then the time until the probes out time out (Recheck);
// OpenFor agrees with it at every step.
func TestAdmissionFollowsTheBreaker(t *testing.T) {
	clock := &stepClock{}
	r := breaker.NewRegistry(breaker.Config{FailureThreshold: 1, OpenDuration: 10 * time.Second, HalfOpenProbes: 2, ProbeTimeout: time.Minute, Clock: clock})
	check := func(when string, want breaker.Admission) {
		t.Helper()
		got := r.Admission("k")
		if got != want {
			t.Fatalf("%s: %+v, want %+v", when, got, want)
		}
		if remaining, open := r.OpenFor("k"); open != want.Refuses() || remaining != want.Remaining {
			t.Fatalf("%s: OpenFor %v %v disagrees with %+v", when, remaining, open, want)
		}
	}
	check("unknown", breaker.Admission{State: breaker.StateClosed})
	p, err := r.Gate("k")
	if err != nil {
		t.Fatal(err)
	}
	check("closed", breaker.Admission{State: breaker.StateClosed})
	p.Failure()
	check("just opened", breaker.Admission{State: breaker.StateOpen, Remaining: 10 * time.Second})
	clock.Advance(4 * time.Second)
	check("open", breaker.Admission{State: breaker.StateOpen, Remaining: 6 * time.Second})
	clock.Advance(6 * time.Second)
	check("open time passed", breaker.Admission{State: breaker.StateHalfOpen, FreeProbes: 2})
	p1, err := r.Gate("k")
	if err != nil || !p1.Probe() {
		t.Fatal(p1, err)
	}
	check("one probe out", breaker.Admission{State: breaker.StateHalfOpen, FreeProbes: 1})
	p2, err := r.Gate("k")
	if err != nil || !p2.Probe() {
		t.Fatal(p2, err)
	}
	check("both probes out", breaker.Admission{State: breaker.StateHalfOpen, Recheck: time.Minute})
	clock.Advance(20 * time.Second)
	check("both probes out for a while", breaker.Admission{State: breaker.StateHalfOpen, Recheck: 40 * time.Second})
	if _, err := r.Gate("k"); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("a third call: %v", err)
	}
	p1.Success()
	p2.Success()
	check("closed by its probes", breaker.Admission{State: breaker.StateClosed})
}
