package store

import "github.com/switchboard-go/switchboard/durable/driver"

// The types the store's operations exchange, defined by package driver.
type (
	Attempt             = driver.Attempt
	AuditQuery          = driver.AuditQuery
	AuditRow            = driver.AuditRow
	BreakerRow          = driver.BreakerRow
	BreakerState        = driver.BreakerState
	BreakerTransition   = driver.BreakerTransition
	BulkActionRow       = driver.BulkActionRow
	BulkProgress        = driver.BulkProgress
	Claimed             = driver.Claimed
	Completion          = driver.Completion
	DeadLetter          = driver.DeadLetter
	DeadLetterFilter    = driver.DeadLetterFilter
	DeadLetterID        = driver.DeadLetterID
	DeadLetterStatus    = driver.DeadLetterStatus
	Event               = driver.Event
	Fence               = driver.Fence
	Filter              = driver.Filter
	HoldBack            = driver.HoldBack
	Item                = driver.Item
	ItemChange          = driver.ItemChange
	ItemCursor          = driver.ItemCursor
	ItemID              = driver.ItemID
	ItemQuery           = driver.ItemQuery
	LeaseLostError      = driver.LeaseLostError
	LeaseResult         = driver.LeaseResult
	LimitRow            = driver.LimitRow
	Migration           = driver.Migration
	NewDeadLetter       = driver.NewDeadLetter
	NewItem             = driver.NewItem
	Outcome             = driver.Outcome
	PauseRow            = driver.PauseRow
	RateLimitGrant      = driver.RateLimitGrant
	RateLimitLease      = driver.RateLimitLease
	ScheduleDue         = driver.ScheduleDue
	ScheduleRow         = driver.ScheduleRow
	ScheduleRunRow      = driver.ScheduleRunRow
	State               = driver.State
	Stats               = driver.Stats
	UnknownOutcomeError = driver.UnknownOutcomeError
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
	DeadLetterFailed    = driver.DeadLetterFailed
	DeadLetterReplayed  = driver.DeadLetterReplayed
	DeadLetterDiscarded = driver.DeadLetterDiscarded
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
	StatePending        = driver.StatePending
	StateRunning        = driver.StateRunning
	StateSucceeded      = driver.StateSucceeded
	StateDead           = driver.StateDead
	OutcomeSucceeded    = driver.OutcomeSucceeded
	OutcomeFailed       = driver.OutcomeFailed
	OutcomeAbandoned    = driver.OutcomeAbandoned
	OutcomeInterrupted  = driver.OutcomeInterrupted
	LeaseExpired        = driver.LeaseExpired
)

// The errors of package driver.
var (
	ErrNoNotifications = driver.ErrNoNotifications
	ErrLeaseLost       = driver.ErrLeaseLost
)
