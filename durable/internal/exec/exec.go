// Package exec runs a queue's due items one at a time, in the calling goroutine, through the
// per-item code of the scheduler: the executor package durable/durabletest drives. Package
// durable hands it out through Queue.Internal, whose argument only the module's packages can
// write (Seal), so no init-time wiring and no untyped values cross the boundary.
package exec

import (
	"context"
	"reflect"

	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/mediator"
)

// Seal is the argument of the durable methods meant for the module's own packages: a package
// outside the module cannot import this one, so it cannot write a Seal (its unexported field
// keeps an unnamed struct literal from standing in for one).
type Seal struct{ _ sealed }

type sealed struct{}

// Queue is what the module's packages reach of a durable queue beyond its exported API. C is
// the scheduler's configuration type (durable.SchedulerConfig).
type Queue[C any] interface {
	// NameOf returns the name request type t is registered under.
	NameOf(t reflect.Type) (string, bool)
	// Decode decodes an item's payload into a new request of its registered type.
	Decode(name string, payload []byte) (any, error)
	// Executor returns the per-item code of a scheduler configured by cfg that dispatches
	// through sender, under ctx. The caller closes it when done.
	Executor(ctx context.Context, sender mediator.Sender, cfg C) (Executor, error)
}

// Executor is the per-item code of one scheduler: the scheduler's workers run Process, and
// Work runs Claim, Process and Complete in turn.
type Executor interface {
	// Claim claims one due item, or returns nil when none is due.
	Claim(ctx context.Context) (*store.Claimed, error)
	// Process dispatches c as one attempt and returns its outcome.
	Process(c *store.Claimed) store.Completion
	// Complete records comp, as the scheduler records a completion.
	Complete(ctx context.Context, comp store.Completion) error
	// Close ends the executor's dispatch context.
	Close()
}

// Counts tallies what Work did with the items it claimed.
type Counts struct {
	Succeeded, Retried, Dead, Refused int
}

// Work claims the due items of e one at a time and runs each through Process and Complete, in
// the calling goroutine, until none is due. Dispatches run under ctx; once ctx ends, Work
// stops and returns ctx's error.
func Work(ctx context.Context, e Executor) (Counts, error) {
	var n Counts
	for ctx.Err() == nil {
		c, err := e.Claim(ctx)
		if err != nil {
			return n, err
		}
		if c == nil {
			return n, nil
		}
		comp := e.Process(c)
		if err := e.Complete(context.WithoutCancel(ctx), comp); err != nil {
			return n, err
		}
		switch {
		case comp.Outcome == store.OutcomeSucceeded:
			n.Succeeded++
		case comp.State == store.StateDead:
			n.Dead++
		case comp.Outcome == "":
			n.Refused++
		default:
			n.Retried++
		}
	}
	return n, ctx.Err()
}
