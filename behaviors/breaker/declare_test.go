package breaker_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
)

func TestDeclaredKeysCanBeTrippedBeforeAnyTraffic(t *testing.T) {
	reg := breaker.NewRegistry(breaker.Config{})
	if err := reg.Trip("https://api.example/v1"); !errors.Is(err, breaker.ErrUnknown) {
		t.Fatalf("Trip of an undeclared, unused key: %v, want ErrUnknown", err)
	}
	reg.Declare("https://api.example/v1", "https://billing.example")
	snaps := reg.Snapshot()
	if len(snaps) != 2 || snaps[0].Key != "https://api.example/v1" || snaps[0].State != breaker.StateClosed {
		t.Fatalf("Snapshot after Declare = %+v", snaps)
	}
	if err := reg.Trip("https://api.example/v1"); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gate("https://api.example/v1"); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("Gate after Trip of a declared key: %v, want ErrOpen", err)
	}
	// Declaring again keeps the breaker and its state.
	reg.Declare("https://api.example/v1")
	if s, _ := reg.Get("https://api.example/v1"); s.State != breaker.StateOpen {
		t.Fatalf("state after a second Declare = %v, want open", s.State)
	}
	if err := reg.Reset("https://api.example/v1"); err != nil {
		t.Fatal(err)
	}
	if reg.Len() != 2 {
		t.Fatalf("Len = %d, want 2", reg.Len())
	}
}

func TestDeclaredBreakersAreNeverEvicted(t *testing.T) {
	clock := &stepClock{}
	reg := breaker.NewRegistry(breaker.Config{Clock: clock, IdleTTL: time.Minute})
	reg.Declare("declared")
	p, _ := reg.Gate("used")
	p.Success()
	for range 3 {
		clock.Advance(time.Hour)
		reg.Sweep()
	}
	if _, err := reg.Get("used"); !errors.Is(err, breaker.ErrUnknown) {
		t.Fatalf("an idle undeclared breaker was not evicted: %v", err)
	}
	if _, err := reg.Get("declared"); err != nil {
		t.Fatalf("a declared breaker was evicted: %v", err)
	}
}

func TestDeclareEmptyKeyPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "Declare") {
			t.Fatalf("recover() = %v, want a panic naming Declare", r)
		}
	}()
	breaker.NewRegistry(breaker.Config{}).Declare("")
}

func TestStateAndSnapshotReadInJSON(t *testing.T) {
	// A clock that stands still: the remaining time is exactly the open duration.
	reg := breaker.NewRegistry(breaker.Config{Clock: fixedClock{time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}})
	reg.Declare("a", "b")
	if err := reg.Trip("b"); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(reg.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	if !strings.Contains(s, `"state":"closed"`) || !strings.Contains(s, `"state":"open"`) ||
		!strings.Contains(s, `"remaining_ms":30000`) || !strings.Contains(s, `"opened_at":null`) || strings.Contains(s, "Remaining") {
		t.Fatalf("json.Marshal(Snapshot()) = %s, want states by name, the remaining time in ms, null opened_at while closed", s)
	}
	var back []breaker.Snapshot
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	if snaps := reg.Snapshot(); len(back) != len(snaps) || back[1].State != breaker.StateOpen || back[1].Remaining != 30*time.Second ||
		!back[1].OpenedAt.Equal(snaps[1].OpenedAt.Truncate(time.Nanosecond)) {
		t.Fatalf("round trip: %+v, want %+v", back, snaps)
	}
	for _, st := range []breaker.State{breaker.StateClosed, breaker.StateOpen, breaker.StateHalfOpen} {
		text, err := st.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back breaker.State
		if err := back.UnmarshalText(text); err != nil || back != st {
			t.Fatalf("UnmarshalText(%q) = %v, %v; want %v", text, back, err, st)
		}
	}
	var st breaker.State
	if err := st.UnmarshalText([]byte("1")); err == nil {
		t.Fatal("UnmarshalText accepted a number")
	}
	if _, err := breaker.State(7).MarshalText(); err == nil {
		t.Fatal("MarshalText accepted an invalid state")
	}
}
