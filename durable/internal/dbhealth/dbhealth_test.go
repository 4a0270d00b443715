package dbhealth

import (
	"errors"
	"testing"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// One Health shared by several services: a success of an op that has not failed (a call
// already under way when the outage began) does not end it; a later success of an op that
// failed does, with one line.
func TestRecoveredOnlyByAnOpThatFailed(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	h := &Health{Log: zap.New(core)}
	down := errors.New("connection refused")
	h.Note("sweep", down)
	h.Note("claim", nil) // sent before the outage, answered after the sweep failed
	if n := logs.FilterMessage("durable: database calls recovered").Len(); n != 0 {
		t.Fatalf("a call of an op that never failed ended the failures (%d lines)", n)
	}
	if h.Failures() != 1 {
		t.Fatalf("failures %d, want 1", h.Failures())
	}
	h.Note("claim", down) // the claim fails too: logged once already
	h.Note("sweep", nil)
	if n := logs.FilterMessage("durable: database calls recovered").Len(); n != 1 || h.Failures() != 0 {
		t.Fatalf("after the sweep succeeded: %d recovered lines, %d failures; want 1 and 0", n, h.Failures())
	}
	if n := logs.FilterMessage("durable: database call failed").Len(); n != 1 {
		t.Fatalf("%d failure lines for one outage, want 1", n)
	}
	h.Note("claim", down) // a new outage starts with a line of its own, and no stale op ends it
	h.Note("sweep", nil)
	if n := logs.FilterMessage("durable: database call failed").Len(); n != 2 || h.Failures() != 1 {
		t.Fatalf("second outage: %d failure lines, %d failures; want 2 and 1", n, h.Failures())
	}
}
