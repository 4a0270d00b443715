package driver

import (
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-go/switchboard/durable/record"
)

// ItemRow is one stored item; its fields are documented on record.Item.
type ItemRow struct {
	ID            record.ItemID
	Name          string
	Payload       []byte
	State         record.ItemState
	Attempts      int
	Interruptions int
	Unattributed  int
	Isolate       bool
	ParkedKey     string
	DedupeKey     string
	OrderingKey   string
	NextAt        time.Time
	LeaseOwner    string
	LeaseUntil    time.Time
	LastError     string
	CreatedAt     time.Time
	UpdatedAt     time.Time
	// Metadata is the item's metadata as stored, a JSON object of strings; nil when it has none.
	Metadata []byte
	// Token is the identity the enqueuing client gave the item; empty for items enqueued
	// before tokens existed.
	Token string
	// GuardKey is the circuit-breaker key the enqueue named for the item; empty when none.
	GuardKey string
	// Deadline is when the item is dead if it has not succeeded; zero when it has none.
	Deadline time.Time
	// UniqueFor is how long the item holds its dedupe key after it succeeded; zero: not after
	// it ends.
	UniqueFor time.Duration
	// UniqueReleasedAt is when an enqueue of the key took it over after the window; zero
	// while held or never.
	UniqueReleasedAt time.Time
	// FairnessKey is the key the claim shares its turns by (NewItem.FairnessKey); empty for an
	// item that finished before fairness existed.
	FairnessKey string
	// Priority is the item's priority, 0 to MaxPriority (NewItem.Priority).
	Priority int
	// DebounceKey is the item's debounce key; empty when it is not debounced.
	DebounceKey string
	// DebounceUntil is the latest an enqueue of the key may make the item due; zero without a
	// key.
	DebounceUntil time.Time
	// Debounces is how many enqueues updated the item after the one that inserted it.
	Debounces int
	// Reference is the application's own id for the item (NewItem.Reference); empty when it
	// has none.
	Reference string
}

// Counted is the number of attempts that count against the retry policy's MaxAttempts: every
// attempt but those a shutdown interrupted and those abandoned beside other items.
func (it ItemRow) Counted() int { return it.Attempts - it.Interruptions - it.Unattributed }

// AttemptRow is one attempt row; its fields are documented on record.Attempt.
type AttemptRow struct {
	ID        int64
	ItemID    record.ItemID
	Number    int
	Instance  string
	StartedAt time.Time
	EndedAt   time.Time
	Outcome   record.Outcome
	Error     string
}

// NewItem describes an item to insert with Enqueue.
type NewItem struct {
	// Name is the registered name of the request type. Required.
	Name string
	// Payload is the encoded request.
	Payload []byte
	// NextAt is when the item is first due.
	NextAt time.Time
	// DedupeKey, when not empty, makes the insert a no-op if an item holds the key: one
	// pending or running with it, or one that succeeded with it less than its UniqueFor ago;
	// Enqueue then reports that item's id.
	DedupeKey string
	// UniqueFor, when positive, is how long the item holds DedupeKey after it succeeded.
	UniqueFor time.Duration
	// OrderingKey, when not empty, makes the item wait for every earlier item with the same key.
	OrderingKey string
	// LastError records why the item was deferred, if it was.
	LastError string
	// ParkedKey is the circuit-breaker key the item waits on, when an open breaker is why it
	// was deferred: the breaker closing makes it due at once (see Unpark).
	ParkedKey string
	// Now is the insert time.
	Now time.Time
	// Metadata, when not empty, is the item's metadata: a JSON object of strings.
	Metadata []byte
	// Token, when not empty, is the item's identity, unique among all items: an insert whose
	// token is taken inserts nothing, and Enqueue reports the item holding it.
	Token string
	// GuardKey, when not empty, is the circuit-breaker key that guards the item.
	GuardKey string
	// Reference, when not empty, is the application's own id for the item (an order number, a
	// notification id), by which an operator finds it (FindItems). Not unique: a token is.
	Reference string
	// Deadline, when not zero, is when the item is dead if it has not succeeded. NextAt must
	// not be later.
	Deadline time.Time
	// Deferred is set by the durable deferral, which stores a request whose in-process
	// attempts failed: the item's first attempt is then already a retry (see Claimed.Deferred).
	Deferred bool
	// FairnessKey is the key the claim shares its turns by: the due items of different keys
	// are taken in turn, so that one key's backlog does not delay another's items. Empty:
	// GuardKey, else Name.
	FairnessKey string
	// Priority is 0 (the default) to MaxPriority: among the due items of a key, and among the
	// keys' turns of one claim, a higher priority goes first, by HeadStart.
	Priority int
	// HeadStart is how much earlier than its due time the claim treats the item as due:
	// Priority times the queue's priority aging. So a higher priority item goes before the
	// lower priority items that came due less than the difference of their head starts before
	// it, and after those that came due longer before (they have aged). At least 0.
	HeadStart time.Duration
	// DebounceKey, when not empty, makes the enqueue update the item of Name with the key that
	// is pending and was never claimed, if there is one, instead of inserting: its payload,
	// metadata, token, guard key and deadline become this enqueue's, and it is due at NextAt,
	// or at its DebounceUntil if that is earlier; it keeps its id, ordering key and
	// DebounceUntil. Enqueue then reports its id with existed = true. At most one such item
	// exists per name and key, however many instances enqueue at once, and an enqueue that
	// meets a claim of the item either updates it before the claim reads it or inserts a new
	// item. A claim takes an item with a key only when no earlier item of its name and key is
	// pending or running. An item with a debounce key has no DedupeKey nor UniqueFor, and its
	// Token is one no item holds.
	DebounceKey string
	// DebounceUntil, with DebounceKey, is the latest an enqueue of the key may make the item
	// due, set by the enqueue that inserts it (its Now plus the maximum delay) and kept by the
	// updates. Not before NextAt.
	DebounceUntil time.Time
}

// MaxPriority is the highest priority an item may have (NewItem.Priority).
const MaxPriority = 9

// Claimed is an item claimed by Claim: it is running, leased to the claimer, and its attempt
// count already includes the attempt being made. Its ItemRow's FairnessKey is set (the queue
// counts its claims by it: Queue.BusiestKeys); a claim may leave the row's other columns that
// the run does not read (Priority, the debounce and uniqueness fields) at zero.
type Claimed struct {
	ItemRow
	// ClaimedAt is when the claim was made.
	ClaimedAt time.Time
	// Deferred is NewItem.Deferred of the item's enqueue: the durable deferral stored it, so
	// every attempt of it, its first included, is a retry of a call already made.
	Deferred bool
}

// Fence returns the item's fence for a completion.
func (c Claimed) Fence() Fence {
	return Fence{ItemID: c.ID, Owner: c.LeaseOwner, Attempt: c.Attempts}
}

// Fence identifies one lease of an item: its holder and the attempt number the claim made. A
// completion is accepted only while the item is still running under the same fence.
type Fence struct {
	// ItemID is the item.
	ItemID record.ItemID
	// Owner is the instance id that claimed the item.
	Owner string
	// Attempt is the item's attempt count after the claim.
	Attempt int
}

// Completion ends a lease.
type Completion struct {
	// Fence is the lease being ended.
	Fence Fence
	// State is the item's next state: record.StatePending (with NextAt), record.StateSucceeded or record.StateDead.
	State record.ItemState
	// NextAt is when a pending item is next due.
	NextAt time.Time
	// Outcome, when not empty, records an attempt with StartedAt, EndedAt and Error, which
	// Attempts lists from then on. When empty, the claim is undone: no attempt and the attempt
	// count goes back down (an item released at shutdown before it started, an open breaker,
	// an undecodable item).
	Outcome record.Outcome
	// SuccessRow asks that a succeeded attempt (record.OutcomeSucceeded) be written as a row
	// of its own, as every other attempt is, where a store may record it on its item: the
	// built-in stores do, and write the row only when asked (durable.Config.SuccessAttemptRows).
	SuccessRow bool
	// StartedAt is when the attempt started.
	StartedAt time.Time
	// EndedAt is when the attempt ended; it is also the item's update time.
	EndedAt time.Time
	// Error is the attempt's error or the reason for the new state; kept as the item's last
	// error when not empty.
	Error string
	// ParkedKey, for a pending item put off by an open circuit breaker, is that breaker's key:
	// Unpark with the key makes the item due at once.
	ParkedKey string
	// Cause, for an item completed as dead (record.StateDead), is why it died: its dead
	// letter keeps it (record.DeadLetter.Cause).
	Cause record.DeadCause

	// Name, Refused, Verdict, Paused, Expired and Freed are not stored: the item's request
	// name, whether a refusal parked it (Verdict: to wait for its breaker's probes to decide),
	// a pause of its breaker key parked it, or its deadline ended it, and the key it had been
	// parked on when it then got through (the other items parked on that key may go too), for
	// the caller.
	Name                              string
	Refused, Verdict, Paused, Expired bool
	Freed                             string
	// Limited and Held are not stored either: a concurrency limit held the item back, and
	// the limited key whose slot the lease held (the completion frees it).
	Limited bool
	Held    string
	// Stored says the completion is in the database already (Acquire parked the item it
	// held back): Complete and CompleteAndClaim accept it without writing it.
	Stored bool
}

// ItemStats summarises a store.
type ItemStats struct {
	// Counts is the number of items per state; every State is present. A state named in Over
	// has more items than the count's limit and is counted as the limit plus one.
	Counts map[record.ItemState]int64
	// Over names the states with more items than the count's limit.
	Over map[record.ItemState]bool
	// OldestDue is how long the oldest due pending item has been due; zero when none is due.
	OldestDue time.Duration
}

// ItemsFilter filters List.
type ItemsFilter struct {
	State   record.ItemState
	Name    string
	AfterID record.ItemID
	// Limit caps the number of items. Zero means 100.
	Limit int
}

// ErrLeaseLost reports a completion whose lease is no longer held: the item's lease expired
// and it was swept or claimed by another worker. The completion was not applied.
var ErrLeaseLost = errors.New("durable: lease lost")

// LeaseLostError names the fence of a rejected completion. It matches ErrLeaseLost.
type LeaseLostError struct {
	// Fence is the lease the completion claimed to hold.
	Fence Fence
}

// Error implements error.
func (e *LeaseLostError) Error() string {
	return fmt.Sprintf("durable: lease lost: item %d attempt %d is no longer held by %q", e.Fence.ItemID, e.Fence.Attempt, e.Fence.Owner)
}

// Is reports whether target is ErrLeaseLost.
func (e *LeaseLostError) Is(target error) bool { return target == ErrLeaseLost }

// UnknownOutcomeError reports an insert that may or may not have been applied: the statement
// may have reached the database before the error (a deadline that passed while it ran, a
// connection lost before its answer came back). It unwraps to that error.
type UnknownOutcomeError struct {
	// Err is the error the insert met.
	Err error
}

// Error implements error.
func (e *UnknownOutcomeError) Error() string { return e.Err.Error() }

// Unwrap returns the insert's error.
func (e *UnknownOutcomeError) Unwrap() error { return e.Err }

// LeaseExpired is the error recorded for an attempt whose lease ran out.
const LeaseExpired = "lease expired before completion"
