package driver

import (
	"time"
)

// LimitRow is one row of switchboard_concurrency_limits, with the number of running items
// holding a slot of its key when read by Limits; its fields are documented on
// record.ConcurrencyLimit.
type LimitRow struct {
	Key       string
	Max       int
	Actor     string
	Reason    string
	CreatedAt time.Time
	InUse     int
}

// HoldBack says what Acquire does with an item that finds every slot taken: park it on the
// key, due at NextAt, at Now.
type HoldBack struct{ NextAt, Now time.Time }
