package record

import "time"

// AuditEntry is one operator action on a queue, as its audit log keeps it (durable.Queue.Audit):
// pausing and resuming, cancelling an item or running it now, changing a schedule, a bulk
// action, tripping or resetting a breaker. A dead letter's own replays and discards are in its timeline.
// Entries are never changed or deleted.
type AuditEntry struct {
	ID     int64 // increasing
	At     time.Time
	Actor  string // who took the action, as the admin surface's Authorizer named them
	Action AuditAction
	// TargetKind and Target say what it was done to: Target is a request name, a breaker key,
	// an item's or a bulk action's id, a schedule's name.
	TargetKind AuditTarget
	Target     string
	Detail     string // what else the action said (a reason, an end time, a filter); may be empty
	Outcome    AuditOutcome
}

// AuditAction is what an operator did, as an AuditEntry records it.
type AuditAction string

// AuditTarget is the kind of thing an operator's action was taken on.
type AuditTarget string

// AuditOutcome is how an operator's action ended: AuditDone, or AuditNoChange when there was
// nothing to do (an item cancelled after it had finished, a resume of what was not paused);
// the entry's Detail then says why.
type AuditOutcome string

// The outcomes of an audited action.
const (
	AuditDone     AuditOutcome = "done"
	AuditNoChange AuditOutcome = "no_change"
)

// The actions on schedules (durable.Queue.AddSchedule, RemoveSchedule, PauseSchedule,
// ResumeSchedule, RunScheduleNow), taken on targets of kind AuditTargetSchedule, the schedule's
// name.
const (
	AuditAddSchedule    AuditAction = "add"
	AuditRemoveSchedule AuditAction = "remove"
	AuditPauseSchedule  AuditAction = "pause"
	AuditResumeSchedule AuditAction = "resume"
	AuditRunScheduleNow AuditAction = "run_now"

	AuditTargetSchedule AuditTarget = "schedule"
)

// The audited actions and target of bulk actions on dead letters (durable.Queue.StartBulkAction):
// the entry's Target is the action's id.
const (
	AuditBulkReplay       AuditAction = "bulk_replay"        // a bulk replay was started (Detail: filter, reason, reset breaker)
	AuditBulkDiscard      AuditAction = "bulk_discard"       // a bulk discard was started
	AuditCancelBulkAction AuditAction = "cancel_bulk_action" // a bulk action was cancelled
	// The bulk actions on pending items (durable.Queue.StartItemBulkAction): started (Detail:
	// the filter, the items matched, the priority, the reason), and ended (AuditEndBulkAction,
	// Detail: its state and totals).
	AuditBulkCancelItems     AuditAction = "bulk_cancel"
	AuditBulkRunItemsNow     AuditAction = "bulk_run_now"
	AuditBulkSetItemPriority AuditAction = "bulk_set_priority"
	AuditEndBulkAction       AuditAction = "end_bulk_action"

	AuditTargetBulkAction AuditTarget = "bulk_action"
)

// The actions on one item (durable.Queue.Cancel, durable.Queue.RunNow) and their target kind:
// the Target of such an entry is the item's id in decimal.
const (
	AuditCancel     AuditAction = "cancel"
	AuditRunNow     AuditAction = "run_now"
	AuditTargetItem AuditTarget = "item"
)

// The actions on a circuit breaker through the admin surface (durable.Queue.RecordBreakerAction),
// taken on targets of kind AuditTargetBreakerKey, the breaker's key; the Detail names its
// registry when it is not the admin's default one, and says when the registry is this
// instance's alone.
const (
	AuditTripBreaker  AuditAction = "trip"
	AuditResetBreaker AuditAction = "reset"
)

// AuditTargets returns the target kinds the queue's actions are audited on, in a new slice.
func AuditTargets() []AuditTarget {
	return []AuditTarget{AuditTargetName, AuditTargetBreakerKey, AuditTargetItem, AuditTargetSchedule, AuditTargetBulkAction}
}
