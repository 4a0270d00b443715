package driver

import (
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-go/switchboard/durable/record"
)

// BulkActionRow is one row of switchboard_bulk_actions; its columns are described in
// migrations 0014 and 0026 and its fields on durable.BulkAction and durable.ItemBulkAction. An
// action on items (record.BulkActionKind.OnItems) has its Cursor, an item id, in the column of a
// letter action's cursor; its MaxLetter is 0.
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
	Priority     int           // the priority a set_priority action gives; 0 otherwise
	MaxItem      record.ItemID // the highest item id when an item action started; 0 for a letter action
	Changed      int64         // the items an item action changed
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

// ErrBulkActionActive reports a bulk action refused because an action of the same kind and
// filter has not finished yet (queued, running, waiting or paused): a second would act on the
// same letters or items. A *BulkActionActiveError names it.
var ErrBulkActionActive = errors.New("durable: an identical bulk action has not finished")

// BulkActionActiveError names the unfinished action an identical one was refused for. It
// matches ErrBulkActionActive.
type BulkActionActiveError struct {
	// ID is the unfinished action's id.
	ID int64
}

// Error says which action has not finished.
func (e *BulkActionActiveError) Error() string {
	return fmt.Sprintf("%v: bulk action %d of the same kind and filter", ErrBulkActionActive, e.ID)
}

// Is reports whether target is ErrBulkActionActive.
func (e *BulkActionActiveError) Is(target error) bool { return target == ErrBulkActionActive }

// BulkProgress is what a running action writes of itself while it holds its lease.
type BulkProgress struct {
	State      string
	WaitingKey string
	Error      string
}

// ItemBulkChange is what an item action does to one pending item (StepItemBulkAction).
type ItemBulkChange struct {
	Kind      record.BulkActionKind // BulkCancelItems, BulkRunItemsNow or BulkSetItemPriority
	Priority  int                   // set_priority: the priority given
	HeadStart time.Duration         // set_priority: the head start of that priority (NewItem.HeadStart)
}
