package exec

import (
	"context"
	"reflect"
	"sync/atomic"

	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/mediator"
)

// Queue is what the module's packages reach of a durable queue beyond its exported API.
type Queue interface {
	// NameOf returns the name request type t is registered under.
	NameOf(t reflect.Type) (string, bool)
	// Decode decodes an item's payload into a new request of its registered type.
	Decode(name string, payload []byte) (any, error)
	// Executor returns the executor of a scheduler configured as the queue's Start would be,
	// as instance (empty: the queue's InstanceID, or "durabletest" when it names none),
	// dispatching through sender under ctx. The caller closes it when done.
	Executor(ctx context.Context, sender mediator.Sender, instance string) (Executor, error)
}

var resolve atomic.Pointer[func(q any) (Queue, bool)]

// Register sets how Of finds a queue's internals. Package durable calls it once, when it is
// initialised.
func Register(f func(q any) (Queue, bool)) { resolve.Store(&f) }

// Of returns the internals of q, a *durable.Queue; false for anything else.
func Of(q any) (Queue, bool) {
	f := resolve.Load()
	if f == nil {
		return nil, false
	}
	return (*f)(q)
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
