package driver

import (
	"time"

	"github.com/switchboard-go/switchboard/durable/record"
)

// ItemQuery selects a page of ListItems: the items in State (parked on a breaker when Parked),
// of Name and parked on Key when those are set, whose listing time (ListItems) is in [From,
// To) (zero: unbounded), after the position After, at most Limit.
type ItemQuery struct {
	State     record.ItemState
	Parked    bool
	Name, Key string
	From, To  time.Time
	After     ItemCursor // zero: the first page
	Limit     int
}

// ItemCursor is a position in a listing's order: the ordering columns of the last item of a
// page (CursorOf). Its zero value is the start of every listing.
type ItemCursor struct {
	Key     string        // parked listings: the parked key
	Isolate bool          // pending listings: past the items that run with others, among those to run alone
	At      int64         // the listing time, microseconds
	ID      record.ItemID // zero: the start
}

// ItemChange is an operator's change of one pending item (CancelItem, RunItemNow).
type ItemChange struct {
	ID  record.ItemID
	Now time.Time
	// Audit returns the audit row of the change, written in its transaction when there is
	// such an item: changed says whether it was pending and so changed; it is the item after
	// the change, or as found; held is the pause that kept a RunItemNow from changing a
	// pending item (nil when none did).
	Audit func(changed bool, it ItemRow, held *PauseRow) AuditRow
}
