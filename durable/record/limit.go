package record

import "time"

// ConcurrencyLimit is one stored concurrency limit (durable.Queue.ConcurrencyLimits): at most
// Max items guarded by the breaker key Key run at once across every instance of the queue.
type ConcurrencyLimit struct {
	Key string // the breaker key
	Max int    // how many of its items may run at once, at least 1
	// InUse is how many of its items were running, each holding a slot, when it was read; it
	// may exceed Max for a while after Max was lowered (the items running then finish).
	InUse     int
	Actor     string // who set it
	Reason    string // why, as they said; may be empty
	CreatedAt time.Time
}

// The audit log's actions on concurrency limits, taken on targets of kind
// AuditTargetBreakerKey (the limited key).
const (
	AuditSetConcurrencyLimit    AuditAction = "set_concurrency_limit"
	AuditRemoveConcurrencyLimit AuditAction = "remove_concurrency_limit"
)
