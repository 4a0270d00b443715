package record

// BulkActionID identifies a bulk action on dead letters (durable.Queue.StartBulkAction) or on
// pending items (durable.Queue.StartItemBulkAction): both are numbered in one sequence.
type BulkActionID int64

// BulkActionKind is what a bulk action does to each letter or item it selects.
type BulkActionKind string

// The kinds of a bulk action on dead letters (durable.Queue.StartBulkAction).
const (
	BulkReplay  BulkActionKind = "replay"  // replay each letter, as Queue.Replay does
	BulkDiscard BulkActionKind = "discard" // discard each letter, as Queue.Discard does
)

// The kinds of a bulk action on pending items (durable.Queue.StartItemBulkAction).
const (
	BulkCancelItems     BulkActionKind = "cancel"       // cancel each pending item, as Queue.Cancel does
	BulkRunItemsNow     BulkActionKind = "run_now"      // make each pending item due now, as Queue.RunNow does
	BulkSetItemPriority BulkActionKind = "set_priority" // give each pending item a priority (0 to 9)
)

// BulkActionState is where a bulk action stands.
type BulkActionState string

// The states of a bulk action. The last three are final. An action on items is queued,
// running or final; the others are a replay's.
const (
	BulkQueued  BulkActionState = "queued"  // stored; no scheduler has taken it up yet
	BulkRunning BulkActionState = "running" // a scheduler works through its letters or items
	// BulkWaiting: its next letters are held by other replays (their leases), or it was handed
	// back by an instance that cannot run a letter's request (Error says so) and waits for one
	// that can, or a refusing behavior other than a breaker (a rate limiter, a bulkhead: Error
	// names it, WaitingKey its key) turned a replay away; it goes on when they are free.
	BulkWaiting BulkActionState = "waiting"
	// BulkPausedOnBreaker: the breaker of its next letters' key refuses calls; it goes on when
	// the breaker lets them through, and the letters stay failed, untouched, meanwhile.
	BulkPausedOnBreaker BulkActionState = "paused_on_breaker"
	// BulkPaused: the request name or the breaker key of its next letters is paused
	// (Queue.Pause); it goes on when the pause ends, and the letters stay failed, untouched,
	// meanwhile. WaitingKey names a paused key; Error says which pause holds it.
	BulkPaused    BulkActionState = "paused"
	BulkDone      BulkActionState = "done"      // every selected letter (item) is settled
	BulkCancelled BulkActionState = "cancelled" // an operator cancelled it; settled letters stay settled
	BulkFailed    BulkActionState = "failed"    // it could not go on (its Error says why)
)

// Finished reports whether s is final: done, cancelled or failed.
func (s BulkActionState) Finished() bool {
	return s == BulkDone || s == BulkCancelled || s == BulkFailed
}

// BulkActionTotals are a bulk action's letters per outcome. Replayed, StillFailed and
// Discarded are counted in the transaction that settles each letter, so they never miss or
// double one; Unknown counts replays that ran but whose outcome could not be recorded (the
// letter stays failed; its timeline says so); Skipped, set when the action is done, counts the
// letters it matched at its start that others settled before it reached them.
type BulkActionTotals struct {
	Replayed    int64
	StillFailed int64
	Discarded   int64
	Unknown     int64
	Skipped     int64
}

// Settled is the sum of the totals: the letters the action is done with.
func (t BulkActionTotals) Settled() int64 {
	return t.Replayed + t.StillFailed + t.Discarded + t.Unknown + t.Skipped
}

// OnItems reports whether k is the kind of a bulk action on pending items rather than on dead
// letters.
func (k BulkActionKind) OnItems() bool {
	return k == BulkCancelItems || k == BulkRunItemsNow || k == BulkSetItemPriority
}
