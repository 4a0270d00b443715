package record

import "time"

// PauseKind is what a pause holds back (durable.Queue.Pause).
type PauseKind string

// The kinds of pause.
const (
	// PauseName holds back the items of one request name: no instance claims them; they stay
	// pending, untouched, until the pause ends.
	PauseName PauseKind = "name"
	// PauseBreakerKey holds back the items whose circuit-breaker key is the target: the
	// scheduler claims them, finds the key paused, and parks them on it, no attempt counted,
	// as an open breaker does.
	PauseBreakerKey PauseKind = "breaker_key"
)

// Pause is one stored pause (durable.Queue.Pauses).
type Pause struct {
	Kind   PauseKind
	Target string // the request name or the breaker key
	// Until is when the pause ends by itself; zero when it lasts until a resume.
	Until time.Time
	// Expired says Until has passed: the pause holds nothing back any more, and no resume is
	// needed. It is kept until the target is paused again or resumed.
	Expired   bool
	Actor     string // who paused it
	Reason    string // why, as they said; may be empty
	CreatedAt time.Time
}

// The audit log's actions and target kinds of pauses.
const (
	AuditPause  AuditAction = "pause"
	AuditResume AuditAction = "resume"
	// AuditTargetName and AuditTargetBreakerKey are the target kinds of a pause's entries,
	// spelt as the PauseKind.
	AuditTargetName       AuditTarget = AuditTarget(PauseName)
	AuditTargetBreakerKey AuditTarget = AuditTarget(PauseBreakerKey)
)
