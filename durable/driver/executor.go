package driver

import (
	"context"
	"database/sql"
	"github.com/switchboard-go/switchboard/durable/record"
	"time"
)

// Executor is a driver's store: every operation the queue, its scheduler and its operators'
// calls run on the database, grouped by what they keep. Its methods are safe for concurrent
// use. A method's error is the database's, wrapped with what failed; a method whose outcome
// is unknown (the statement may have committed) says so where it matters (Enqueue's
// *UnknownOutcomeError). A caller's cancelled context ends a method with ctx's error.
//
// An Executor may also implement Notifier, FleetStores, ItemFinder and HistoryStore, the optional capabilities.
type Executor interface {
	Schema
	ItemStore
	ControlStore
	DeadLetterStore
	BulkActionStore
	ScheduleStore

	// Close releases what Open acquired: it closes the database when the driver opened it,
	// and leaves a pool the caller passed in (and owns) open.
	Close() error
}

// Schema is the executor's migrations: the tables the other operations need.
type Schema interface {
	// Migrate applies the migrations the database lacks, each once even when instances
	// migrate at the same time, calling applied (when not nil) after each.
	Migrate(ctx context.Context, applied func(Migration)) error
	// Version returns the newest migration the database has applied: 0 for none.
	Version(ctx context.Context) (int, error)
	// SchemaVersion returns the version Migrate brings the database to.
	SchemaVersion() int
	// MissingMigrations returns, in order, the versions of the migrations the database lacks;
	// empty when it is up to date. It applies nothing.
	MissingMigrations(ctx context.Context) ([]int, error)
}

// PruneBatch is the most items one Prune deletes (in one transaction): small enough that no
// transaction holds its locks (or, on SQLite, the database's one writer) for long, large
// enough that a pass over a busy day's work takes few round trips.
const PruneBatch = 500

// Execer is what AddAudit writes through: a *sql.Tx (or a *sql.DB).
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// ItemStore is the store of items: enqueueing, reading, claiming under leases, completing
// under fences, and the sweeps and prunes that keep them moving.
type ItemStore interface {
	// Enqueue inserts an item. With a Token that an item already holds, or a DedupeKey an item
	// holds (pending or running, or succeeded less than its UniqueFor before it.Now), it inserts
	// nothing and returns that item's id with existed = true. A succeeded item whose window ended
	// by it.Now is released (its UniqueReleasedAt set) and the insert made. With a DebounceKey
	// that a pending item of the name holds, one never claimed, it updates that item instead
	// (see NewItem.DebounceKey) and returns its id with existed = true. An error that leaves
	// it unknown whether the item was inserted (the statement may have reached the database: a
	// deadline or a lost connection while it ran or committed) is an *UnknownOutcomeError; any
	// other error means nothing was inserted.
	Enqueue(ctx context.Context, it NewItem) (id record.ItemID, existed bool, err error)

	// EnqueueTx is Enqueue inside the caller's transaction on this store's database, so the item
	// exists if and only if the transaction commits (a transactional outbox). tx is of the
	// database the executor keeps its rows in (the caller's pool). An *UnknownOutcomeError says
	// the statement may have taken effect in tx. With notifications (Notifier) an
	// item due at once is notified to the instances watching (WatchDue) when tx commits, by the
	// insert itself; Enqueue leaves the notification to its caller (NotifyDue), who knows when it
	// committed.
	EnqueueTx(ctx context.Context, tx *sql.Tx, it NewItem) (id record.ItemID, existed bool, err error)

	// ItemByToken returns the item holding token; sql.ErrNoRows (wrapped) if there is none.
	ItemByToken(ctx context.Context, token string) (ItemRow, error)

	// ItemRow returns one item; sql.ErrNoRows (wrapped) if there is none.
	Item(ctx context.Context, id record.ItemID) (ItemRow, error)

	// List returns items in id order, filtered by f.
	List(ctx context.Context, f ItemsFilter) ([]ItemRow, error)

	// ListItems returns the page q selects, in its state's listing order: pending items in the
	// order they run (those to run alone after the others), parked ones by key then when due,
	// running ones by when their lease runs out, finished ones by when they finished, newest
	// first. The listing time that From and To bound is, in that order, when the item is due,
	// when its lease runs out, when it finished. A name filter reads the state's listing and
	// skips the items of other names.
	ListItems(ctx context.Context, q ItemQuery) ([]ItemRow, error)

	// Attempts lists the attempts of an item in order.
	Attempts(ctx context.Context, id record.ItemID) ([]AttemptRow, error)

	// Stats counts items by state, each up to limit (ItemStats.Over names the states with
	// more), and measures how long the oldest due item has waited at now. It reads at most
	// limit+1 entries per state, however many items the store keeps: it is called at every
	// refresh of a dashboard.
	Stats(ctx context.Context, now time.Time, limit int) (ItemStats, error)

	// CountStates counts the items of each of states in full: the states Stats found over its
	// limit, counted again at most every so often (Queue.Stats says how often).
	CountStates(ctx context.Context, states []record.ItemState) (map[record.ItemState]int64, error)

	// Claim leases up to limit due pending items to owner until now+lease and returns them in id
	// order. An item with an ordering key is claimed only when no earlier item with that key is
	// pending or running, and one with a debounce key only when no earlier item of its name and
	// debounce key is. Each claim adds one to the item's attempt count; the new count is the
	// attempt number of the claim's Fence. Items to be isolated are left out: ClaimIsolated takes
	// them one at a time. Items whose request name is paused at now (SetPause) are left out, by
	// every claim.
	Claim(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]Claimed, error)

	// ClaimAlone is Claim for a claimer that runs its items alone (a scheduler with one worker): a
	// crash while one of them runs is its own.
	ClaimAlone(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]Claimed, error)

	// ClaimIsolated leases the oldest due item marked Isolate (its last lease ran out while it ran),
	// if there is one, to run alone: the claimer runs nothing else while it holds it, so that an
	// item whose handler kills its process is the only one charged for the crash.
	ClaimIsolated(ctx context.Context, owner string, now time.Time, lease time.Duration) ([]Claimed, error)

	// IsolatedDue reports whether an item to be run alone, whose request name is not paused, is due
	// at now.
	IsolatedDue(ctx context.Context, now time.Time) (bool, error)

	// CompleteAndClaim writes completions and claims up to limit items in one round trip and one
	// transaction: the outcomes of the items that finished are stored before, and together with,
	// the claim of the items that start next. The claim leaves out items to be isolated, and runs
	// its items alone when alone is set.
	CompleteAndClaim(ctx context.Context, cs []Completion, owner string, now time.Time, lease time.Duration,
		limit int, alone bool) ([]error, []Claimed, error)

	// Complete ends leases, all in one transaction. The result
	// has one entry per completion: nil when accepted, a *LeaseLostError when the item is no longer
	// running under that fence (its lease expired and it was swept or claimed again). The error is
	// for the batch as a whole (the database failed; nothing was written).
	Complete(ctx context.Context, cs []Completion) ([]error, error)

	// Extend moves the lease of owner's running items ids to until. Items no longer running under
	// owner are left alone.
	Extend(ctx context.Context, owner string, ids []record.ItemID, until time.Time) error

	// Sweep returns running items whose lease expired before now to pending, due at now, and
	// records each lost attempt as an OutcomeAbandoned row. A swept item is marked Isolate, so its
	// next claim runs it alone; an attempt abandoned while it ran beside other items counts as
	// Unattributed. It returns how many it swept.
	Sweep(ctx context.Context, now time.Time) (int, error)

	// Unpark makes the pending items waiting on the circuit breakers of keys due at now (unless
	// they are due sooner) and returns how many it freed. Call it when those breakers close. A
	// running item parked on one of the keys (claimed items keep their keys) is touched too,
	// harmlessly: its completion sets its next due time and key.
	Unpark(ctx context.Context, keys []string, now time.Time) (int, error)

	// Repark makes the pending items waiting on the circuit breaker of key due at a time drawn
	// uniformly from [at, at+spread] for each (never after its deadline), and returns how many it
	// moved. Call it when that breaker opens again: the items wait for its next probe, spread so
	// that they do not all come back in one claim.
	Repark(ctx context.Context, key string, at time.Time, spread time.Duration) (int, error)

	// Prune deletes the succeeded items last updated before before, with their attempt rows, at
	// most PruneBatch of them in one transaction, and returns how many it deleted. Items in any
	// other state are never deleted, nor a succeeded item that holds its dedupe key at now (its
	// UniqueFor has not passed since it succeeded): it is deleted once it has. An executor may
	// first try a lock of pruning shared by its instances; when another instance holds it, Prune
	// deletes nothing and reports busy (that instance is pruning: this one skips its pass). The
	// caller calls it again while it returns PruneBatch.
	Prune(ctx context.Context, before, now time.Time) (n int, busy bool, err error)

	// CancelItem makes c's item cancelled if it is still pending (a claim racing it wins or
	// loses whole), clearing its parked key; a running or finished item is left as it is. It
	// writes c.Audit's row in the same transaction and returns the item after, whether it
	// changed, and whether there is one.
	CancelItem(ctx context.Context, c ItemChange) (it ItemRow, changed, found bool, err error)

	// RunItemNow makes c's item due at c.Now (unless it is due sooner) and clears its parked key,
	// if it is still pending and no pause holds it back at c.Now: neither one of its request name
	// nor one of the breaker key it is parked on or guarded by (its key function's key is known
	// only when it is claimed). A running, finished or held item is left as it is. It writes
	// c.Audit's row in the same transaction, as CancelItem does.
	RunItemNow(ctx context.Context, c ItemChange) (it ItemRow, changed, found bool, err error)
}

// ControlStore is the store of what an operator sets on the queue: pauses, concurrency limits
// (with the slots running items hold), and the audit log of the changes.
type ControlStore interface {
	// SetPause stores r, replacing the pause of its kind and target if there is one, and calls
	// then (when not nil) in the same transaction with the pause it replaced (had: there was one),
	// so that the pause and its audit entry are written together.
	SetPause(ctx context.Context, r PauseRow, then func(tx *sql.Tx, prev PauseRow, had bool) error) error

	// DeletePause deletes the pause of kind and target and, for a breaker key whose pause held at
	// now, makes the items parked on the key due at now (as Unpark does), then calls then (when not
	// nil) in the same transaction with the pause deleted (had: there was one). It returns how many
	// items it freed. A key that was not paused, or whose pause had ended, frees nothing: the items
	// parked on it wait for a breaker (or were due when the pause ended).
	DeletePause(ctx context.Context, kind, target string, now time.Time, then func(tx *sql.Tx, prev PauseRow, had bool) error) (int, error)

	// Pauses returns the stored pauses of kind ("" for every kind), expired ones included, in
	// kind and target order.
	Pauses(ctx context.Context, kind string) ([]PauseRow, error)

	// SetLimit stores r (its InUse ignored), replacing the limit of its key if there is one, and
	// calls then (when not nil) in the same transaction with the limit it replaced (had: there
	// was one), so that the limit and its audit entry are written together.
	SetLimit(ctx context.Context, r LimitRow, then func(tx *sql.Tx, prev LimitRow, had bool) error) error

	// DeleteLimit deletes the limit of key, then calls then (when not nil) in the same transaction
	// with the limit deleted (had: there was one). The items parked on the key stay parked until
	// their time (the scheduler frees them: see WakeLimited's callers).
	DeleteLimit(ctx context.Context, key string, then func(tx *sql.Tx, prev LimitRow, had bool) error) error

	// Limits returns the stored limits in key order, each with the running items holding a slot
	// of its key.
	Limits(ctx context.Context) ([]LimitRow, error)

	// Acquire takes a slot of key for the running item of f: it reports whether the item holds
	// one (fewer than the key's limit of running items held it, or it already did, or the key has
	// no limit), exactly under concurrent acquisitions on any number of instances. The slot is
	// the item's: every end of its lease (Complete, Sweep) frees it. With hb, an item that gets no
	// slot is parked on key in the same transaction, and parked reports it: its
	// lease has ended, and no completion of it is to be written.
	Acquire(ctx context.Context, key string, f Fence, hb *HoldBack) (got, parked bool, err error)

	// WakeLimited makes as many of the pending items parked on key due at now as the key has free
	// slots, and returns how many.
	WakeLimited(ctx context.Context, key string, now time.Time) (int, error)

	// AddAudit inserts r (its ID is ignored) through db, a transaction that makes the action and
	// its record one, or, when db is nil, on its own.
	AddAudit(ctx context.Context, db Execer, r AuditRow) error

	// Audit returns the rows q selects.
	Audit(ctx context.Context, q AuditQuery) ([]AuditRow, error)
}

// DeadLetterStore is the store of dead letters, their replays (under leases) and their timelines.
type DeadLetterStore interface {
	// InsertDeadLetter captures a dead letter that no item stands behind and returns its id.
	InsertDeadLetter(ctx context.Context, d NewDeadLetter) (record.DeadLetterID, error)

	// DeadLetters returns the letters f selects, newest first, and how many match in all, or
	// CountLimit+1 when f.CountLimit is positive and more than it match.
	DeadLetters(ctx context.Context, f DeadLetterQuery) ([]DeadLetterRow, int, error)

	// DeadLetterRow returns one letter; found is false when there is none.
	DeadLetter(ctx context.Context, id record.DeadLetterID) (d DeadLetterRow, found bool, err error)

	// DeadLettersOfItems returns the letters of the dead items ids, in id order.
	DeadLettersOfItems(ctx context.Context, ids []record.ItemID) ([]DeadLetterRow, error)

	// Events lists the events of a letter in order.
	Events(ctx context.Context, id record.DeadLetterID) ([]EventRow, error)

	// DeadLetterCounts counts the letters by status, each up to limit, every status present:
	// a status with more letters is counted as limit+1 and named in over. It reads at most
	// limit+1 letters per status, however many are kept (letters are kept for good).
	DeadLetterCounts(ctx context.Context, limit int) (counts map[record.DeadLetterStatus]int, over map[record.DeadLetterStatus]bool, err error)

	// CountLetterStatuses counts the letters of each of statuses in full: the statuses
	// DeadLetterCounts found over its limit, counted again at most every so often.
	CountLetterStatuses(ctx context.Context, statuses []record.DeadLetterStatus) (map[record.DeadLetterStatus]int, error)

	// LeaseReplay leases the failed letter id to owner (a replay by actor) until until, if no other
	// replay holds an unexpired lease on it at now: a conditional update, no transaction held while
	// the replay runs. A lease that ran out while its replay was still its owner (the replaying
	// process died or lost the database) is recorded first, in the same transaction, as an
	// abandoned replay event, so the timeline shows every replay that started. It returns the
	// letter as leased (Done), or says why not (Missing, Busy).
	LeaseReplay(ctx context.Context, id record.DeadLetterID, owner, actor string, now, until time.Time) (DeadLetterRow, LeaseResult, error)

	// ExtendReplay moves owner's replay lease on id to until; it reports false when owner no
	// longer holds it.
	ExtendReplay(ctx context.Context, id record.DeadLetterID, owner string, until time.Time) (bool, error)

	// ReleaseReplay gives up owner's replay lease on id without recording anything (the replay
	// did not run to an outcome: its caller gave up).
	ReleaseReplay(ctx context.Context, id record.DeadLetterID, owner string) error

	// AbandonReplay frees the letter id leased to owner and appends ev, in one transaction, leaving
	// its status, error and retry count as they are: a replay whose handler ran but whose caller
	// gave up, so what the handler did is not known. It records nothing when owner no longer held
	// the lease.
	AbandonReplay(ctx context.Context, id record.DeadLetterID, owner string, ev EventRow) error

	// FinishReplay records a replay that ran, in one transaction: the letter (still leased to
	// owner) becomes replayed (ok) or stays failed with ev.Error as its error, its retry count
	// goes up by one, the lease is cleared, and ev is appended. It reports false, recording
	// nothing, when owner no longer held the lease (it ran out and another replay took it).
	FinishReplay(ctx context.Context, id record.DeadLetterID, owner string, ok bool, ev EventRow) (bool, error)

	// ReplayRecorded reports whether ev, the event of a replay of id, is in the letter's timeline:
	// a FinishReplay whose answer was lost may have committed all the same.
	ReplayRecorded(ctx context.Context, id record.DeadLetterID, ev EventRow) (bool, error)

	// Discard makes the failed letter id discarded and appends ev, in one transaction, unless a
	// replay holds an unexpired lease on it at ev.EndedAt. A replay whose lease ran out before its
	// outcome was recorded is recorded first, as abandoned (as LeaseReplay does), so a discarded
	// letter's timeline still shows the replay whose handler may have had effects.
	Discard(ctx context.Context, id record.DeadLetterID, ev EventRow) (LeaseResult, error)

	// AddEvent appends ev to the timeline of letter id.
	AddEvent(ctx context.Context, id record.DeadLetterID, ev EventRow) error
}

// BulkActionStore is the store of bulk actions on dead letters (replays and discards of a
// filter's letters) and on pending items (cancels, run-nows and priority changes of a filter's
// items), run under leases by one instance at a time.
type BulkActionStore interface {
	// CountDeadLetters returns how many letters f selects and the highest id among all letters
	// (0 when there are none), read in one transaction so that the count is of the letters up to
	// that id.
	CountDeadLetters(ctx context.Context, f DeadLetterQuery) (n int64, maxID record.DeadLetterID, err error)

	// InsertBulkAction stores b (its ID, cursor and totals are ignored) and audit, in one
	// transaction, and returns b's id. The audit row's Target is set to that id. It refuses b,
	// storing nothing, with a *BulkActionActiveError when an action of b's kind and filter has
	// not finished, however many instances insert at once.
	InsertBulkAction(ctx context.Context, b BulkActionRow, audit AuditRow) (int64, error)

	// BulkAction returns one action; found is false when there is none.
	BulkAction(ctx context.Context, id int64) (b BulkActionRow, found bool, err error)

	// BulkActions returns the actions with ids below before (all when 0), newest first, at most
	// limit: those on items when items is true, those on dead letters otherwise.
	BulkActions(ctx context.Context, before int64, limit int, items bool) ([]BulkActionRow, error)

	// ClaimBulkAction leases the oldest unfinished action whose lease is free or ran out at now to
	// owner until until, and returns it; found is false when there is none to take.
	ClaimBulkAction(ctx context.Context, owner string, now, until time.Time) (b BulkActionRow, found bool, err error)

	// SaveBulkAction extends owner's lease on action id to until and writes p; held is false (and
	// nothing is written) when owner no longer holds it: the action was cancelled, or its lease
	// ran out and another instance took it.
	SaveBulkAction(ctx context.Context, id int64, owner string, until, now time.Time, p BulkProgress) (held bool, err error)

	// CountBulkUnknown adds one to the unknown total of action id: a replay ran whose outcome
	// could not be recorded.
	CountBulkUnknown(ctx context.Context, id int64, now time.Time) error

	// AdvanceBulkAction moves owner's action id's cursor from from to to, rolling the outcomes of
	// the letters in between into its stored totals, in one statement; it reports false when owner
	// no longer holds the action (or the cursor is no longer from).
	AdvanceBulkAction(ctx context.Context, id int64, owner string, from, to record.DeadLetterID, now time.Time) (bool, error)

	// FinishBulkAction ends owner's action id in state (done or failed) with errText. When it is
	// done, the letters it matched that none of its outcomes accounts for are counted as skipped
	// (others settled them first); a failed action did not reach every letter, so it counts none.
	// It reports false when owner no longer held it. audit, when not nil, is given the action as
	// it ends and returns the audit entry to append in the same transaction (none when nil).
	FinishBulkAction(ctx context.Context, id int64, owner, state, errText string, now time.Time, audit func(b BulkActionRow) *AuditRow) (bool, error)

	// ReleaseBulkAction gives up owner's lease on action id (its scheduler is stopping), so that
	// another instance takes it up at its next poll.
	ReleaseBulkAction(ctx context.Context, id int64, owner string, now time.Time) error

	// DeferBulkAction gives up owner's lease on action id and writes p, leaving the action to no
	// instance until until: this one cannot go on with it (it lacks a letter's request), another
	// may, and none takes it up again before then.
	DeferBulkAction(ctx context.Context, id int64, owner string, until, now time.Time, p BulkProgress) error

	// CancelBulkAction ends the unfinished action id as cancelled and appends audit, in one
	// transaction; found is false for an unknown id, and cancelled false (audit then recorded
	// with outcome no_change by the caller's choice of audit) when it had already finished.
	CancelBulkAction(ctx context.Context, id int64, now time.Time, audit func(cancelled bool, b BulkActionRow) AuditRow) (b BulkActionRow, found, cancelled bool, err error)

	// BulkLetters returns, in id order, at most limit failed letters f selects with ids in
	// (after, upTo] that action has not already replayed to a still-failed outcome: the next letters
	// a bulk action works on. Letters it replayed successfully or discarded are no longer failed.
	BulkLetters(ctx context.Context, action int64, f DeadLetterQuery, after, upTo record.DeadLetterID, limit int) ([]DeadLetterRow, error)

	// CountBulkItems returns how many pending items q selects (its State, After and Limit are
	// not used) and the highest id among all items (0 when there are none), read in one
	// transaction so that the count is of the items up to that id.
	CountBulkItems(ctx context.Context, q ItemQuery) (n int64, maxID record.ItemID, err error)

	// BulkItems returns, in id order, at most limit pending items q selects with ids in
	// (after, upTo]: the next items an item action works on.
	BulkItems(ctx context.Context, q ItemQuery, after, upTo record.ItemID, limit int) ([]ItemRow, error)

	// StepItemBulkAction applies c to item if it is still pending (for a run-now: and no pause
	// holds it back at now, as RunItemNow checks) and moves owner's action id's cursor from from
	// to item, counting the item as changed or skipped, in one transaction. held is false, and
	// nothing is changed, when owner no longer holds the action (or its cursor is no longer
	// from).
	StepItemBulkAction(ctx context.Context, id int64, owner string, from, item record.ItemID, c ItemBulkChange, now time.Time) (held, changed bool, err error)
}

// ScheduleStore is the store of recurring schedules and their run log; each due run is claimed
// by one instance under a lease.
type ScheduleStore interface {
	// UpsertSchedule inserts the schedule name, declared in code, due at next, or, when a row
	// exists with another spec or location or is a schedule added at run time, replaces them and its
	// due time (the code's declaration takes the name over; the row's pause stays). A row of the
	// code's spec and location is left as it is.
	UpsertSchedule(ctx context.Context, name, spec, location string, next, now time.Time) error

	// Schedules returns every schedule row, in name order.
	Schedules(ctx context.Context) ([]ScheduleRow, error)

	// EditSchedule changes the row of name in one transaction: it reads the row (locked until
	// the transaction ends, so that concurrent edits of one row run one after the other) and calls edit with it, nil when
	// there is none. edit returns the row to write, inserted or replacing the read one's spec,
	// location, request, payload, due time, pause, removal and run-now (nil: write nothing), and
	// may write through tx what must commit with it (an audit entry). An error of edit rolls back.
	EditSchedule(ctx context.Context, name string, now time.Time, edit func(tx *sql.Tx, r *ScheduleRow) (*ScheduleRow, error)) error

	// ClaimScheduleRun claims the due run d for owner: when the row still has d's spec, location
	// and due time, no run holds an unexpired lease, and the schedule is neither removed nor paused
	// at now, it moves next_at to d.Next and leases the run to owner from now until until. It
	// reports whether it did; false means another instance acted on that due run first, a run is
	// still going, or a pause or removal was stored since the row was read.
	ClaimScheduleRun(ctx context.Context, d ScheduleDue, owner string, now, until time.Time) (bool, error)

	// ClaimScheduleRunNow claims the run an operator asked for at at on the schedule name for
	// owner: when the row's run_now_at is still at and no run holds an unexpired lease, it clears
	// the request and leases the run to owner from now until until, leaving next_at as it is. It
	// reports whether it did; false means another instance claimed it first, or a run is still
	// going (the request then waits for its end).
	ClaimScheduleRunNow(ctx context.Context, name string, at time.Time, owner string, now, until time.Time) (bool, error)

	// PassScheduleRun passes over the due run d of a paused schedule: when the row still has d's
	// spec, location and due time, it moves next_at to d.Next, logging nothing. It reports whether
	// it did.
	PassScheduleRun(ctx context.Context, d ScheduleDue, now time.Time) (bool, error)

	// SkipScheduleRun passes over the due run d because a run still holds an unexpired lease: when
	// the row still has d's spec, location and due time and that lease, it moves next_at to d.Next
	// and logs a skipped run by instance with reason, in one transaction. It reports whether it did.
	SkipScheduleRun(ctx context.Context, d ScheduleDue, instance string, now time.Time, reason string) (bool, error)

	// SkipHeldScheduleRun passes over the due run d that would have been claimed (as
	// ClaimScheduleRun would: the row still has d's spec, location and due time, no run holds an
	// unexpired lease, the schedule is neither removed nor paused at now) but is held back for
	// reason (its request name is paused): it moves next_at to d.Next and logs a skipped run by
	// instance with reason, in one transaction. It reports whether it did.
	SkipHeldScheduleRun(ctx context.Context, d ScheduleDue, instance string, now time.Time, reason string) (bool, error)

	// SkipScheduleRunNow passes over the run of the schedule name an operator (by) asked for at at,
	// that would have been claimed (as ClaimScheduleRunNow would) but is held back for reason: it
	// clears the request and logs a skipped run by instance with reason, in one transaction. It
	// reports whether it did.
	SkipScheduleRunNow(ctx context.Context, name string, at time.Time, by, instance string, now time.Time, reason string) (bool, error)

	// EndScheduleRun logs the run r and records it as its schedule's last run; the lease is
	// released when it is still r's (same owner, same start), so a run whose lease expired and was
	// taken over does not end its successor's.
	EndScheduleRun(ctx context.Context, r ScheduleRunRow) error

	// ExtendScheduleRuns moves the leases of owner's runs to until.
	ExtendScheduleRuns(ctx context.Context, owner string, until time.Time) error

	// ScheduleRuns returns the run log of the schedule name, newest first, at most limit rows
	// (100 when limit is not positive).
	ScheduleRuns(ctx context.Context, name string, limit int) ([]ScheduleRunRow, error)
}
