package record

import "time"

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
	// StateCancelled: an operator cancelled the item while it was pending (durable.Queue.Cancel);
	// terminal, and kept, with its payload, like a dead item.
	StateCancelled ItemState = "cancelled"
)

// Outcome is how an attempt or a scheduled run ended.
type Outcome string

// Outcomes; a scheduled run's failure includes a panic and an interruption.
const (
	OutcomeSucceeded Outcome = "succeeded" // the dispatch returned no error
	OutcomeFailed    Outcome = "failed"    // the dispatch returned an error
	OutcomeSkipped   Outcome = "skipped"   // a scheduled run due while the previous one still ran, or whose request name was paused
	// OutcomeAbandoned: the lease ran out before the holder completed the item (it died or lost
	// its database); the handler may or may not have run.
	OutcomeAbandoned   Outcome = "abandoned"
	OutcomeInterrupted Outcome = "interrupted" // a shutdown cancelled the dispatch
	// OutcomeRefused: a circuit breaker (or another refusing behavior) turned the item away
	// before its dispatch reached the endpoint; not an attempt, and no attempt row says it.
	OutcomeRefused Outcome = "refused"
	// OutcomeExpired: the item's deadline passed; it is dead without a further attempt.
	OutcomeExpired Outcome = "expired"
)

// ItemID identifies an item in its queue's database.
type ItemID int64

// Item is one durable request.
type Item struct {
	ID       ItemID
	Name     string // the name the request type was registered under
	Payload  []byte
	State    ItemState
	Attempts int // the attempts made (durable.Queue.Attempts)
	// Interruptions (by a shutdown) and Unattributed (abandoned while other items ran in an
	// instance that died, so nothing says which killed it) do not count (see Counted).
	Interruptions, Unattributed int
	Isolate                     bool      // its lease ran out while it ran: its next claim runs it alone
	ParkedKey                   string    // the breaker a pending item waits on; its closing frees it
	DedupeKey, OrderingKey      string    // see durable.WithDedupeKey, durable.WithOrderingKey
	NextAt                      time.Time // when a pending item is due
	LeaseOwner                  string    // the instance holding a running item, until LeaseUntil
	LeaseUntil                  time.Time
	LastError                   string // of the last failed attempt or deferral
	CreatedAt, UpdatedAt        time.Time
	Metadata                    map[string]string // what durable.Config.Propagators took at enqueue
	// Token is the item's identity (see durable.WithToken, durable.Queue.ItemByToken); empty
	// for items stored before the schema had tokens.
	Token string
	// GuardKey is the circuit-breaker key its enqueue named (durable.WithBreakerKey); empty
	// when its registration's key function names it, or no breaker guards it.
	GuardKey string
	// Deadline is when the item is dead if it has not succeeded (durable.WithDeadline, or its
	// policy's MaxAge from the enqueue); zero when it has none.
	Deadline time.Time
	// UniqueFor is how long the item holds its dedupe key after it succeeded
	// (durable.WithUniqueFor, durable.WithUniqueWindow); zero when it holds it only while
	// pending or running.
	UniqueFor time.Duration
	// UniqueReleasedAt is when an enqueue of its dedupe key, made once its window had ended,
	// took the key over; zero while it holds the key, or never did after it ended.
	UniqueReleasedAt time.Time
	// FairnessKey is the key the claim takes the item in turn with (durable.WithFairnessKey:
	// by default its breaker's key, else its name); empty for an item that finished before
	// the schema had fairness keys.
	FairnessKey string
	// Priority is 0 (the default) to durable.MaxPriority (durable.WithPriority).
	Priority int
	// DebounceKey is the key its enqueue debounced it by (durable.WithDebounce); empty when it
	// is not debounced.
	DebounceKey string
	// DebounceUntil is the latest an enqueue of its debounce key may make it due: its first
	// enqueue plus the maximum delay; zero without a key.
	DebounceUntil time.Time
	// Debounces is how many enqueues of its debounce key updated it after the one that stored
	// it: the payload is the last one's.
	Debounces int
	// Reference is the application's own id for it (durable.WithReference); empty when none.
	Reference string
}

// Counted is the number of attempts that count against the retry policy's MaxAttempts.
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
