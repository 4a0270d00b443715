package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// PostgresDriver is what the PostgreSQL engine needs from the database driver (pgx, through
// its database/sql adapter), given by the driver package so that this package imports none.
type PostgresDriver struct {
	// NotApplied reports a driver error known to leave the statement unapplied (see
	// Engine.notApplied); errors database/sql raises itself are classified here.
	NotApplied func(err error) bool
	// ReadOnly reports a write refused by a server that takes none (a standby, a fenced
	// primary); nil: no error is classified so.
	ReadOnly func(err error) bool
	// SendBatch sends queries as one batch on conn, in one round trip and one implicit
	// transaction; read[i] reads the rows of queries[i]. Required: the claim loop's statements
	// run in batches (see indexPlans).
	SendBatch func(ctx context.Context, conn *sql.Conn, queries []BatchQuery, read []func(RowReader) error) error
	// Listen runs LISTEN on conn for each of channels, calls listening once it listens, then
	// notified with the channel and payload of each notification on them, until ctx ends or the
	// connection fails; it returns the error that ended it. Nil: the engine polls (WatchDue and
	// WatchBreakers answer ErrNoNotifications).
	Listen func(ctx context.Context, conn *sql.Conn, channels []string, listening func(), notified func(channel, payload string)) error
}

// BatchQuery is one statement of a batch (an alias of an unnamed type, so that a driver's
// function of the same shape is assignable without importing this package).
type BatchQuery = struct {
	SQL  string
	Args []any
}

// NewPostgres returns the engine of PostgreSQL databases over drv: any number of instances
// share one database, claiming with FOR UPDATE SKIP LOCKED.
func NewPostgres(drv PostgresDriver) Engine {
	e := newPostgres()
	e.drv = drv
	return e
}

type postgresEngine struct {
	st           statements
	completeMany string
	// completeManyRows also writes a success's attempt row (see successRows).
	completeManyRows string
	extendStmt       string
	sweepStmt        string
	// insertNotify is the insert that also notifies ItemsChannel (see Store.EnqueueTx).
	insertNotify string
	drv          PostgresDriver
}

// The PostgreSQL statements of the scheduler are written so that their generic plans probe
// indexes: the pgx driver prepares every statement, and after five executions PostgreSQL may
// keep a generic plan, costed without the parameters' values, whatever the table holds (a
// million finished rows, an empty queue). TestIndexPlans checks them with plan_cache_mode =
// force_generic_plan.

// postgresClaim is the claim of items whose isolate flag is isolate. The ids are collected by
// an InitPlan, ARRAY(SELECT … LIMIT … FOR UPDATE SKIP LOCKED), run once; the update finds them
// through the primary key. With "id IN (subquery)" the planner was free to hash-join the
// subquery with a sequential scan of the whole table, and did once the statistics promised
// many due items.
//
// Concurrency: the subquery locks each row it returns. A row that a concurrent claim changed
// and committed after this statement's snapshot is re-read at its newest version when locked
// (READ COMMITTED), and the subquery's WHERE (pending, due, isolate, ordering, debounce order)
// is evaluated again on it; a row locked by a running transaction is skipped. So every id in
// the array is locked by this transaction and was pending and due when locked; nobody else can
// change it until this transaction ends, and the outer UPDATE updates exactly those rows
// (TestClaimConcurrentExactlyOnce). An enqueue that updates a debounced item (debounceSQL)
// takes the same row lock: the claim either skips the item while the update holds it, or
// locks the version the update committed (its payload, its due time), or holds it first, and
// then the update, finding the item claimed, inserts a new item (TestDebounceRacesClaims).
// Placeholders: $1 owner, $2 lease until, $3 claimed at,
// $4 updated at, $5 alone, $6 now, $7 limit.
func postgresClaim(isolate int) string {
	return fmt.Sprintf(`UPDATE switchboard_items
SET state = 'running', lease_owner = $1, lease_until = $2, claimed_at = $3, updated_at = $4,
    attempts = attempts + 1, alone = $5
WHERE id = ANY(ARRAY(
        SELECT i.id FROM switchboard_items i
        WHERE i.state = 'pending' AND i.isolate = %d AND i.next_at <= $6
          AND `+orderedFirstSQL+`
          AND `+debounceOrderSQL+`
          AND %s
        ORDER BY i.next_at, i.id
        LIMIT $7
        FOR UPDATE OF i SKIP LOCKED))
RETURNING `+claimColumns, isolate, fmt.Sprintf(pausedNameSQL, "$6"))
}

// postgresComplete ends a batch of leases in one statement. The fence check compares the state
// with a column of the materialized input rather than a constant: "state = 'running'" would let
// the planner read every running item through the lease index and, in the generic plan, which
// costs the arrays at ten elements, join each of them to every completion in a nested loop.
// This way the primary key, probed once per completion, is the only way in. The attempt rows
// are inserted from the update's RETURNING, which carries the input's columns. A completion
// that records an attempt clears isolate: the item ran to an outcome of its own. Every
// completion frees the concurrency slot its lease held (held_key). Placeholders:
// arrays of id, attempt, owner, next state, next_at, undo (1: the claim is undone), error,
// started_at, ended_at, outcome (empty: no attempt), parked key (empty: none), cause of
// death (empty: not known; kept by the dead letter).
// A success's attempt is recorded on its item (success_id, from the attempts' identity, and
// success_instance, success_started_at, success_ended_at), not in a row of its own: every
// other attempt gets a row (a). The row of a success was one more insert and two more index
// entries per completed item, most of a drain's writes; successRows makes the statement that
// writes it too.
// An item that finishes (it died, or it succeeded and holds no dedupe key after: a key's
// window is the dedupe index's, on the claim's table, so such an item stays there until it is
// pruned) is moved to switchboard_finished_items: m deletes it from the claim's table and f inserts it,
// finished, into the other; u updates the others in place. c is the rows of both, as u
// returns them.
// An item completed as dead gets its dead letter in the same statement (d), so the two exist
// together or not at all; d reads the item's name, payload and dedupe key from the row m
// deleted.
//
// Lock order (docs/architecture.md): l locks the items still held under their fences in
// ascending id, whatever order the batch comes in and whatever order the plan joins it in,
// before u updates them (u reads its rows from l, and its rows are exactly those l locked: the
// same snapshot, the same fence). Without l the update locked each item as its plan met it,
// and a batch met in one order and an unpark of a key over the same items (a claimed item keeps
// its parked key) in the other deadlocked.
const postgresComplete = `WITH v AS MATERIALIZED (
    SELECT v.*, 'running'::text AS running
    FROM unnest($1::text::bigint[], $2::text::int[], $3::text::text[], $4::text::text[], $5::text::bigint[], $6::text::int[], $7::text::text[],
                $8::text::bigint[], $9::text::bigint[], $10::text::text[], $11::text::text[], $12::text::text[])
        AS v(id, attempt, owner, state, next_at, undo, err, started_at, ended_at, outcome, parked_key, cause)
), l AS MATERIALIZED (
    SELECT v.*
    FROM v JOIN switchboard_items i ON i.id = v.id
    WHERE i.state = v.running AND i.lease_owner = v.owner AND i.attempts = v.attempt
    ORDER BY i.id
    FOR NO KEY UPDATE OF i
), u AS (
    UPDATE switchboard_items i
    SET state = v.state, next_at = v.next_at, attempts = i.attempts - v.undo,
        interruptions = i.interruptions + CASE WHEN v.outcome = 'interrupted' THEN 1 ELSE 0 END,
        isolate = CASE WHEN v.outcome = '' THEN i.isolate ELSE 0 END,
        last_error = COALESCE(NULLIF(v.err, ''), i.last_error), parked_key = NULLIF(v.parked_key, ''), alone = 0,
        lease_owner = NULL, lease_until = NULL, held_key = NULL, updated_at = v.ended_at,
        success_id = CASE WHEN v.outcome = 'succeeded' THEN nextval('switchboard_attempts_id_seq') ELSE i.success_id END,
        success_instance = CASE WHEN v.outcome = 'succeeded' THEN v.owner ELSE i.success_instance END,
        success_started_at = CASE WHEN v.outcome = 'succeeded' THEN v.started_at ELSE i.success_started_at END,
        success_ended_at = CASE WHEN v.outcome = 'succeeded' THEN v.ended_at ELSE i.success_ended_at END
    FROM l v
    WHERE i.id = v.id AND i.state = v.running AND i.lease_owner = v.owner AND i.attempts = v.attempt
      AND NOT (v.state = 'dead' OR (v.state = 'succeeded' AND (i.unique_for IS NULL OR i.dedupe_key IS NULL)))
    RETURNING i.id, v.owner, v.attempt, v.started_at, v.ended_at, v.outcome, v.err, v.state AS next_state, v.cause
), m AS (
    DELETE FROM switchboard_items i
    USING l v
    WHERE i.id = v.id AND i.state = v.running AND i.lease_owner = v.owner AND i.attempts = v.attempt
      AND (v.state = 'dead' OR (v.state = 'succeeded' AND (i.unique_for IS NULL OR i.dedupe_key IS NULL)))
    RETURNING i.*, v.owner AS v_owner, v.attempt AS v_attempt, v.state AS v_state, v.next_at AS v_next_at, v.undo AS v_undo,
        v.err AS v_err, v.started_at AS v_started_at, v.ended_at AS v_ended_at, v.outcome AS v_outcome,
        v.parked_key AS v_parked_key, v.cause AS v_cause
), f AS (
    INSERT INTO switchboard_finished_items (id, name, payload, state, attempts, dedupe_key, ordering_key,
        next_at, lease_owner, lease_until, claimed_at, last_error, created_at, updated_at, interruptions,
        isolate, alone, unattributed, parked_key, metadata, token, guard_key, deadline, unique_for,
        unique_released_at, held_key, deferred, debounce_key, debounce_until, debounces, fair_key, priority,
        head_start, success_id, success_instance, success_started_at, success_ended_at, reference)
    SELECT id, name, payload, v_state, attempts - v_undo, dedupe_key, ordering_key, v_next_at, NULL, NULL, claimed_at,
        COALESCE(NULLIF(v_err, ''), last_error), created_at, v_ended_at,
        interruptions + CASE WHEN v_outcome = 'interrupted' THEN 1 ELSE 0 END, CASE WHEN v_outcome = '' THEN isolate ELSE 0 END,
        0, unattributed, NULLIF(v_parked_key, ''), metadata, token, guard_key, deadline, unique_for, unique_released_at, NULL,
        deferred, debounce_key, debounce_until, debounces, fair_key, priority, head_start,
        CASE WHEN v_outcome = 'succeeded' THEN nextval('switchboard_attempts_id_seq') ELSE success_id END,
        CASE WHEN v_outcome = 'succeeded' THEN v_owner ELSE success_instance END,
        CASE WHEN v_outcome = 'succeeded' THEN v_started_at ELSE success_started_at END,
        CASE WHEN v_outcome = 'succeeded' THEN v_ended_at ELSE success_ended_at END,
        reference
    FROM m
), c AS (
    SELECT * FROM u
    UNION ALL
    SELECT id, v_owner, v_attempt, v_started_at, v_ended_at, v_outcome, v_err, v_state, v_cause FROM m
), a AS (
    INSERT INTO switchboard_attempts (item_id, attempt, instance, started_at, ended_at, outcome, error)
    SELECT id, attempt, owner, started_at, ended_at, outcome, NULLIF(err, '') FROM c WHERE outcome NOT IN ('', 'succeeded')
), d AS (
    INSERT INTO switchboard_dead_letters (item_id, source, name, item_key, payload, error, status, retry_count, created_at, updated_at, metadata, cause)
    SELECT id, name, name, COALESCE(dedupe_key, ''), payload, COALESCE(NULLIF(v_err, ''), last_error, ''), 'failed', 0,
           v_ended_at, v_ended_at, metadata, NULLIF(v_cause, '')
    FROM m
    WHERE v_state = 'dead'
    ON CONFLICT DO NOTHING
)
SELECT id, owner, attempt FROM c`

// successRows returns completion statement q that also writes a success's attempt row (for
// Completion.SuccessRow), beside the success recorded on its item.
func successRows(q string) string {
	const only = `WHERE outcome NOT IN ('', 'succeeded')`
	if strings.Count(q, only) != 1 {
		panic("store: the completion's attempt rows are not chosen where successRows looks for it")
	}
	return strings.Replace(q, only, `WHERE outcome <> ''`, 1)
}

// completion returns the completion statement for cs. A batch of one item takes the lock step
// too: with the move out of the claim's table, the statement without it (the update and the
// delete each finding the item through the input) drained a one-worker queue at 0.75x the
// rate of the whole one, where before the move it had been the faster.
func (e *postgresEngine) completion(cs []Completion) string {
	if wantsSuccessRow(cs) {
		return e.completeManyRows
	}
	return e.completeMany
}

// postgresExtend moves the leases of owner's running items: ids joined through the primary key,
// the state compared with a column of the input for the same reason as in the completion. The
// items are locked in ascending id (the lock order), by l, once (an InitPlan, as the claim's),
// before the update finds them again through the primary key. Each reads the items through
// the input's ids (id = ANY), so that no plan, however empty the statistics made the table
// look when it was made, reads the primary key whole (TestIndexPlans, "empty"); joined to the
// update instead, the lock was run again for every item updated. Placeholders: $1 lease
// until, $2 owner, $3 ids.
const postgresExtend = `UPDATE switchboard_items i SET lease_until = $1
WHERE i.id = ANY(ARRAY(
    SELECT l.id FROM switchboard_items l, (SELECT unnest($3::bigint[]) AS id, 'running'::text AS running OFFSET 0) x
    WHERE l.id = x.id AND l.id = ANY($3::bigint[]) AND l.state = x.running AND l.lease_owner = $2
    ORDER BY l.id
    FOR NO KEY UPDATE OF l))
  AND i.lease_owner = $2`

// postgresParked is the statement of the items parked on a key: an InitPlan locks them in
// ascending id (the lock order), then the update (SET %[1]s) finds them through the primary
// key; %[2]s is the key's placeholder. The lock tests the key again on each item's newest
// version (an item whose key changed since the statement's snapshot is left out), and the
// items it locked cannot change before the update: the update needs no test of its own (one
// would let the planner read the key's items through the parked index and search the array
// for each).
const postgresParked = `UPDATE switchboard_items SET %[1]s
WHERE id = ANY(ARRAY(
        SELECT p.id FROM switchboard_items p
        WHERE p.parked_key = %[2]s
        ORDER BY p.id
        FOR NO KEY UPDATE))`

// postgresSweep returns expired leases to pending. s locks them (a lease extended or completed
// meanwhile fails the re-check on its newest version and is skipped); the update finds them by
// primary key; the attempt rows come from s, whose rows are exactly the updated ones. The item
// runs alone next; the lost attempt counts only if it ran alone; the concurrency slot the lease
// held (held_key) is freed. Placeholder: $1 now.
const postgresSweep = `WITH s AS (
    SELECT id, attempts, lease_owner, claimed_at FROM switchboard_items
    WHERE state = 'running' AND lease_until < $1
    FOR UPDATE SKIP LOCKED
), u AS (
    UPDATE switchboard_items i
    SET state = 'pending', next_at = $1, lease_owner = NULL, lease_until = NULL, held_key = NULL, updated_at = $1,
        last_error = '` + LeaseExpired + `', isolate = 1, unattributed = i.unattributed + 1 - i.alone, alone = 0
    WHERE i.id = ANY(ARRAY(SELECT id FROM s))
    RETURNING i.id
), a AS (
    INSERT INTO switchboard_attempts (item_id, attempt, instance, started_at, ended_at, outcome, error)
    SELECT s.id, s.attempts, COALESCE(s.lease_owner, ''), COALESCE(s.claimed_at, 0), $1, 'abandoned', '` + LeaseExpired + `'
    FROM s
)
SELECT COUNT(*) FROM u`

func newPostgres() *postgresEngine {
	e := &postgresEngine{completeMany: postgresComplete, extendStmt: postgresExtend, sweepStmt: postgresSweep}
	e.completeManyRows = successRows(e.completeMany)
	e.st = statements{
		insert:        e.rebind(insertSQL),
		debounce:      e.rebind(fmt.Sprintf(debounceSQL, "LEAST")),
		byDedupe:      e.rebind(byDedupeSQL),
		release:       e.rebind(releaseSQL),
		byToken:       e.rebind(byTokenSQL),
		itemByToken:   e.rebind(itemByTokenSQL),
		claim:         postgresFairClaim,
		claimIsolated: postgresClaim(1),
		isolatedDue:   e.rebind(isolatedDueSQL),
		unpark:        fmt.Sprintf(postgresParked, `next_at = LEAST(next_at, $1), parked_key = NULL`, "$2"),
		repark: fmt.Sprintf(postgresParked,
			`next_at = LEAST($1::bigint + floor(random() * ($2::bigint + 1))::bigint, COALESCE(deadline, $1::bigint + $2::bigint))`, "$3"),
		oldestDue: e.rebind(oldestDueSQL),
		cancel:    postgresCancel,
	}
	e.insertNotify = "WITH i AS (" + e.st.insert + ")\nSELECT i.id FROM i, LATERAL (" + notifyTxSQL + ") n"
	return e
}

func (*postgresEngine) String() string       { return "postgres" }
func (e *postgresEngine) stmts() *statements { return &e.st }
func (*postgresEngine) transient(error) bool { return false }

func (e *postgresEngine) readOnly(err error) bool {
	return e.drv.ReadOnly != nil && e.drv.ReadOnly(err)
}

// notApplied: an error database/sql raised before sending the statement, or one the driver
// classifies as unapplied (see PostgresDriver.NotApplied).
func (e *postgresEngine) notApplied(err error) bool {
	return notSent(err) || e.drv.NotApplied(err)
}
func (*postgresEngine) appliedAt() string {
	return "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT"
}

// rebind turns ? placeholders into $1, $2, ….
func (*postgresEngine) rebind(q string) string {
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// migrationLockKey is the PostgreSQL advisory lock taken while migrating.
const migrationLockKey = 0x5357424451 // "SWBDQ"

// lockMigration takes a transaction advisory lock, so instances may migrate concurrently: held
// by the migration's transaction, not by the session, so that it also serialises them behind
// a pooler in transaction mode (which gives each transaction whichever server connection is
// free, where a session lock would stay with a connection no one unlocks).
func (*postgresEngine) lockMigration(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrationLockKey)); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	return nil
}

func (e *postgresEngine) claim(ctx context.Context, db *sql.DB, stmt string, args []any) ([]Claimed, error) {
	args, w := postgresClaimArgs(args)
	var claimed []Claimed
	err := e.indexed(ctx, db, []BatchQuery{{SQL: stmt, Args: args}},
		[]func(RowReader) error{func(rows RowReader) (err error) { claimed, err = readClaims(rows, args, w); return err }})
	return claimed, err
}

// indexPlans is the first statement of each round trip of the claim loop's statements (the
// claim, the completion, both at once) and of the leases' (their extension, the sweep): sequential scans are off until the round trip's
// implicit transaction ends (set_config's is_local), so every plan the server makes of them is
// an index's. The server keeps a generic plan of each statement per connection after a few
// runs; made while the statistics said the items' table was empty (a drained queue, analyzed
// by autovacuum after the drain's deletes), with scans allowed, it read the whole table for
// each claim and completion once a burst filled the table again, until the table's next
// analyze: a claim of 32 items beside 100,000 pending took 28 ms instead of half a
// millisecond (TestClaimAndCompleteKeepTheirIndexesAfterAnIdleSpell). Every statement of the
// loop finds its rows through an index at any size, so forbidding the scan costs nothing when
// the statistics are right. The generic plan is kept from the first run on (plan_cache_mode):
// with scans off and the cost of a scan no plan can avoid (of a small table without an index)
// added to it, the server judged the generic plan of the completion dearer than the custom one
// of a batch of one item, and planned it anew on every run (0.55 ms each, 2,001 plans in 2,000
// runs; a one-worker drain at 0.6x). Forcing a new plan on each run instead (plan_cache_mode
// force_custom_plan on the queue's connections) cost the drain 40 % of its rate.
const indexPlans = `SELECT set_config('enable_seqscan', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true)`

// indexed sends queries as one batch after indexPlans, on a connection of db, reading the
// rows of queries[i] with read[i].
func (e *postgresEngine) indexed(ctx context.Context, db *sql.DB, queries []BatchQuery, read []func(RowReader) error) error {
	return e.batchAfter(ctx, db, indexPlans, queries, read)
}

// batchAfter sends first, then queries, as one batch on a connection of db, reading the rows
// of queries[i] with read[i]: first sets how the batch's statements are planned (indexPlans,
// customPlans) until its implicit transaction ends.
func (e *postgresEngine) batchAfter(ctx context.Context, db *sql.DB, first string, queries []BatchQuery, read []func(RowReader) error) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return e.drv.SendBatch(ctx, conn, append([]BatchQuery{{SQL: first}}, queries...),
		append([]func(RowReader) error{drain}, read...))
}

// oneRow reads a statement's first row into dest: sql.ErrNoRows when it returns none.
func oneRow(dest ...any) func(RowReader) error {
	return firstRow(func(r rowScanner) error { return r.Scan(dest...) })
}

// firstRow reads a statement's first row with scan: sql.ErrNoRows when it returns none.
func firstRow(scan func(rowScanner) error) func(RowReader) error {
	return func(rows RowReader) error {
		if !rows.Next() {
			if err := rows.Err(); err != nil {
				return err
			}
			return sql.ErrNoRows
		}
		return scan(rows)
	}
}

// indexedRow is db.QueryRowContext(ctx, stmt, args...).Scan(dest...) after indexPlans, in one
// batch (sql.ErrNoRows when stmt returns no row): the Engine's for the statements that run on a
// timer and find their rows through an index.
func (e *postgresEngine) indexedRow(ctx context.Context, db *sql.DB, stmt string, args []any, dest ...any) error {
	return e.indexed(ctx, db, []BatchQuery{{SQL: stmt, Args: args}}, []func(RowReader) error{oneRow(dest...)})
}

// customPlans is the first statement of the batches (and transactions) of the statements the
// store runs now and then, on a timer or for an operator (unparks, the limits' upkeep and
// listing, a slot's acquisition, the pruner's batches): the server plans each run anew, on the
// tables as they are, until the batch's implicit transaction ends. With the plan it keeps per
// connection after a few runs, made while the items' table was empty (a drained queue, its
// statistics then analyzed), each of them read the whole table, or a whole index of it, once
// a burst filled it, until its next analyze (TestIndexPlans, "empty"); with scans off the
// planner read whole indexes instead, its estimates of an empty table making every way in
// look alike. A plan of one of these costs a fraction of a millisecond; they do not run per
// round trip, as the claim loop's statements do (indexPlans), where a plan per run cost the
// drain 40 %.
const customPlans = `SELECT set_config('plan_cache_mode', 'force_custom_plan', true)`

// customPlansInTx is customPlans in an application's transaction, where the setting is the
// application's: it also returns what the setting was, read before it is changed (the
// subquery, kept apart by its OFFSET, is evaluated first), for replannedInTx to put back.
const customPlansInTx = `SELECT s.was, set_config('plan_cache_mode', 'force_custom_plan', true)
FROM (SELECT current_setting('plan_cache_mode') AS was OFFSET 0) s`

// replannedInTx runs customPlansInTx, then run, then puts the transaction's setting back: an
// application's connection keeps its plans as the store's pool does, and the enqueue's
// conflict lookups of an outbox (EnqueueTx) planned on a drained, analyzed table read every
// item once a burst filled it (TestEnqueueTxLookupsKeepTheirIndexesAfterAnIdleSpell). Two
// statements more than the lookup itself, only when an enqueue conflicts.
func (e *postgresEngine) replannedInTx(ctx context.Context, tx querier, run func() error) error {
	var was, set string
	if err := tx.QueryRowContext(ctx, customPlansInTx).Scan(&was, &set); err != nil {
		return err
	}
	err := run()
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err // the transaction cannot go on: its setting ends with it
	}
	if _, rerr := tx.ExecContext(ctx, `SELECT set_config('plan_cache_mode', $1, true)`, was); rerr != nil {
		return rerr
	}
	return err
}

// replannedRows runs stmt after customPlans in one batch and hands its rows to read.
func (e *postgresEngine) replannedRows(ctx context.Context, db *sql.DB, stmt string, args []any, read func(RowReader) error) error {
	return e.batchAfter(ctx, db, customPlans, []BatchQuery{{SQL: stmt, Args: args}}, []func(RowReader) error{read})
}

// replannedCount runs stmt, a statement that writes rows, as replannedRows does and returns
// how many rows it wrote (counted from a RETURNING it is given).
func (e *postgresEngine) replannedCount(ctx context.Context, db *sql.DB, stmt string, args []any) (int, error) {
	n := 0
	err := e.replannedRows(ctx, db, stmt+"\nRETURNING 1", args, func(rows RowReader) error {
		for rows.Next() {
			n++
		}
		return rows.Err()
	})
	return n, err
}

// postgresClaimArgs returns the statement arguments of a claim with args (claimArgs, and the
// fair claim's window, whose start and size are its $8 and $9) and the window.
func postgresClaimArgs(args []any) ([]any, *fairWindow) {
	args, w := fairArgs(args)
	if w == nil {
		return args, nil
	}
	return append(args, nullString(w.after), fairKeyWindow), w
}

func (e *postgresEngine) complete(ctx context.Context, db *sql.DB, cs []Completion, accepted map[Fence]bool) error {
	return e.indexed(ctx, db, []BatchQuery{{SQL: e.completion(cs), Args: completionArrays(cs)}},
		[]func(RowReader) error{func(rows RowReader) error { return readFences(rows, accepted) }})
}

// completeAndClaim sends the completion and the claim as one batch (after indexPlans): one
// round trip, and (before the batch's single Sync) one implicit transaction.
func (e *postgresEngine) completeAndClaim(ctx context.Context, db *sql.DB, cs []Completion, claimArgs []any, accepted map[Fence]bool) ([]Claimed, error) {
	var claimed []Claimed
	claimArgs, w := postgresClaimArgs(claimArgs)
	err := e.indexed(ctx, db,
		[]BatchQuery{{SQL: e.completion(cs), Args: completionArrays(cs)}, {SQL: e.st.claim, Args: claimArgs}},
		[]func(RowReader) error{
			func(rows RowReader) error { return readFences(rows, accepted) },
			func(rows RowReader) (err error) { claimed, err = readClaims(rows, claimArgs, w); return err },
		})
	return claimed, err
}

// readFences reads the fences a completion accepted.
func readFences(rows RowReader, accepted map[Fence]bool) error {
	var (
		f    Fence
		id   int64
		dest = []any{&id, &f.Owner, &f.Attempt} // once for all rows, not per row
	)
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		f.ItemID = ItemID(id)
		accepted[f] = true
	}
	return rows.Err()
}

// completionArrays are the arguments of the completion: one array per column, each in
// PostgreSQL's text form of an array ({…}), which the statement casts. A batch then costs one
// string per column; binary arrays cost an encoded value per element.
func completionArrays(cs []Completion) []any {
	var buf []byte
	ints := func(at func(c *Completion) int64) string {
		buf = append(buf[:0], '{')
		for i := range cs {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = strconv.AppendInt(buf, at(&cs[i]), 10)
		}
		return string(append(buf, '}'))
	}
	texts := func(at func(c *Completion) string) string {
		buf = append(buf[:0], '{')
		for i := range cs {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendArrayText(buf, at(&cs[i]))
		}
		return string(append(buf, '}'))
	}
	return []any{
		ints(func(c *Completion) int64 { return int64(c.Fence.ItemID) }),
		ints(func(c *Completion) int64 { return int64(c.Fence.Attempt) }),
		texts(func(c *Completion) string { return c.Fence.Owner }),
		texts(func(c *Completion) string { return string(c.State) }),
		ints(func(c *Completion) int64 { return micros(c.NextAt) }),
		ints(func(c *Completion) int64 { return int64(completionUndo(*c)) }),
		texts(func(c *Completion) string { return c.Error }),
		ints(func(c *Completion) int64 { return micros(c.StartedAt) }),
		ints(func(c *Completion) int64 { return micros(c.EndedAt) }),
		texts(func(c *Completion) string { return string(c.Outcome) }),
		texts(func(c *Completion) string { return c.ParkedKey }),
		texts(func(c *Completion) string { return string(c.Cause) }),
	}
}

// appendArrayText appends s as a quoted element of an array's text form: within double
// quotes, a backslash and a double quote are escaped by a backslash; nothing else is special.
func appendArrayText(buf []byte, s string) []byte {
	buf = append(buf, '"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			buf = append(buf, '\\')
		}
		buf = append(buf, s[i])
	}
	return append(buf, '"')
}

func (e *postgresEngine) extend(ctx context.Context, db *sql.DB, owner string, ids []ItemID, until time.Time) error {
	raw := make([]int64, len(ids))
	for i, id := range ids {
		raw[i] = int64(id)
	}
	return e.indexed(ctx, db, []BatchQuery{{SQL: e.extendStmt, Args: []any{micros(until), owner, raw}}}, []func(RowReader) error{drain})
}

func (e *postgresEngine) sweep(ctx context.Context, db *sql.DB, now time.Time) (int, error) {
	var n int
	err := e.indexedRow(ctx, db, e.sweepStmt, []any{micros(now)}, &n)
	return n, err
}

func (*postgresEngine) versionTableExists() string {
	return "SELECT CASE WHEN to_regclass('switchboard_schema_migrations') IS NULL THEN 0 ELSE 1 END"
}

func (*postgresEngine) syntax() Syntax { return PostgresSyntax }

// checkConnection: the search_path must name a schema that exists, and its first schema must be
// one: the server skips a missing schema and creates in the next, so a path whose first schema
// was never created would open the queue of another schema (public, often), and join its fleet.
func (*postgresEngine) checkConnection(ctx context.Context, db *sql.DB) error {
	var (
		schema sql.NullString
		path   string
		user   sql.NullString // the schema "$user" names, if it exists
	)
	if err := db.QueryRowContext(ctx, `SELECT current_schema(), current_setting('search_path'),
		(SELECT nspname FROM pg_namespace WHERE nspname = current_user)`).Scan(&schema, &path, &user); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	if !schema.Valid {
		return fmt.Errorf("the search_path (%s) names no existing schema: create the schema first, or fix the DSN's search_path", path)
	}
	if first, ok := firstSchema(path, user.String); ok && first != schema.String {
		return fmt.Errorf("the search_path (%s) names %q first, which does not exist (the queue would open in %q): create it first, or fix the DSN's search_path", path, first, schema.String)
	}
	return nil
}

// firstSchema returns the schema a search_path names first: its first entry, unquoted (folded to
// lower case when it was not quoted), skipping "$user" unless user (the schema of the role's
// name) exists. ok is false when the path names none.
func firstSchema(path, user string) (string, bool) {
	for _, entry := range splitSearchPath(path) {
		if entry == "$user" {
			if user == "" {
				continue
			}
			return user, true
		}
		return entry, true
	}
	return "", false
}

// splitSearchPath splits a search_path into its schema names: comma-separated identifiers, each
// double-quoted (a doubled quote within stands for one) or folded to lower case.
func splitSearchPath(path string) []string {
	var (
		out     []string
		b       strings.Builder
		quoted  bool // inside double quotes
		seen    bool // the entry has a character
		literal bool // the entry was quoted
	)
	flush := func() {
		if seen {
			name := b.String()
			if !literal {
				name = strings.ToLower(name)
			}
			out = append(out, name)
		}
		b.Reset()
		seen, literal = false, false
	}
	for i := 0; i < len(path); i++ {
		c := path[i]
		switch {
		case quoted && c == '"' && i+1 < len(path) && path[i+1] == '"':
			b.WriteByte('"')
			i++
		case c == '"':
			quoted, literal, seen = !quoted, true, true
		case !quoted && c == ',':
			flush()
		case !quoted && (c == ' ' || c == '\t' || c == '\n'):
		default:
			b.WriteByte(c)
			seen = true
		}
	}
	flush()
	return out
}
