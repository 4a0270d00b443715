package driver

import (
	"time"
)

// The kinds of pause (switchboard_pauses.kind).
const (
	PauseName       = "name"
	PauseBreakerKey = "breaker_key"
)

// PauseRow is one row of switchboard_pauses; its fields are documented on record.Pause.
type PauseRow struct {
	Kind, Target string
	Until        time.Time // zero: until a resume
	Actor        string
	Reason       string
	CreatedAt    time.Time
}
