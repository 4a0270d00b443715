package driver

import (
	"github.com/switchboard-go/switchboard/durable/record"
	"time"
)

// AuditRow is one row of switchboard_audit; its fields are documented on record.AuditEntry.
type AuditRow struct {
	ID         int64
	At         time.Time
	Actor      string
	Action     string
	TargetKind string
	Target     string
	Detail     string
	Outcome    record.AuditOutcome
}

// AuditQuery selects audit rows: those of one target kind and target when TargetKind is set
// (Target may then be empty for every target of the kind), with ids below Before when it is
// not zero, newest first, at most Limit.
type AuditQuery struct {
	TargetKind, Target string
	Before             int64
	Limit              int
}
