// Package testhooks carries what package durable/durabletest needs from package durable and
// durable does not export: durable sets these variables in its init, durabletest calls them.
// The values typed any are *durable.Queue and durable.SchedulerConfig; this package cannot name
// them without importing durable.
package testhooks

import (
	"context"
	"reflect"

	"github.com/switchboard-go/switchboard/mediator"
)

// Counts tallies what Work did with the items it claimed.
type Counts struct {
	Succeeded, Retried, Dead, Refused int
}

var (
	// Work claims every due item of the queue q, one at a time, and dispatches each through
	// sender as a scheduler configured by cfg would, with the scheduler's own per-item code.
	Work func(ctx context.Context, q any, sender mediator.Sender, cfg any) (Counts, error)
	// NameOf returns the name request type t is registered under on q.
	NameOf func(q any, t reflect.Type) (string, bool)
	// Decode decodes an item's payload into a new request of its registered type.
	Decode func(q any, name string, payload []byte) (any, error)
)
