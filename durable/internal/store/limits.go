package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

const limitColumns = "key, max_running, actor, reason, created_at"

// heldCountSQL counts the running items holding a slot of a key (placeholder %s: the key),
// through the partial index switchboard_items_held, which holds only such items.
const heldCountSQL = `(SELECT COUNT(*) FROM switchboard_items h WHERE h.held_key = %s AND h.state = 'running')`

// acquireSQL takes a slot of key ?1 for the running item ?2 under the fence (owner ?3, attempt
// ?4): it marks the item as holding the key if fewer than the limit's running items hold it
// (or it already does; or the key has no limit any more). It runs after the limit row was
// locked (acquireLockSQL) in the same transaction: on PostgreSQL, under READ COMMITTED, the
// statement's snapshot is taken after the lock was granted, so it sees every slot taken by
// the transactions that held the lock before; the ones that free slots (completions, the
// sweep) take no lock and at worst make the count too high, which refuses, never admits.
// On SQLite the write transaction is exclusive.
const acquireSQL = `UPDATE switchboard_items SET held_key = ?1
	WHERE id = ?2 AND state = 'running' AND lease_owner = ?3 AND attempts = ?4
	  AND (held_key = ?1 OR (SELECT COUNT(*) FROM switchboard_items h WHERE h.held_key = ?1 AND h.state = 'running')
	        < COALESCE((SELECT l.max_running FROM switchboard_concurrency_limits l WHERE l.key = ?1), 2147483647))
	RETURNING id`

// acquireLockSQL locks the limit row of a key (PostgreSQL): the acquisitions of one key take
// turns; those of other keys, and every other statement, do not wait for it.
const acquireLockSQL = `SELECT 1 FROM switchboard_concurrency_limits WHERE key = $1 FOR UPDATE`

// wakeLimitedSQL makes due at ?1 as many of the pending items parked on key ?2 (not due yet,
// earliest due first) as the key has free slots: its limit less the running items holding it
// (none without a limit). A hint, not a reservation: the woken items still take their slots
// one by one. It is SQLite's; PostgreSQL's is pgWakeSQL.
const wakeLimitedSQL = `UPDATE switchboard_items SET next_at = ?1, parked_key = NULL
	WHERE id IN (` + wakeChosenSQL + `)`

// wakeChosenSQL chooses the items WakeLimited wakes (see wakeLimitedSQL); %s is the larger of
// two numbers, MAX on SQLite, GREATEST on PostgreSQL.
const wakeChosenSQL = `SELECT w.id FROM switchboard_items w
	    WHERE w.parked_key = ?2 AND w.state = 'pending' AND w.next_at > ?1
	    ORDER BY w.next_at, w.id
	    LIMIT %s(COALESCE((SELECT l.max_running FROM switchboard_concurrency_limits l WHERE l.key = ?2), 0)
	        - (SELECT COUNT(*) FROM switchboard_items h WHERE h.held_key = ?2 AND h.state = 'running'), 0)`

// pgWakeSQL is wakeLimitedSQL on PostgreSQL: the items are chosen (c), then locked in
// ascending id (k: the lock order), each tested again on its newest version (still pending,
// parked on the key, not due), and updated through the primary key (the ids collected by an
// InitPlan, as the claim's: postgresClaim). k compares each item with columns of c, not with
// constants, so that the primary key, probed once per chosen item, is its only way in: with
// constants the planner may read the key's parked items for each chosen one.
var pgWakeSQL = pg(`WITH c AS MATERIALIZED (
	SELECT x.id, ?2::text AS key, 'pending'::text AS pending, ?1::bigint AS now FROM (` + fmt.Sprintf(wakeChosenSQL, "GREATEST") + `) x
), k AS MATERIALIZED (
	SELECT k.id FROM c JOIN switchboard_items k ON k.id = c.id
	WHERE k.parked_key = c.key AND k.state = c.pending AND k.next_at > c.now
	ORDER BY k.id
	FOR NO KEY UPDATE OF k
)
UPDATE switchboard_items SET next_at = ?1, parked_key = NULL
	WHERE id = ANY(ARRAY(SELECT id FROM k))`)

// The statements of each engine.
var (
	pgAcquireSQL  = pg(acquireSQL)
	sqliteWakeSQL = fmt.Sprintf(wakeLimitedSQL, "MAX")
	// limitsSQL lists the limits from key $1 on (the empty key: all of them); a statement
	// without a parameter keeps its first plan whatever plan_cache_mode says, where one with
	// a parameter is planned at each run (customPlans).
	limitsSQL = `SELECT ` + limitColumns + `, ` + fmt.Sprintf(heldCountSQL, "l.key") + `
	FROM switchboard_concurrency_limits l WHERE l.key >= ? ORDER BY key`
)

// pg turns a statement numbered ?N into PostgreSQL's $N.
func pg(q string) string { return strings.ReplaceAll(q, "?", "$") }

func (s *Store) numbered(q string) string {
	if s.e.String() == "postgres" {
		return pg(q)
	}
	return q
}

// SetLimit stores r (its InUse ignored), replacing the limit of its key if there is one, and
// calls then (when not nil) in the same transaction with the limit it replaced (had: there
// was one), so that the limit and its audit entry are written together.
func (s *Store) SetLimit(ctx context.Context, r LimitRow, then func(tx *sql.Tx, prev LimitRow, had bool) error) error {
	err := inTx(ctx, s.db, func(tx *sql.Tx) error {
		prev, had, err := s.limitIn(ctx, tx, r.Key)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.e.rebind(`INSERT INTO switchboard_concurrency_limits (`+limitColumns+`) VALUES (?, ?, ?, ?, ?)
	ON CONFLICT (key) DO UPDATE SET max_running = excluded.max_running, actor = excluded.actor, reason = excluded.reason, created_at = excluded.created_at`),
			storedText(r.Key), r.Max, storedText(r.Actor), nullString(storedText(r.Reason)), micros(r.CreatedAt)); err != nil {
			return err
		}
		if then != nil {
			return then(tx, prev, had)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("durable: concurrency limit %q: %w", r.Key, err)
	}
	return nil
}

// DeleteLimit deletes the limit of key, then calls then (when not nil) in the same transaction
// with the limit deleted (had: there was one). The items parked on the key stay parked until
// their time (the scheduler frees them: see WakeLimited's callers).
func (s *Store) DeleteLimit(ctx context.Context, key string, then func(tx *sql.Tx, prev LimitRow, had bool) error) error {
	err := inTx(ctx, s.db, func(tx *sql.Tx) error {
		prev, had, err := s.limitIn(ctx, tx, key)
		if err != nil {
			return err
		}
		if had {
			if _, err := tx.ExecContext(ctx, s.e.rebind(`DELETE FROM switchboard_concurrency_limits WHERE key = ?`), key); err != nil {
				return err
			}
		}
		if then != nil {
			return then(tx, prev, had)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("durable: remove concurrency limit %q: %w", key, err)
	}
	return nil
}

// Limits returns the stored limits in key order, each with the running items holding a slot
// of its key.
func (s *Store) Limits(ctx context.Context) ([]LimitRow, error) {
	var out []LimitRow
	err := s.readRows(ctx, s.e.rebind(limitsSQL), []any{""}, func(rows RowReader) error {
		for rows.Next() {
			var (
				r       LimitRow
				reason  sql.NullString
				created int64
			)
			if err := rows.Scan(&r.Key, &r.Max, &r.Actor, &reason, &created, &r.InUse); err != nil {
				return err
			}
			r.Reason, r.CreatedAt = reason.String, fromMicros(created)
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("durable: concurrency limits: %w", err)
	}
	return out, nil
}

func (s *Store) limitIn(ctx context.Context, tx *sql.Tx, key string) (LimitRow, bool, error) {
	var (
		r       LimitRow
		reason  sql.NullString
		created int64
	)
	err := tx.QueryRowContext(ctx, s.e.rebind("SELECT "+limitColumns+" FROM switchboard_concurrency_limits WHERE key = ?"), key).
		Scan(&r.Key, &r.Max, &r.Actor, &reason, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return LimitRow{}, false, nil
	}
	if err != nil {
		return LimitRow{}, false, err
	}
	r.Reason, r.CreatedAt = reason.String, fromMicros(created)
	return r, true, nil
}

// holdBackSQL parks the running item ?2 under the fence (owner ?3, attempt ?4) on key ?1, due
// at ?5, updated at ?6, unless it holds the key's slot: the claim is undone (no attempt) and the
// lease ended, as the completion of an item held back writes it. It runs after acquireSQL in
// the same transaction, so the item is never left running in the database, where a crash
// would charge it an attempt, while it waits for a slot.
const holdBackSQL = `UPDATE switchboard_items
	SET state = 'pending', next_at = ?5, attempts = attempts - 1, parked_key = ?1, alone = 0,
	    lease_owner = NULL, lease_until = NULL, held_key = NULL, updated_at = ?6
	WHERE id = ?2 AND state = 'running' AND lease_owner = ?3 AND attempts = ?4 AND COALESCE(held_key, '') <> ?1
	RETURNING id`

var pgHoldBackSQL = pg(holdBackSQL)

// Acquire takes a slot of key for the running item of f: it reports whether the item holds
// one (fewer than the key's limit of running items held it, or it already did, or the key has
// no limit), exactly under concurrent acquisitions on any number of instances. The slot is
// the item's: every end of its lease (Complete, Sweep) frees it. With hb, an item that gets no
// slot is parked on key in the same transaction (see holdBackSQL), and parked reports it: its
// lease has ended, and no completion of it is to be written.
func (s *Store) Acquire(ctx context.Context, key string, f Fence, hb *HoldBack) (got, parked bool, err error) {
	key = storedText(key)
	args := []any{key, int64(f.ItemID), f.Owner, f.Attempt}
	var parkArgs []any
	if hb != nil {
		parkArgs = append(args[:4:4], micros(hb.NextAt), micros(hb.Now))
	}
	if pe, ok := s.e.(*postgresEngine); ok {
		// The lock, the conditional update and the hold-back in one round trip and one
		// implicit transaction, with sequential scans off (indexPlans): a plan kept from an
		// idle spell counted a key's slots by reading the whole table, backlog and all, for
		// every item; now at worst the running items, through the lease index. Not planned
		// anew at each run (customPlans), as the statements that run now and then are: it runs
		// per item, and its plan costs several times its run (0.22 ms against 0.03).
		qs := []BatchQuery{{SQL: acquireLockSQL, Args: []any{key}}, {SQL: pgAcquireSQL, Args: args}}
		reads := []func(RowReader) error{drain, func(rows RowReader) error {
			for rows.Next() {
				got = true
			}
			return rows.Err()
		}}
		if hb != nil {
			qs = append(qs, BatchQuery{SQL: pgHoldBackSQL, Args: parkArgs})
			reads = append(reads, func(rows RowReader) error {
				for rows.Next() {
					parked = true
				}
				return rows.Err()
			})
		}
		err = pe.indexed(ctx, s.db, qs, reads)
	} else {
		// SQLite: the write transaction is exclusive.
		err = inTx(ctx, s.db, func(tx *sql.Tx) error {
			got, parked = false, false
			var id int64
			err := tx.QueryRowContext(ctx, s.numbered(acquireSQL), args...).Scan(&id)
			switch {
			case errors.Is(err, sql.ErrNoRows):
			case err != nil:
				return err
			default:
				got = true
			}
			if got || hb == nil {
				return nil
			}
			err = tx.QueryRowContext(ctx, s.numbered(holdBackSQL), parkArgs...).Scan(&id)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				return nil
			case err != nil:
				return err
			}
			parked = true
			return nil
		})
	}
	if err != nil {
		return false, false, fmt.Errorf("durable: take a slot of %q for item %d: %w", key, f.ItemID, err)
	}
	return got, parked, nil
}

// drain reads rows to their end, keeping nothing.
func drain(rows RowReader) error {
	for rows.Next() {
	}
	return rows.Err()
}

// WakeLimited makes as many of the pending items parked on key due at now as the key has free
// slots (see wakeLimitedSQL), and returns how many.
func (s *Store) WakeLimited(ctx context.Context, key string, now time.Time) (int, error) {
	q := sqliteWakeSQL
	if s.e.String() == "postgres" {
		q = pgWakeSQL
	}
	n, err := s.e.replannedCount(ctx, s.db, q, []any{micros(now), key})
	if err != nil {
		return 0, fmt.Errorf("durable: wake the items of %q: %w", key, err)
	}
	return n, nil
}
