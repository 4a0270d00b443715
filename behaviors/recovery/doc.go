// Package recovery holds the recovery behavior of switchboard: the outermost behavior of a
// pipeline (but for tracing, which records what it returns), it turns a panic of any behavior inside it into a *mediator.PanicError, as the
// mediator already does for handlers.
package recovery
