package store

import (
	"context"
	"errors"
	"fmt"
)

// debounceOrderSQL is the claim's test that no earlier item of a debounced item's request name
// and debounce key is pending or running (switchboard_items_debounce_order): an update made
// while the key's item ran, or waited for a retry, is delivered after it, whatever their due
// times. An item without a key is not tested.
const debounceOrderSQL = `(i.debounce_key IS NULL OR NOT EXISTS (
                SELECT 1 FROM switchboard_items d
                WHERE d.name = i.name AND d.debounce_key = i.debounce_key AND d.state IN ('pending', 'running') AND d.id < i.id))`

// debounceSQL inserts a debounced item, or updates the item of its name and key that is pending
// and was never claimed (the unique index switchboard_items_debounce, whose predicate the
// conflict target repeats): the payload, metadata, token, breaker key, deadline, fairness key and
// priority become the enqueue's, and the due time the enqueue's unless that is after the item's debounce_until;
// the item keeps its id, its ordering key, its creation time and debounce_until, the bound its
// first enqueue set. It returns the item's id and how many enqueues updated it (0: this one
// inserted it). %s is the engine's function of the lesser of two values.
//
// Concurrency: of enqueues of one key at once, one inserts and the others update its row
// (PostgreSQL: each waits for the insert it conflicts with, then updates the committed row).
// An update meeting a claim of the item waits for the claim's lock; the claim having made the
// item running (claimed_at set), the row no longer conflicts, and the enqueue inserts a new
// item instead (PostgreSQL runs the insert again after an ON CONFLICT that found its row
// changed by a transaction that committed meanwhile). So an update is either in the payload a
// claim reads or in a new item, never lost. Placeholders: name, payload, ordering key, next at,
// last error, parked key, created at, updated at, metadata, token, guard key, deadline,
// deferred, debounce key, debounce until, fairness key, priority, head start, reference.
const debounceSQL = `INSERT INTO switchboard_items (name, payload, state, ordering_key, next_at, last_error, parked_key, created_at, updated_at,
	    metadata, token, guard_key, deadline, deferred, debounce_key, debounce_until, fair_key, priority, head_start, reference)
	VALUES (?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (name, debounce_key) WHERE debounce_key IS NOT NULL AND state = 'pending' AND claimed_at IS NULL
	DO UPDATE SET payload = excluded.payload, metadata = excluded.metadata, token = excluded.token, guard_key = excluded.guard_key,
	    deadline = excluded.deadline, reference = excluded.reference, fair_key = excluded.fair_key, priority = excluded.priority, head_start = excluded.head_start,
	    next_at = %s(excluded.next_at, switchboard_items.debounce_until),
	    updated_at = excluded.updated_at, debounces = switchboard_items.debounces + 1
	RETURNING id, debounces`

// checkDebounce refuses a debounced item that cannot be one: a debounced item has no dedupe key
// (an enqueue of its key updates it, where one of a dedupe key would insert nothing), and is
// never due after its DebounceUntil.
func checkDebounce(it NewItem) error {
	switch {
	case it.DebounceKey == "":
		return nil
	case it.DedupeKey != "" || it.UniqueFor > 0:
		return errors.New("durable: Enqueue: an item with a debounce key has no dedupe key or uniqueness window")
	case it.DebounceUntil.Before(it.NextAt):
		return fmt.Errorf("durable: Enqueue: the debounced item is due at %v, after its DebounceUntil %v", it.NextAt, it.DebounceUntil)
	}
	return nil
}

// debounce inserts the debounced item it through db, or updates the item of its name and key
// that is pending and was never claimed (debounceSQL); updated says which.
func (s *Store) debounce(ctx context.Context, db querier, it NewItem) (id ItemID, updated bool, err error) {
	var deadline any
	if !it.Deadline.IsZero() {
		deadline = micros(it.Deadline)
	}
	deferred := 0
	if it.Deferred {
		deferred = 1
	}
	var v, n int64
	err = db.QueryRowContext(ctx, s.e.stmts().debounce,
		it.Name, it.Payload, nullString(it.OrderingKey), micros(it.NextAt), nullString(it.LastError), nullString(it.ParkedKey),
		micros(it.Now), micros(it.Now), nullString(string(it.Metadata)), nullString(it.Token), nullString(it.GuardKey), deadline,
		deferred, it.DebounceKey, micros(it.DebounceUntil), storedText(fairnessKey(it)), it.Priority, it.HeadStart.Microseconds(), nullString(it.Reference)).Scan(&v, &n)
	if err != nil {
		err = fmt.Errorf("durable: enqueue: %w", err)
		if !s.e.notApplied(err) {
			err = &UnknownOutcomeError{Err: err}
		}
		return 0, false, err
	}
	return ItemID(v), n > 0, nil
}
