package durable

import (
	"errors"
	"fmt"
	"time"
)

// Limits and defaults.
const (
	// DefaultMaxPayloadBytes is the default of Config.MaxPayloadBytes: 4 MiB.
	DefaultMaxPayloadBytes = 4 << 20
	// MaxPayloadLimit is the largest Config.MaxPayloadBytes accepted: 10⁹ bytes, the longest
	// value SQLite stores by default, just under PostgreSQL's 1 GiB limit on a field.
	MaxPayloadLimit = 1_000_000_000
	// MaxMetadataSize is the largest metadata an item may carry, in bytes of its JSON
	// encoding: room for a W3C trace context and baggage (8 KiB) and a few identifiers, and
	// no more, since every row and claim carries it.
	MaxMetadataSize = 16 << 10
	// MaxTokenBytes is the longest token WithToken accepts.
	MaxTokenBytes = 200
	// DefaultPersistTimeout is the default of DeferralConfig.PersistTimeout.
	DefaultPersistTimeout = 5 * time.Second
)

// Sentinel errors. The errors durable returns match one of them with errors.Is and name the
// request, item or letter in their message.
var (
	// ErrDeferred: the request was persisted for a later retry, not failed (a *DeferredError).
	ErrDeferred = errors.New("durable: deferred for retry")
	// ErrUnknownRequest: an item's name or a request's type is not registered.
	ErrUnknownRequest = errors.New("durable: unknown request")
	// ErrDecode: an item's payload does not decode into its registered type.
	ErrDecode = errors.New("durable: payload does not decode")
	// ErrEncode: the request's codec failed or panicked; nothing was stored.
	ErrEncode = errors.New("durable: request does not encode")
	// ErrStopped: Start after Shutdown; a queue schedules once.
	ErrStopped = errors.New("durable: scheduler stopped")
	// ErrStarted: Start while the scheduler runs.
	ErrStarted = errors.New("durable: scheduler already started")
	// ErrOutcomeUnknown: a write was sent but its outcome is unknown. From an enqueue or
	// deferral the item may or may not be stored (an *OutcomeUnknownError carries its token);
	// from a replay, the handler ran but its outcome was not recorded (see Queue.Replay).
	ErrOutcomeUnknown = errors.New("durable: outcome unknown")
	// ErrPayloadTooLarge: the encoded request exceeds Config.MaxPayloadBytes; nothing was
	// stored (a *PayloadTooLargeError).
	ErrPayloadTooLarge = errors.New("durable: payload too large")
	// ErrMetadataTooLarge: the item's metadata exceeds MaxMetadataSize; nothing was stored.
	ErrMetadataTooLarge = errors.New("durable: request metadata too large")
	// ErrNotFound: no dead letter has that id.
	ErrNotFound = errors.New("durable: dead letter not found")
	// ErrConflict: the dead letter is not failed, or another replay of it runs.
	ErrConflict = errors.New("durable: dead letter conflict")
	// ErrTooMany: a bulk call got more than 100 ids (one operator's screen, and one call that
	// does not hold the database long); nothing was done.
	ErrTooMany = errors.New("durable: too many dead letter ids")
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
