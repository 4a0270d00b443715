package mediator

import (
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
)

// Sentinel errors. Each typed error below matches its sentinel with errors.Is.
var (
	// ErrNoHandler reports a request, stream request or notification type with no handler.
	ErrNoHandler = errors.New("mediator: no handler")
	// ErrDuplicateHandler reports a request type with more than one handler.
	ErrDuplicateHandler = errors.New("mediator: more than one handler")
	// ErrPanic reports a handler or behavior that panicked.
	ErrPanic = errors.New("mediator: panic")
	// ErrNotBuilt reports a dispatch before Build ran successfully.
	ErrNotBuilt = errors.New("mediator: Build has not run")
	// ErrRegistrationClosed reports a second Build. Registering after Build panics with a
	// message that carries it.
	ErrRegistrationClosed = errors.New("mediator: registration closed: Build already ran")
	// ErrClosed reports a publish after Close.
	ErrClosed = errors.New("mediator: closed")
	// ErrInvalidBehavior reports a behavior whose configuration is invalid.
	ErrInvalidBehavior = errors.New("mediator: invalid behavior")
	// ErrNilRequest reports a nil request, stream request or notification.
	ErrNilRequest = errors.New("mediator: nil request")
	// ErrNilContext reports a dispatch given a nil context: nothing runs. Pass the caller's
	// context, or context.Background() where there is none.
	ErrNilContext = errors.New("mediator: nil context: pass the caller's context, or context.Background()")
)

// NoHandlerError names the type that has no handler. It matches ErrNoHandler.
type NoHandlerError struct {
	// Type is the request, stream request or notification type.
	Type reflect.Type
	// Kind is "request", "stream request" or "notification".
	Kind string
}

func (e *NoHandlerError) Error() string {
	return fmt.Sprintf("mediator: no handler for %s %s", e.Kind, typeName(e.Type))
}

// Is reports whether target is ErrNoHandler.
func (e *NoHandlerError) Is(target error) bool { return target == ErrNoHandler }

// DuplicateHandlerError names a request type registered with more than one handler.
// It matches ErrDuplicateHandler.
type DuplicateHandlerError struct {
	// Type is the request or stream request type.
	Type reflect.Type
	// Count is how many handlers were registered for it.
	Count int
}

func (e *DuplicateHandlerError) Error() string {
	return fmt.Sprintf("mediator: %d handlers for request %s, want exactly 1", e.Count, typeName(e.Type))
}

// Is reports whether target is ErrDuplicateHandler.
func (e *DuplicateHandlerError) Is(target error) bool { return target == ErrDuplicateHandler }

// PanicError carries the value a handler or behavior panicked with and the stack at the panic.
// It matches ErrPanic; if the value is an error, Unwrap returns it.
type PanicError struct {
	// Value is what was passed to panic.
	Value any
	// Stack is the goroutine stack captured where the panic was recovered.
	Stack []byte
}

// NewPanicError captures the current stack. Call it from the deferred function that recovered v.
func NewPanicError(v any) *PanicError {
	return &PanicError{Value: v, Stack: debug.Stack()}
}

func (e *PanicError) Error() string { return fmt.Sprintf("mediator: panic: %v", e.Value) }

// Is reports whether target is ErrPanic.
func (e *PanicError) Is(target error) bool { return target == ErrPanic }

// Unwrap returns the panic value when it is an error, so errors.Is/As reach it.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// BehaviorError names a behavior whose configuration is invalid. It matches ErrInvalidBehavior
// and unwraps to the behavior's own error.
type BehaviorError struct {
	// Behavior is the behavior's name.
	Behavior string
	// Request is the request type the problem was found for; nil when it concerns every type.
	Request reflect.Type
	// Err is what is wrong.
	Err error
}

func (e *BehaviorError) Error() string {
	if e.Request != nil {
		return fmt.Sprintf("mediator: behavior %q for request %s: %v", e.Behavior, typeName(e.Request), e.Err)
	}
	return fmt.Sprintf("mediator: behavior %q: %v", e.Behavior, e.Err)
}

// Is reports whether target is ErrInvalidBehavior.
func (e *BehaviorError) Is(target error) bool { return target == ErrInvalidBehavior }

// Unwrap returns the behavior's own error.
func (e *BehaviorError) Unwrap() error { return e.Err }

// HandlerError reports a handler whose constructor failed when Build resolved it from the
// injector. It unwraps to the constructor's error.
type HandlerError struct {
	// Type is the request, stream request or notification type the handler serves.
	Type reflect.Type
	// Err is the constructor's or injector's error.
	Err error
}

func (e *HandlerError) Error() string {
	return fmt.Sprintf("mediator: resolving handler for %s: %v", typeName(e.Type), e.Err)
}

// Unwrap returns the constructor's error.
func (e *HandlerError) Unwrap() error { return e.Err }

func typeName(t reflect.Type) string {
	if t == nil {
		return "<nil>"
	}
	return t.String()
}
