package durable

import (
	"time"

	"github.com/switchboard-go/switchboard/durable/internal/store"
)

// ItemState is the lifecycle state of an item.
type ItemState string

// The states of an item. See docs/durable.md for the state machine.
const (
	// StatePending: waiting for its next attempt, due at Item.NextAt.
	StatePending ItemState = "pending"
	// StateRunning: claimed by a scheduler that holds a lease on it.
	StateRunning ItemState = "running"
	// StateSucceeded: an attempt succeeded. Terminal.
	StateSucceeded ItemState = "succeeded"
	// StateDead: attempts are exhausted, the last error was not retryable, or the item could not
	// be decoded. The row, its payload, last error and attempts are kept for operators.
	StateDead ItemState = "dead"
)

// Outcome is how an attempt (Attempt.Outcome) or a scheduled run (ScheduleRun.Outcome) ended.
type Outcome string

// Outcomes. A scheduled run ends succeeded, failed (an error, a panic, or a shutdown
// interrupting it) or skipped; an attempt in any but skipped.
const (
	// OutcomeSucceeded: the dispatch returned no error.
	OutcomeSucceeded Outcome = "succeeded"
	// OutcomeFailed: the dispatch returned an error.
	OutcomeFailed Outcome = "failed"
	// OutcomeSkipped: a scheduled run was due while the previous run of its schedule still
	// ran, so it was not started.
	OutcomeSkipped Outcome = "skipped"
	// OutcomeAbandoned: the lease expired before the holder completed the item (the holder died
	// or lost its database connection). The handler may or may not have run.
	OutcomeAbandoned Outcome = "abandoned"
	// OutcomeInterrupted: the scheduler shut down while the dispatch ran and cancelled it.
	OutcomeInterrupted Outcome = "interrupted"
)

// ItemID identifies an item in its queue's database.
type ItemID int64

// Item is one durable request.
type Item struct {
	// ID is the item's id, assigned at enqueue.
	ID ItemID
	// Name is the stable name the request type was registered under.
	Name string
	// Payload is the encoded request.
	Payload []byte
	// State is the item's state.
	State ItemState
	// Attempts counts the attempts made so far (the rows Queue.Attempts lists).
	Attempts int
	// Interruptions counts the attempts that a scheduler's shutdown interrupted. They are
	// attempts, but they do not count against the retry policy's MaxAttempts (see Counted).
	Interruptions int
	// Unattributed counts the abandoned attempts this item made while other items ran beside
	// it in the same instance: when that instance died, nothing says which item killed it, so
	// they do not count against MaxAttempts either (see Counted). The item runs alone next
	// time (Isolate), and a crash then is its own.
	Unattributed int
	// Isolate is true when the item's last lease ran out while it ran: its next claim runs it
	// alone in its instance.
	Isolate bool
	// ParkedKey is the circuit-breaker key a pending item waits on: it was put off because
	// that breaker was open, and the breaker closing makes it due at once.
	ParkedKey string
	// DedupeKey is empty or the key under which at most one item is pending or running.
	DedupeKey string
	// OrderingKey is empty or the key whose items are dispatched one at a time, in id order.
	OrderingKey string
	// NextAt is when a pending item is due.
	NextAt time.Time
	// LeaseOwner is the instance id holding a running item's lease.
	LeaseOwner string
	// LeaseUntil is when a running item's lease expires.
	LeaseUntil time.Time
	// LastError is the error of the last failed attempt or deferral, if any.
	LastError string
	// CreatedAt is when the item was enqueued.
	CreatedAt time.Time
	// UpdatedAt is when the item last changed.
	UpdatedAt time.Time
	// Metadata holds the context values the queue's propagators (Config.Propagators) took from
	// the caller that enqueued the item, by name; nil when they took none.
	Metadata map[string]string
	// Token is the item's identity, given before it was inserted: the caller's (WithToken) or
	// a random one. Queue.ItemByToken finds the item by it. Empty for items enqueued before
	// the queue's schema had tokens.
	Token string
}

// Counted is the number of attempts that count against the retry policy's MaxAttempts: every
// attempt but those a shutdown interrupted and those abandoned beside other items.
func (it Item) Counted() int { return it.Attempts - it.Interruptions - it.Unattributed }

// Attempt is one real try of an item, recorded as its own row.
type Attempt struct {
	// ID is the attempt row's own id.
	ID int64
	// ItemID is the item tried.
	ItemID ItemID
	// Number is the attempt's number for its item, from 1.
	Number int
	// Instance is the id of the scheduler instance that made the attempt.
	Instance string
	// StartedAt is when the item was claimed for the attempt (for OutcomeAbandoned) or when the
	// dispatch started.
	StartedAt time.Time
	// EndedAt is when the attempt ended or was found abandoned.
	EndedAt time.Time
	// Outcome is how the attempt ended.
	Outcome Outcome
	// Error is the attempt's error; empty on success.
	Error string
}

// Stats summarises a queue for dashboards and metrics.
type Stats struct {
	// Counts is the number of items per state; every ItemState is present.
	Counts map[ItemState]int64
	// OldestDue is how long the oldest due pending item has been due; zero when none is due.
	OldestDue time.Duration
	// DeadLetters is the number of dead letters per status; every DeadLetterStatus is present.
	// Alert on DeadLetters[DeadLetterFailed], the letters waiting for an operator: it goes down
	// when they are replayed or discarded, so the alert clears once they are dealt with, where
	// Counts[StateDead] only ever grows.
	DeadLetters map[DeadLetterStatus]int
}

// Filter selects the items Queue.List returns.
type Filter struct {
	// State, when not empty, keeps only items in that state.
	State ItemState
	// Name, when not empty, keeps only items of that request name.
	Name string
	// AfterID lists items with a larger id, for paging. Zero starts at the beginning.
	AfterID ItemID
	// Limit caps the number of items. Zero means 100.
	Limit int
}

func itemOf(it store.Item) Item {
	return Item{
		ID: ItemID(it.ID), Name: it.Name, Payload: it.Payload, State: ItemState(it.State), Attempts: it.Attempts,
		Interruptions: it.Interruptions, Unattributed: it.Unattributed, Isolate: it.Isolate, ParkedKey: it.ParkedKey,
		DedupeKey: it.DedupeKey, OrderingKey: it.OrderingKey, NextAt: it.NextAt, LeaseOwner: it.LeaseOwner,
		LeaseUntil: it.LeaseUntil, LastError: it.LastError, CreatedAt: it.CreatedAt, UpdatedAt: it.UpdatedAt,
		Metadata: decodeMetadata(it.Metadata), Token: it.Token,
	}
}

func attemptOf(a store.Attempt) Attempt {
	return Attempt{ID: a.ID, ItemID: ItemID(a.ItemID), Number: a.Number, Instance: a.Instance, StartedAt: a.StartedAt,
		EndedAt: a.EndedAt, Outcome: Outcome(a.Outcome), Error: a.Error}
}
