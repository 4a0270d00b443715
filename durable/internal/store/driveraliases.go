package store

import (
	"github.com/switchboard-go/switchboard/durable/driver"
	"github.com/switchboard-go/switchboard/durable/record"
)

// The types the store's operations exchange, defined by package driver.
type (
	Attempt               = driver.AttemptRow
	AuditQuery            = driver.AuditQuery
	AuditRow              = driver.AuditRow
	BreakerRow            = driver.BreakerRow
	BreakerState          = driver.BreakerState
	BreakerTransition     = driver.BreakerTransition
	BulkActionActiveError = driver.BulkActionActiveError
	BulkActionRow         = driver.BulkActionRow
	BulkProgress          = driver.BulkProgress
	Claimed               = driver.Claimed
	Completion            = driver.Completion
	DeadLetter            = driver.DeadLetterRow
	DeadLetterFilter      = driver.DeadLetterQuery
	DeadLetterID          = record.DeadLetterID
	DeadLetterStatus      = record.DeadLetterStatus
	Event                 = driver.EventRow
	EventOutcome          = driver.EventOutcome
	Fence                 = driver.Fence
	Filter                = driver.ItemsFilter
	HoldBack              = driver.HoldBack
	Item                  = driver.ItemRow
	ItemChange            = driver.ItemChange
	ItemBulkChange        = driver.ItemBulkChange
	ItemCursor            = driver.ItemCursor
	ItemID                = record.ItemID
	ItemQuery             = driver.ItemQuery
	LeaseLostError        = driver.LeaseLostError
	LeaseResult           = driver.LeaseResult
	LimitRow              = driver.LimitRow
	Migration             = driver.Migration
	NewDeadLetter         = driver.NewDeadLetter
	NewItem               = driver.NewItem
	Outcome               = record.Outcome
	PauseRow              = driver.PauseRow
	RateLimitGrant        = driver.RateLimitGrant
	RateLimitLease        = driver.RateLimitLease
	ScheduleDue           = driver.ScheduleDue
	ScheduleRow           = driver.ScheduleRow
	ScheduleRunRow        = driver.ScheduleRunRow
	State                 = record.ItemState
	Stats                 = driver.ItemStats
	UnknownOutcomeError   = driver.UnknownOutcomeError
)

// The constants of package driver's types.
const (
	BreakerClosed       = driver.BreakerClosed
	BreakerOpen         = driver.BreakerOpen
	BreakerHalfOpen     = driver.BreakerHalfOpen
	BulkQueued          = driver.BulkQueued
	BulkRunning         = driver.BulkRunning
	BulkWaiting         = driver.BulkWaiting
	BulkPausedOnBreaker = driver.BulkPausedOnBreaker
	BulkPaused          = driver.BulkPaused
	BulkDone            = driver.BulkDone
	BulkCancelled       = driver.BulkCancelled
	BulkFailed          = driver.BulkFailed
	DeadLetterFailed    = record.DeadLetterFailed
	DeadLetterReplayed  = record.DeadLetterReplayed
	DeadLetterDiscarded = record.DeadLetterDiscarded
	EventReplay         = driver.EventReplay
	EventDiscard        = driver.EventDiscard
	EventExpired        = driver.EventExpired
	OutcomeReplayed     = driver.OutcomeReplayed
	OutcomeStillFailed  = driver.OutcomeStillFailed
	OutcomeDiscarded    = driver.OutcomeDiscarded
	Done                = driver.Done
	Missing             = driver.Missing
	Busy                = driver.Busy
	PauseName           = driver.PauseName
	PauseBreakerKey     = driver.PauseBreakerKey
	StatePending        = record.StatePending
	StateRunning        = record.StateRunning
	StateSucceeded      = record.StateSucceeded
	StateDead           = record.StateDead
	OutcomeSucceeded    = record.OutcomeSucceeded
	OutcomeFailed       = record.OutcomeFailed
	OutcomeAbandoned    = record.OutcomeAbandoned
	OutcomeInterrupted  = record.OutcomeInterrupted
	DeadAttemptsSpent   = record.DeadAttemptsSpent
	DeadDeadline        = record.DeadDeadline
	DeadPermanent       = record.DeadPermanent
	DeadUndecodable     = record.DeadUndecodable
	DeadOverBudget      = record.DeadOverBudget
	LeaseExpired        = driver.LeaseExpired
)

// The errors of package driver.
var (
	ErrNoNotifications = driver.ErrNoNotifications
	ErrLeaseLost       = driver.ErrLeaseLost
)

// MaxPriority is the highest priority an item may have.
const MaxPriority = driver.MaxPriority
