// Package mediator sends typed requests through staged pipelines of behaviors to exactly one
// handler each, publishes notifications to any number of handlers, and opens streams.
//
// A request type embeds Returns[R] to declare its response type R, and is sent as a pointer:
//
//	type GetUser struct {
//		mediator.Returns[*User]
//		ID int
//	}
//
//	user, err := mediator.Send(ctx, m, &GetUser{ID: 7}) // user is *User
//
// Handlers are registered into a samber/do/v2 injector, so their constructors receive their
// dependencies. Build resolves every handler once, composes every pipeline once and reports
// every problem at once; after Build, a dispatch does no lookup in the injector and no
// allocation of its own.
//
// Behaviors have a Stage (Pre, Default, Post) and an Order. Stage always beats order; within a
// stage lower order is outer; ties keep registration order. Explain shows the resolved chain.
//
// A caller says something about one dispatch with WithMarks (Unattended, SingleAttempt, Stored)
// or ContextKey.WithFor: such values bind to the request they are set for, so the requests its handler
// sends with the same context do not inherit them. A caller whose context is already done gets
// its context's error before anything runs.
//
// Errors are values: sentinels (ErrNoHandler, ErrPanic, ...) matched by typed errors
// (*NoHandlerError, *PanicError, ...) with errors.Is and errors.As. A caller's context
// cancellation passes through the mediator unchanged.
package mediator
