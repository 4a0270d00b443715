package mediator

import (
	"context"
	"iter"
	"reflect"
)

// Returns is embedded in a request type to declare its response type R:
//
//	type GetUser struct {
//		mediator.Returns[*User]
//		ID int
//	}
//
// It has no size and no fields; Send infers R from it, so call sites need no type arguments.
type Returns[R any] struct{}

func (Returns[R]) responseOf(R) {}

func (Returns[R]) responseType() reflect.Type { return reflect.TypeFor[R]() }

// Request is satisfied by any type that embeds Returns[R]. Requests are passed as pointers.
type Request[R any] interface {
	responseOf(R)
	responseType() reflect.Type
}

// requestMarker is the non-generic part of Request, used where R is not known.
type requestMarker interface{ responseType() reflect.Type }

// Void is the response type of commands: requests whose handler returns only an error.
type Void struct{}

// Command is embedded in a request type that has no response:
//
//	type DeleteUser struct {
//		mediator.Command
//		ID int
//	}
type Command = Returns[Void]

// Handler handles requests of type Q with responses of type R. Exactly one handler serves each
// request type.
type Handler[Q Request[R], R any] interface {
	Handle(ctx context.Context, req Q) (R, error)
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc[Q Request[R], R any] func(ctx context.Context, req Q) (R, error)

// Handle calls f.
func (f HandlerFunc[Q, R]) Handle(ctx context.Context, req Q) (R, error) { return f(ctx, req) }

// Yields is embedded in a stream request type to declare its item type T:
//
//	type ListUsers struct {
//		mediator.Yields[*User]
//		Prefix string
//	}
type Yields[T any] struct{}

func (Yields[T]) itemOf(T) {}

func (Yields[T]) itemType() reflect.Type { return reflect.TypeFor[T]() }

// StreamRequest is satisfied by any type that embeds Yields[T].
type StreamRequest[T any] interface {
	itemOf(T)
	itemType() reflect.Type
}

type streamMarker interface{ itemType() reflect.Type }

// StreamHandler handles stream requests of type Q, yielding items of type T.
// The sequence should stop producing when yield returns false or ctx is done. It must not call
// yield again after yield returned false, nor after the sequence returned (from a goroutine it
// left running, or from a later stream that kept it): as in a range-over-func loop, such a
// call panics and delivers nothing.
type StreamHandler[Q StreamRequest[T], T any] interface {
	Handle(ctx context.Context, req Q) iter.Seq2[T, error]
}

// StreamHandlerFunc adapts a function to a StreamHandler.
type StreamHandlerFunc[Q StreamRequest[T], T any] func(ctx context.Context, req Q) iter.Seq2[T, error]

// Handle calls f.
func (f StreamHandlerFunc[Q, T]) Handle(ctx context.Context, req Q) iter.Seq2[T, error] {
	return f(ctx, req)
}

// NotificationHandler handles notifications of type N. A notification type may have any number
// of handlers, including none.
type NotificationHandler[N any] interface {
	Handle(ctx context.Context, n N) error
}

// NotificationHandlerFunc adapts a function to a NotificationHandler.
type NotificationHandlerFunc[N any] func(ctx context.Context, n N) error

// Handle calls f.
func (f NotificationHandlerFunc[N]) Handle(ctx context.Context, n N) error { return f(ctx, n) }
