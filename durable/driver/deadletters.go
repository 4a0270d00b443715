package driver

import (
	"github.com/switchboard-go/switchboard/durable/record"
	"time"
)

// DeadLetterRow is one dead-letter row; its fields are documented on record.DeadLetter.
type DeadLetterRow struct {
	ID     record.DeadLetterID
	ItemID record.ItemID
	Source string
	Name   string
	Key    string
	// GuardKey is the dead item's guard key (its endpoint's breaker key, see
	// record.Item.GuardKey) as the item holds it when the letter is read; empty for a letter of
	// a batch run, an unguarded item, or a driver that does not read it.
	GuardKey    string
	Payload     []byte
	Error       string
	Cause       record.DeadCause
	Status      record.DeadLetterStatus
	RetryCount  int
	ReplayOwner string
	ReplayUntil time.Time
	CreatedAt   time.Time
	UpdatedAt   time.Time
	// Metadata is the request metadata of the letter's item or batch caller, a JSON object of
	// strings; nil when there is none.
	Metadata []byte
}

// Event kinds of the dead-letter events table.
const (
	EventReplay  = "replay"
	EventDiscard = "discard"
	EventExpired = "expired" // the item's deadline ended it
)

// EventOutcome is how a dead letter's event ended: OutcomeReplayed, OutcomeStillFailed or
// OutcomeDiscarded, or "abandoned" (a replay whose outcome is unknown) or "expired" (the
// item's deadline ended it), the values of record.Outcome of those names.
type EventOutcome string

// The outcomes of a dead letter's events.
const (
	OutcomeReplayed    EventOutcome = "replayed"
	OutcomeStillFailed EventOutcome = "still_failed"
	OutcomeDiscarded   EventOutcome = "discarded"
)

// EventRow is one row of the dead-letter events table: a replay or a discard.
type EventRow struct {
	ID           int64
	DeadLetterID record.DeadLetterID
	Kind         string
	Actor        string
	StartedAt    time.Time
	EndedAt      time.Time
	Outcome      EventOutcome
	Error        string
	Reason       string
	// BulkAction is the bulk action the event was part of; 0 for a replay or discard of its
	// own. The action's totals are counted from these events (see BulkAction).
	BulkAction int64
}

// NewDeadLetter describes a dead letter captured outside the item lifecycle (a failed item of
// a batch run).
type NewDeadLetter struct {
	Source  string
	Name    string
	Key     string
	Payload []byte
	Error   string
	Now     time.Time
	// Metadata, when not empty, is the request metadata to keep: a JSON object of strings.
	Metadata []byte
}

// DeadLetterQuery filters DeadLetters. Status is required; From and To bound the creation
// time (From inclusive, To exclusive) when not zero.
type DeadLetterQuery struct {
	Status   record.DeadLetterStatus
	Source   string
	From, To time.Time
	// ErrorContains, when not empty, keeps the letters whose error contains it, ignoring case.
	ErrorContains string
	Limit, Offset int
	// CountLimit, when positive, bounds the total DeadLetters counts: it counts the matching
	// letters up to CountLimit+1 and stops there, so a total of CountLimit+1 says that more
	// than CountLimit match (letters are never deleted, and a count of them all
	// reads every one). Zero counts them all. CountDeadLetters ignores it.
	CountLimit int
}

// LeaseResult says what LeaseReplay found.
type LeaseResult int

// The results of LeaseReplay.
const (
	// Done: the letter was failed and free; it is now leased to the caller (LeaseReplay), or
	// discarded (Discard).
	Done LeaseResult = iota
	// Missing: there is no letter with that id.
	Missing
	// Busy: the letter is not failed, or another replay holds its lease.
	Busy
)
