package driver

import (
	"github.com/switchboard-go/switchboard/durable/record"
	"time"
)

// BulkActionRow is one row of switchboard_bulk_actions; its columns are described in
// migration 0014 and its fields on record.BulkAction.
type BulkActionRow struct {
	ID           int64
	Kind         string
	Filter       string // JSON
	Reason       string
	Actor        string
	State        string
	Rate         float64
	InFlight     int
	ResetBreaker string
	MaxLetter    record.DeadLetterID
	Matched      int64
	Cursor       record.DeadLetterID
	Replayed     int64
	StillFailed  int64
	Discarded    int64
	Unknown      int64
	Skipped      int64
	WaitingKey   string
	Error        string
	LeaseOwner   string
	LeaseUntil   time.Time
	CreatedAt    time.Time
	UpdatedAt    time.Time
	FinishedAt   time.Time
}

// The states of a bulk action, as stored.
const (
	BulkQueued          = "queued"
	BulkRunning         = "running"
	BulkWaiting         = "waiting"
	BulkPausedOnBreaker = "paused_on_breaker"
	BulkPaused          = "paused"
	BulkDone            = "done"
	BulkCancelled       = "cancelled"
	BulkFailed          = "failed"
)

// BulkProgress is what a running action writes of itself while it holds its lease.
type BulkProgress struct {
	State      string
	WaitingKey string
	Error      string
}
