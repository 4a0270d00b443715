package durable

import (
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/switchboard-go/switchboard/durable/driver"
	"github.com/switchboard-go/switchboard/durable/record"
)

// Limits and defaults.
const (
	DefaultMaxPayloadBytes = 4 << 20         // the default of Config.MaxPayloadBytes
	MaxPayloadLimit        = 1_000_000_000   // the largest MaxPayloadBytes: SQLite's longest value, under PostgreSQL's 1 GiB
	MaxMetadataSize        = 16 << 10        // an item's JSON metadata: a trace context, baggage and ids; every claim carries it
	MaxTokenBytes          = 200             // the longest token WithToken accepts
	DefaultPersistTimeout  = 5 * time.Second // the default of DeferralConfig.PersistTimeout
)

// Sentinel errors. The errors durable returns match one of them with errors.Is and name the
// request, item or letter in their message.
var (
	ErrDeferred         = errors.New("durable: deferred for retry") // stored for later, not failed: a *DeferredError
	ErrUnknownRequest   = errors.New("durable: unknown request")    // a name or type not registered
	ErrDecode           = errors.New("durable: payload does not decode")
	ErrEncode           = errors.New("durable: request does not encode") // the codec failed; nothing stored
	ErrStopped          = errors.New("durable: scheduler stopped")       // Start after Shutdown
	ErrStarted          = errors.New("durable: scheduler already started")
	ErrOutcomeUnknown   = errors.New("durable: outcome unknown")            // sent, unanswered: see OutcomeUnknownError, Queue.Replay
	ErrPayloadTooLarge  = errors.New("durable: payload too large")          // see Config.MaxPayloadBytes
	ErrMetadataTooLarge = errors.New("durable: request metadata too large") // see MaxMetadataSize
	// ErrNoHistory: Queue.History on a queue whose driver keeps no history (it does not
	// implement driver.HistoryStore).
	ErrNoHistory = errors.New("durable: the driver keeps no history")
	// ErrNotFound: the item, item token, dead letter, bulk action or schedule a call named does
	// not exist (a *NotFoundError says which).
	ErrNotFound = errors.New("durable: not found")
	ErrConflict = errors.New("durable: dead letter conflict")     // not failed, or being replayed
	ErrTooMany  = errors.New("durable: too many dead letter ids") // over 100 (a screen; a short call); nothing done
	// ErrInvalidBulkAction: StartBulkAction or StartItemBulkAction refused its spec (the error
	// names each problem); nothing was done.
	ErrInvalidBulkAction = errors.New("durable: invalid bulk action")
	// ErrBulkActionActive: StartBulkAction (StartItemBulkAction) refused an action of the same
	// kind and filter as one that has not finished (a *driver.BulkActionActiveError names it): a
	// second would act on the same letters (items). Nothing was done. Cancel the first to start
	// another.
	ErrBulkActionActive = driver.ErrBulkActionActive
	ErrBadCursor        = errors.New("durable: not an item cursor") // an ItemFilter.After no ItemPage.Next gave
	// ErrInvalidEnqueue: Enqueue or EnqueueTx refused what an option or the request gave (a
	// token, a reference, a key, a uniqueness window, a debounce, a deadline, a priority); the
	// message names it. Nothing was stored: a caller's mistake, not the database's (a service
	// answers it as bad input).
	ErrInvalidEnqueue = errors.New("durable: invalid enqueue")
)

// invalidEnqueue is an Enqueue's refusal of what it was given: its message is the check's,
// and it matches ErrInvalidEnqueue.
type invalidEnqueue struct{ err error }

func (e *invalidEnqueue) Error() string        { return e.err.Error() }
func (e *invalidEnqueue) Unwrap() error        { return e.err }
func (e *invalidEnqueue) Is(target error) bool { return target == ErrInvalidEnqueue }

// refused wraps err, a check of an enqueue's input, so that it matches ErrInvalidEnqueue; nil
// stays nil.
func refused(err error) error {
	if err == nil {
		return nil
	}
	return &invalidEnqueue{err: err}
}

// OutcomeUnknownError reports an insert sent whose answer never came. It matches
// ErrOutcomeUnknown and unwraps to Cause. Find the item with Queue.ItemByToken,
// or enqueue again WithToken(Token): it is stored once either way.
type OutcomeUnknownError struct {
	Token, Name string
	Cause       error // what the insert met
}

// Error implements error.
func (e *OutcomeUnknownError) Error() string {
	return fmt.Sprintf("durable: outcome unknown: request %q (token %s) may or may not have been stored: %v", e.Name, e.Token, e.Cause)
}

// Is reports whether target is ErrOutcomeUnknown.
func (e *OutcomeUnknownError) Is(target error) bool { return target == ErrOutcomeUnknown }

// Unwrap returns Cause.
func (e *OutcomeUnknownError) Unwrap() error { return e.Cause }

// PayloadTooLargeError reports a request over Config.MaxPayloadBytes. It matches ErrPayloadTooLarge.
type PayloadTooLargeError struct {
	Name  string
	Size  int // the encoded payload's length
	Limit int // Config.MaxPayloadBytes, or its default
}

// Error implements error.
func (e *PayloadTooLargeError) Error() string {
	return fmt.Sprintf("durable: payload too large: request %q encodes to %d bytes, more than the queue's limit of %d (Config.MaxPayloadBytes)", e.Name, e.Size, e.Limit)
}

// Is reports whether target is ErrPayloadTooLarge.
func (e *PayloadTooLargeError) Is(target error) bool { return target == ErrPayloadTooLarge }

// DeferredError is the result of a request the Deferral stored for later. It matches
// ErrDeferred and does not unwrap to Cause: the request did not fail, it was accepted.
type DeferredError struct {
	ItemID    record.ItemID // the stored item, or when Duplicate the one pending under the dedupe key
	Duplicate bool
	Token     string // ItemID's token
	Cause     error  // the last in-process attempt's error
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

// Deferred reports true, so an outer fallback passes it on (behaviors.Deferring).
func (e *DeferredError) Deferred() bool { return true }

// DeferredItem returns ItemID, Duplicate and Cause in types of the standard library, so that
// an observer reports a deferral without importing durable, and so without linking it: package
// tracing finds a deferral's item this way.
func (e *DeferredError) DeferredItem() (item int64, duplicate bool, cause error) {
	return int64(e.ItemID), e.Duplicate, e.Cause
}

// AcceptedID returns ItemID in decimal: a DeferredError is an httpcall.Accepted, so that
// httpcall.WriteError answers a deferred request 202 Accepted with the id of the item that will
// do it (for a Duplicate, the item already pending), without either package importing the other.
func (e *DeferredError) AcceptedID() string { return strconv.FormatInt(int64(e.ItemID), 10) }

// unknownRequestError names an unregistered request name or type; it matches ErrUnknownRequest.
type unknownRequestError struct {
	// Name is the item's request name; empty when Type is set.
	Name string
	// Type is the Go type of an unregistered request value; empty when Name is set.
	Type string
	// Hint, when not empty, says what is registered instead (the type's pointer).
	Hint string
}

// Error implements error.
func (e *unknownRequestError) Error() string {
	if e.Name != "" {
		return fmt.Sprintf("durable: unknown request name %q", e.Name)
	}
	if e.Hint != "" {
		return fmt.Sprintf("durable: request type %s is not registered (%s)", e.Type, e.Hint)
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

// NotFoundError says that the thing a call named does not exist: What is its kind ("item",
// "item token", "dead letter", "bulk action", "schedule") and Key the id, token or name the
// call gave. It matches ErrNotFound.
type NotFoundError struct {
	What, Key string
}

func (e *NotFoundError) Error() string { return fmt.Sprintf("durable: %s %s not found", e.What, e.Key) }

// Is reports whether target is ErrNotFound.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// notFoundOf returns a *NotFoundError of what and key for a store's err saying that there is no
// such row, and err otherwise.
func notFoundOf(err error, what, key string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return &NotFoundError{What: what, Key: key}
	}
	return err
}
