package handlers

import (
	"context"
	"iter"

	"github.com/samber/do/v2"

	"github.com/switchboard-go/switchboard/mediator"
)

// Func returns fn as a request handler.
func Func[Q mediator.Request[R], R any](fn func(ctx context.Context, req Q) (R, error)) mediator.Handler[Q, R] {
	return mediator.HandlerFunc[Q, R](fn)
}

// Command returns fn, which has no response, as the handler of a command (a request embedding
// mediator.Command).
func Command[Q mediator.Request[mediator.Void]](fn func(ctx context.Context, cmd Q) error) mediator.Handler[Q, mediator.Void] {
	return mediator.HandlerFunc[Q, mediator.Void](func(ctx context.Context, cmd Q) (mediator.Void, error) {
		return mediator.Void{}, fn(ctx, cmd)
	})
}

// Notification returns fn as a notification handler.
func Notification[N any](fn func(ctx context.Context, n N) error) mediator.NotificationHandler[N] {
	return mediator.NotificationHandlerFunc[N](fn)
}

// Stream returns fn as a stream handler.
func Stream[Q mediator.StreamRequest[T], T any](fn func(ctx context.Context, req Q) iter.Seq2[T, error]) mediator.StreamHandler[Q, T] {
	return mediator.StreamHandlerFunc[Q, T](fn)
}

// Value returns a constructor that always yields h, for registering a handler that needs
// nothing from the injector:
//
//	mediator.Handle[*Ping, string](m, handlers.Value(handlers.Func(ping)))
func Value[H any](h H) do.Provider[H] {
	return func(do.Injector) (H, error) { return h, nil }
}
