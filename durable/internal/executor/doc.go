// Package executor runs one claimed item of the durable queue as one attempt: it decodes the
// request, asks the gate whether it may run, dispatches it through the mediator, and returns the
// completion the gate decides. The scheduler's workers and durabletest.Work run items through
// it alike.
package executor
