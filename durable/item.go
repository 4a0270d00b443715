package durable

import (
	"time"

	"github.com/switchboard-go/switchboard/durable/internal/store"
)

// ItemState is the lifecycle state of an item.
type ItemState string

// The states of an item. See docs/durable.md for the state machine.
const (
	StatePending   ItemState = "pending"   // waiting for its next attempt, due at Item.NextAt
	StateRunning   ItemState = "running"   // claimed by a scheduler that holds a lease on it
	StateSucceeded ItemState = "succeeded" // an attempt succeeded; terminal
	// StateDead: attempts exhausted, a non-retryable error, or a payload that does not decode;
	// the row is kept with its payload and last error.
	StateDead ItemState = "dead"
)

// Outcome is how an attempt or a scheduled run ended.
type Outcome string

// Outcomes; a scheduled run's failure includes a panic and an interruption.
const (
	OutcomeSucceeded Outcome = "succeeded" // the dispatch returned no error
	OutcomeFailed    Outcome = "failed"    // the dispatch returned an error
	OutcomeSkipped   Outcome = "skipped"   // a scheduled run due while the previous one still ran
	// OutcomeAbandoned: the lease ran out before the holder completed the item (it died or lost
	// its database); the handler may or may not have run.
	OutcomeAbandoned   Outcome = "abandoned"
	OutcomeInterrupted Outcome = "interrupted" // a shutdown cancelled the dispatch
)

// ItemID identifies an item in its queue's database.
type ItemID int64

// Item is one durable request.
type Item struct {
	ID       ItemID
	Name     string // the name the request type was registered under
	Payload  []byte
	State    ItemState
	Attempts int // the attempts made (Queue.Attempts)
	// Interruptions (by a shutdown) and Unattributed (abandoned while other items ran in an
	// instance that died, so nothing says which killed it) do not count (see Counted).
	Interruptions, Unattributed int
	Isolate                     bool      // its lease ran out while it ran: its next claim runs it alone
	ParkedKey                   string    // the breaker a pending item waits on; its closing frees it
	DedupeKey, OrderingKey      string    // see WithDedupeKey, WithOrderingKey
	NextAt                      time.Time // when a pending item is due
	LeaseOwner                  string    // the instance holding a running item, until LeaseUntil
	LeaseUntil                  time.Time
	LastError                   string // of the last failed attempt or deferral
	CreatedAt, UpdatedAt        time.Time
	Metadata                    map[string]string // what Config.Propagators took at enqueue
	// Token is the item's identity (see WithToken, Queue.ItemByToken); empty for items stored
	// before the schema had tokens.
	Token string
}

// Counted is the number of attempts that count against MaxAttempts.
func (it Item) Counted() int { return it.Attempts - it.Interruptions - it.Unattributed }

// Attempt is one real try of an item.
type Attempt struct {
	ID        int64
	ItemID    ItemID
	Number    int       // from 1
	Instance  string    // the scheduler instance that made it
	StartedAt time.Time // for OutcomeAbandoned, when the item was claimed
	EndedAt   time.Time // for OutcomeAbandoned, when the expired lease was found
	Outcome   Outcome
	Error     string
}

// Stats summarises a queue for dashboards and metrics.
type Stats struct {
	Counts    map[ItemState]int64 // items per state; every state is present
	OldestDue time.Duration       // how long the oldest due item has waited; zero for none
	// DeadLetters counts letters per status, every status present. Alert on its
	// DeadLetterFailed: it falls as letters are dealt with, where StateDead only grows.
	DeadLetters map[DeadLetterStatus]int
}

// Filter selects the items Queue.List returns.
type Filter struct {
	State   ItemState // when not empty, only items in that state
	Name    string    // when not empty, only items of that request name
	AfterID ItemID    // only items with a larger id, for paging
	Limit   int       // zero means 100
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
