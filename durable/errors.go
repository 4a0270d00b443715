package durable

import (
	"errors"
	"fmt"
)

// Sentinel errors. The errors durable returns match one of them with errors.Is, and say
// which request, name or item they are about in their message.
var (
	// ErrDeferred reports a request that was not completed now but persisted for a later retry.
	// It is returned by the Deferral behavior as a *DeferredError carrying the item id.
	ErrDeferred = errors.New("durable: deferred for retry")
	// ErrUnknownRequest reports an item whose name is not registered, or a request type that is
	// not registered.
	ErrUnknownRequest = errors.New("durable: unknown request")
	// ErrDecode reports an item whose payload does not decode into its registered type.
	ErrDecode = errors.New("durable: payload does not decode")
	// ErrStopped reports a scheduler started after Shutdown: a scheduler runs once.
	ErrStopped = errors.New("durable: scheduler stopped")
	// ErrStarted reports a scheduler started while it runs.
	ErrStarted = errors.New("durable: scheduler already started")
	// ErrOutcomeUnknown reports a write whose outcome cannot be known. From an enqueue (or a
	// deferral's write): the insert was sent, and then the caller's deadline passed or the
	// connection was lost before the answer came back, so the item may or may not have been
	// stored; it is returned as an *OutcomeUnknownError carrying the item's token. From a
	// replay: the handler ran, but its outcome could not be recorded before the replay's lease
	// was gone (see Queue.Replay).
	ErrOutcomeUnknown = errors.New("durable: outcome unknown")
	// ErrPayloadTooLarge reports a request whose encoded payload is longer than
	// Config.MaxPayloadBytes; nothing was stored. It is returned as a *PayloadTooLargeError.
	ErrPayloadTooLarge = errors.New("durable: payload too large")
)

// OutcomeUnknownError reports an insert that may or may not have been stored: it was sent,
// and its answer never came (the caller's deadline passed while the database ran or committed
// it, the connection broke). It matches ErrOutcomeUnknown and unwraps to Cause. What to do:
// look the item up with Queue.ItemByToken(Token) once the database answers again, or enqueue
// the same request again with WithToken(Token), which stores it once either way.
type OutcomeUnknownError struct {
	// Token is the item's token: the item, if it was stored, holds it.
	Token string
	// Name is the request's registered name.
	Name string
	// Cause is the error the insert met.
	Cause error
}

// Error implements error.
func (e *OutcomeUnknownError) Error() string {
	return fmt.Sprintf("durable: outcome unknown: request %q (token %s) may or may not have been stored: %v", e.Name, e.Token, e.Cause)
}

// Is reports whether target is ErrOutcomeUnknown.
func (e *OutcomeUnknownError) Is(target error) bool { return target == ErrOutcomeUnknown }

// Unwrap returns Cause.
func (e *OutcomeUnknownError) Unwrap() error { return e.Cause }

// PayloadTooLargeError reports a request refused because its encoded payload is longer than
// the queue's limit (Config.MaxPayloadBytes). It matches ErrPayloadTooLarge.
type PayloadTooLargeError struct {
	// Name is the request's registered name.
	Name string
	// Size is the encoded payload's length in bytes.
	Size int
	// Limit is the queue's Config.MaxPayloadBytes (or its default).
	Limit int
}

// Error implements error.
func (e *PayloadTooLargeError) Error() string {
	return fmt.Sprintf("durable: payload too large: request %q encodes to %d bytes, more than the queue's limit of %d (Config.MaxPayloadBytes)", e.Name, e.Size, e.Limit)
}

// Is reports whether target is ErrPayloadTooLarge.
func (e *PayloadTooLargeError) Is(target error) bool { return target == ErrPayloadTooLarge }

// DeferredError is the result of a request the Deferral behavior persisted for later. It
// matches ErrDeferred. It deliberately does not unwrap to Cause: the caller's request did not
// fail, it was accepted for later.
type DeferredError struct {
	// ItemID is the persisted item, or the item already pending under the same dedupe key.
	ItemID ItemID
	// Duplicate is true when an item with the same dedupe key was already pending or running,
	// so nothing new was persisted.
	Duplicate bool
	// Token is the token the deferral's write gave the item (see WithToken): the item's own,
	// unless Duplicate (the item pending under the dedupe key holds its own token).
	Token string
	// Cause is the error of the last in-process attempt.
	Cause error
}

// Error implements error.
func (e *DeferredError) Error() string {
	if e.Duplicate {
		return fmt.Sprintf("durable: deferred: item %d already pending: %v", e.ItemID, e.Cause)
	}
	return fmt.Sprintf("durable: deferred as item %d: %v", e.ItemID, e.Cause)
}

// Is reports whether target is ErrDeferred.
func (e *DeferredError) Is(target error) bool { return target == ErrDeferred }

// Deferred reports true: the request was accepted for later, not failed, so a fallback
// behavior outside the deferral passes it on (see behaviors.Deferring).
func (e *DeferredError) Deferred() bool { return true }

// DeferredItem returns ItemID, Duplicate and Cause in types of the standard library, so that
// an observer reports a deferral without importing durable, and so without linking it: package
// tracing finds a deferral's item this way.
func (e *DeferredError) DeferredItem() (item int64, duplicate bool, cause error) {
	return int64(e.ItemID), e.Duplicate, e.Cause
}

// unknownRequestError names an unregistered request name or type; it matches ErrUnknownRequest.
type unknownRequestError struct {
	// Name is the item's request name; empty when Type is set.
	Name string
	// Type is the Go type of an unregistered request value; empty when Name is set.
	Type string
}

// Error implements error.
func (e *unknownRequestError) Error() string {
	if e.Name != "" {
		return fmt.Sprintf("durable: unknown request name %q", e.Name)
	}
	return fmt.Sprintf("durable: request type %s is not registered", e.Type)
}

// Is reports whether target is ErrUnknownRequest.
func (e *unknownRequestError) Is(target error) bool { return target == ErrUnknownRequest }

// decodeError reports a payload that does not decode. It matches ErrDecode and unwraps to the
// codec's error.
type decodeError struct {
	// Name is the item's request name.
	Name string
	// Err is the codec's error.
	Err error
}

// Error implements error.
func (e *decodeError) Error() string {
	return fmt.Sprintf("durable: payload of %q does not decode: %v", e.Name, e.Err)
}

// Is reports whether target is ErrDecode.
func (e *decodeError) Is(target error) bool { return target == ErrDecode }

// Unwrap returns the codec's error.
func (e *decodeError) Unwrap() error { return e.Err }

// ErrEncode reports a request whose codec failed or panicked while encoding it; nothing was
// stored.
var ErrEncode = errors.New("durable: request does not encode")

// encodeError reports a request that its codec could not encode. It matches ErrEncode and
// unwraps to the codec's error.
type encodeError struct {
	// Name is the request's registered name.
	Name string
	// Err is the codec's error, or one carrying the value a panicking codec panicked with.
	Err error
}

// Error implements error.
func (e *encodeError) Error() string {
	return fmt.Sprintf("durable: request %q does not encode: %v", e.Name, e.Err)
}

// Is reports whether target is ErrEncode.
func (e *encodeError) Is(target error) bool { return target == ErrEncode }

// Unwrap returns the codec's error.
func (e *encodeError) Unwrap() error { return e.Err }
