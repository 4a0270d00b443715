package record

import "time"

// DeadLetterID identifies a dead letter in its queue's database.
type DeadLetterID int64

// DeadLetterStatus is where a dead letter stands in an operator's work.
type DeadLetterStatus string

// Dead letter statuses; replayed and discarded are terminal.
const (
	DeadLetterFailed    DeadLetterStatus = "failed"    // waiting for an operator, also after a failed replay
	DeadLetterReplayed  DeadLetterStatus = "replayed"  // a replay succeeded
	DeadLetterDiscarded DeadLetterStatus = "discarded" // an operator retired it, saying why
)

// DeadCause is why an item died: the rule of the durable queue that ended it. An item dies only
// of these; Error says the details. The values:
//   - DeadAttemptsSpent ("attempts_spent"): its policy's MaxAttempts were used up, by failed
//     attempts or by attempts abandoned when the process running them died.
//   - DeadDeadline ("deadline"): its deadline (durable.WithDeadline) passed.
//   - DeadPermanent ("permanent"): the retry policy's classification called its error not
//     worth retrying.
//   - DeadUndecodable ("undecodable"): its payload does not decode as its registered request.
//   - DeadOverBudget ("over_budget"): its retry budget refused the retry and the budget's
//     registration says to fail over (durable.FailOverBudget).
//   - DeadUnknown (""): not recorded: a letter captured before causes were, or a failed item
//     of durable.Queue.RunBatch.
type DeadCause string

// The causes of death; see DeadCause.
const (
	DeadUnknown       DeadCause = ""
	DeadAttemptsSpent DeadCause = "attempts_spent"
	DeadDeadline      DeadCause = "deadline"
	DeadPermanent     DeadCause = "permanent"
	DeadUndecodable   DeadCause = "undecodable"
	DeadOverBudget    DeadCause = "over_budget"
)

// DeadLetter is a dead item, or a failed item of durable.Queue.RunBatch, waiting for an
// operator. Letters are never deleted: replay and discard change Status and append to the
// timeline.
type DeadLetter struct {
	ID     DeadLetterID
	ItemID ItemID // the dead item, whose attempts open the timeline; 0 for a RunBatch letter
	Source string // the dead item's request name, or the batch's source
	Name   string // the registered name the payload decodes as
	Key    string // the batch item's key, or the dead item's dedupe key
	// GuardKey is the breaker key of the endpoint the dead item was for: the one its enqueue
	// named (Item.GuardKey), else the one its registration's breaker key function (or the
	// queue's Config.Breakers) gives its request; empty for a batch letter or an unguarded item.
	GuardKey string
	Payload  []byte
	Error    string // the last error, of the item, the batch item or the last failed replay
	// Cause is why the item died; empty when not known (see DeadCause).
	Cause  DeadCause
	Status DeadLetterStatus
	// RetryCount counts the replays that ran; one the caller cancelled does not count.
	RetryCount           int
	CreatedAt, UpdatedAt time.Time
	// Metadata is the item's metadata (see durable.Config.Propagators), or what
	// durable.Queue.RunBatch's context gave; a replay runs with it, so it keeps its trace
	// context and tenant.
	Metadata map[string]string
}

// TimelineKind says what a timeline entry records.
type TimelineKind string

// The kinds of timeline entries.
const (
	TimelineAttempt TimelineKind = "attempt" // an attempt of the dead item by a scheduler
	TimelineReplay  TimelineKind = "replay"  // a replay by an operator
	TimelineDiscard TimelineKind = "discard" // the discard by an operator
	// TimelineExpired: the item's deadline passed and it died without a further attempt, or
	// its last attempt failed past it.
	TimelineExpired TimelineKind = "expired"
)

// TimelineEntry is an attempt of a dead letter's item, or a replay or discard, in order.
type TimelineEntry struct {
	Kind               TimelineKind
	Number             int // an attempt's number
	StartedAt, EndedAt time.Time
	Instance           string  // the scheduler instance of an attempt
	Actor              string  // the operator of a replay or discard
	Outcome            Outcome // how an attempt's or a replay's dispatch ended; empty for a discard
	Error              string
	Reason             string // why the letter was discarded
	// BulkAction is the bulk action a replay or discard was part of; 0 for one of its own.
	BulkAction BulkActionID
}
