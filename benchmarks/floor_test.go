package benchmarks

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The bare-SQL floor: no framework, only the switchboard scheduler's own claim and completion
// statements, issued the cheapest way the scheduler's design allows. One loop claims a batch of
// as many items as there are workers, runs them at once (one goroutine each, the item's payload
// decoded as any queue must), waits for all of them, then writes their completions and claims
// the next batch in one round trip (a pgx batch on PostgreSQL, one transaction on SQLite, as
// the scheduler's own completeAndClaim does), until a claim finds nothing. Every round trip is
// full, and nothing but the statements costs: what switchboard spends beyond it is the
// scheduler's own.
//
// The statements are copied from durable/internal/store (the benchmarks module cannot import
// an internal package): keep them in step with it.

// floorClaimColumns is store.claimColumns (durable/internal/store/store.go): what a claim returns.
const floorClaimColumns = "id, name, payload, attempts, interruptions, unattributed, isolate, parked_key, dedupe_key, ordering_key, next_at, last_error, created_at, metadata, token, guard_key, deadline, deferred, fair_key, priority"

// floorPostgresClaim is store.postgresFairClaim (durable/internal/store/fairclaim.go): the
// function switchboard_claim_ids of migration 0024 chooses and locks the items (each fairness
// key's due items in turn, then a fill oldest first). Placeholders: $1 owner, $2 lease until,
// $3 claimed at, $4 updated at, $5 alone, $6 now, $7 limit, $8 the key the window of keys
// starts after (NULL: from the first), $9 the window's size; the last column returned is where
// the next window starts.
const floorPostgresClaim = `UPDATE switchboard_items
SET state = 'running', lease_owner = $1, lease_until = $2, claimed_at = $3, updated_at = $4,
    attempts = attempts + 1, alone = $5
WHERE id = ANY(ARRAY(SELECT switchboard_claim_ids($6::bigint, $7::bigint, $8::text, $9::integer)))
RETURNING ` + floorClaimColumns + `, current_setting('switchboard.fair_after', true)`

// floorIndexPlans is store.indexPlans (durable/internal/store/postgres.go), the first
// statement of each of the store's claiming and completing round trips.
const floorIndexPlans = `SELECT set_config('enable_seqscan', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true)`

// floorPostgresComplete is store.postgresComplete (durable/internal/store/postgres.go).
const floorPostgresComplete = `WITH v AS MATERIALIZED (
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

// floorSQLitePausedName is store.pausedNameSQL with now's placeholder ?6: the items of a
// paused request name are not claimed.
const floorSQLitePausedName = `i.name NOT IN (
	        SELECT p.target FROM switchboard_pauses p
	        WHERE p.kind = 'name' AND (p.until IS NULL OR p.until > ?6))`

// floorSQLiteRunnable is what the SQLite claims ask of an item besides its key and due time:
// store.orderedFirstSQL (no earlier item of its ordering key pending or running),
// store.debounceOrderSQL (likewise of its debounce key) and floorSQLitePausedName.
const floorSQLiteRunnable = `(i.ordering_key IS NULL OR NOT EXISTS (
	        SELECT 1 FROM switchboard_items o
	        WHERE o.ordering_key = i.ordering_key AND o.state IN ('pending', 'running') AND o.id < i.id))
      AND (i.debounce_key IS NULL OR NOT EXISTS (
                SELECT 1 FROM switchboard_items d
                WHERE d.name = i.name AND d.debounce_key = i.debounce_key AND d.state IN ('pending', 'running') AND d.id < i.id))
      AND ` + floorSQLitePausedName

// floorSQLiteClaim is store.sqliteFairClaim (durable/internal/store/fairclaim.go, with
// pausedNameSQL, orderedFirstSQL and debounceOrderSQL in place). Placeholders as
// floorPostgresClaim's, numbered, to ?7; ?8 and ?9 the first and the last key of the window of
// keys (floorSQLiteWindow's).
const floorSQLiteClaim = `UPDATE switchboard_items
SET state = 'running', lease_owner = ?1, lease_until = ?2, claimed_at = ?3, updated_at = ?4,
    attempts = attempts + 1, alone = ?5
WHERE id IN (
    WITH RECURSIVE k(key) AS (
        SELECT ?8
        UNION ALL
        SELECT (SELECT MIN(i.fair_key) FROM switchboard_items i INDEXED BY switchboard_items_fair
                WHERE i.state = 'pending' AND i.isolate = 0 AND i.fair_key > k.key)
        FROM k WHERE k.key IS NOT NULL AND k.key < ?9
    ), due AS (
        SELECT k.key FROM k
        WHERE k.key IS NOT NULL AND EXISTS (
            SELECT 1 FROM switchboard_items i INDEXED BY switchboard_items_fair
            WHERE i.state = 'pending' AND i.isolate = 0 AND i.fair_key = k.key
              AND i.next_at - i.head_start <= ?6 AND i.next_at <= ?6 AND ` + floorSQLitePausedName + `)
    ), n AS (
        SELECT MAX(COUNT(*), 1) AS keys FROM due
    ), turns AS (
        SELECT x.id, x.next_at - x.head_start AS rank,
               row_number() OVER (PARTITION BY x.fair_key ORDER BY x.next_at - x.head_start, x.id) AS turn
        FROM due, switchboard_items x
        WHERE x.id IN (
            SELECT i.id FROM switchboard_items i INDEXED BY switchboard_items_fair
            WHERE i.state = 'pending' AND i.isolate = 0 AND i.fair_key = due.key
              AND i.next_at - i.head_start <= ?6 AND i.next_at <= ?6
              AND ` + floorSQLiteRunnable + `
            ORDER BY i.next_at - i.head_start, i.id
            LIMIT (SELECT (?7 + n.keys - 1) / n.keys FROM n))
    ), taken AS MATERIALIZED (
        SELECT t.id FROM turns t ORDER BY t.turn, t.rank, t.id LIMIT ?7
    )
    SELECT taken.id FROM taken
    UNION ALL
    SELECT fill.id FROM (
        SELECT i.id FROM switchboard_items i INDEXED BY switchboard_items_due
        WHERE i.state = 'pending' AND i.isolate = 0 AND i.next_at <= ?6
          AND i.id NOT IN (SELECT t.id FROM turns t)
          AND ` + floorSQLiteRunnable + `
        ORDER BY i.next_at, i.id
        LIMIT (SELECT ?7 - COUNT(*) FROM taken)) fill)
RETURNING ` + floorClaimColumns

// floorSQLiteWindow is store.sqliteFairWindow (durable/internal/store/fairclaim.go): the least
// and greatest fairness key of the pending items, and the window of keys the fair claim walks.
// Placeholders: ?1 the key the window starts after (NULL: from the first), ?2 its size.
const floorSQLiteWindow = `WITH RECURSIVE k(key, depth) AS (
    SELECT COALESCE(
        (SELECT MIN(i.fair_key) FROM switchboard_items i INDEXED BY switchboard_items_fair
         WHERE i.state = 'pending' AND i.isolate = 0 AND i.fair_key > ?1),
        (SELECT MIN(i.fair_key) FROM switchboard_items i INDEXED BY switchboard_items_fair
         WHERE i.state = 'pending' AND i.isolate = 0 AND i.fair_key >= '')), 1
    UNION ALL
    SELECT (SELECT MIN(i.fair_key) FROM switchboard_items i INDEXED BY switchboard_items_fair
            WHERE i.state = 'pending' AND i.isolate = 0 AND i.fair_key > k.key), k.depth + 1
    FROM k WHERE k.key IS NOT NULL AND k.depth < ?2
)
SELECT
    (SELECT MIN(i.fair_key) FROM switchboard_items i INDEXED BY switchboard_items_fair
     WHERE i.state = 'pending' AND i.isolate = 0 AND i.fair_key >= ''),
    (SELECT MAX(i.fair_key) FROM switchboard_items i INDEXED BY switchboard_items_fair
     WHERE i.state = 'pending' AND i.isolate = 0 AND i.fair_key >= ''),
    (SELECT k.key FROM k WHERE k.depth = 1),
    (SELECT k.key FROM k WHERE k.key IS NOT NULL ORDER BY k.depth DESC LIMIT 1),
    (SELECT COUNT(k.key) FROM k)`

// floorSQLiteOneKeyClaim is store.sqliteOneKeyClaim (durable/internal/store/fairclaim.go, with
// pausedNameSQL, orderedFirstSQL and debounceOrderSQL in place): the claim when every pending
// item has one fairness key, ?8. Placeholders as floorSQLiteClaim's to ?7.
const floorSQLiteOneKeyClaim = `UPDATE switchboard_items
SET state = 'running', lease_owner = ?1, lease_until = ?2, claimed_at = ?3, updated_at = ?4,
    attempts = attempts + 1, alone = ?5
WHERE id IN (
    SELECT i.id FROM switchboard_items i INDEXED BY switchboard_items_fair
    WHERE i.state = 'pending' AND i.isolate = 0 AND i.fair_key = ?8
      AND i.next_at - i.head_start <= ?6 AND i.next_at <= ?6
      AND ` + floorSQLiteRunnable + `
    ORDER BY i.next_at - i.head_start, i.id
    LIMIT ?7)
RETURNING ` + floorClaimColumns

// floorSQLiteComplete is sqliteCompleteOne (durable/internal/store/sqlite.go). Placeholders:
// state, next_at, undo, outcome (twice), error, parked key, updated at, the success's attempt
// id, instance, start and end, id, owner, attempt.
const floorSQLiteComplete = `UPDATE switchboard_items
	SET state = ?, next_at = ?, attempts = attempts - ?,
	    interruptions = interruptions + CASE WHEN ? = 'interrupted' THEN 1 ELSE 0 END,
	    isolate = CASE WHEN ? = '' THEN isolate ELSE 0 END,
	    last_error = COALESCE(NULLIF(?, ''), last_error), parked_key = ?, alone = 0,
	    lease_owner = NULL, lease_until = NULL, held_key = NULL, updated_at = ?,
	    success_id = COALESCE(?, success_id), success_instance = COALESCE(?, success_instance),
	    success_started_at = COALESCE(?, success_started_at), success_ended_at = COALESCE(?, success_ended_at)
	WHERE id = ? AND state = 'running' AND lease_owner = ? AND attempts = ?`

// floorReserveAttemptIDs is sqliteReserveAttemptIDs (durable/internal/store/sqlite.go): the
// ids of a batch's successes, recorded on their items.
const floorReserveAttemptIDs = `UPDATE sqlite_sequence SET seq = seq + ?1 WHERE name = 'switchboard_attempts' RETURNING seq`

// floorIDBlock is the store's attemptIDBlock (durable/internal/store/attemptids.go).
const floorIDBlock = 256

// floorFirstAttemptIDs is sqliteFirstAttemptIDs (durable/internal/store/sqlite.go).
const floorFirstAttemptIDs = `INSERT INTO sqlite_sequence (name, seq)
	SELECT 'switchboard_attempts', COALESCE(MAX(id), 0) + ?1 FROM switchboard_attempts RETURNING seq`

const (
	floorOwner = "floor"
	floorLease = 30 * time.Second // the scheduler's default lease
)

// floorItem is one claimed item and, once it ran, its attempt's times.
type floorItem struct {
	id         int64
	attempt    int32
	payload    []byte
	start, end int64 // µs since the epoch
}

// claimArgs are the claim's arguments (store.claimArgs): owner, lease until, claimed at,
// updated at, alone, now, limit.
func floorClaimArgs(limit int) []any {
	now := time.Now()
	us := now.UnixMicro()
	return []any{floorOwner, now.Add(floorLease).UnixMicro(), us, us, 0, us, limit}
}

// floorPostgresArgs are the arguments of floorPostgresClaim: its window of keys starts at the
// first key and is as wide as the store's.
func floorPostgresArgs(limit int) []any { return append(floorClaimArgs(limit), nil, 128) }

// floorArray is the text form of an array of one element per item of batch, as the store's
// completionArrays writes the completion's arguments.
func floorArray(batch []floorItem, elem func(it *floorItem) string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range batch {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(elem(&batch[i]))
	}
	b.WriteByte('}')
	return b.String()
}

// floorRun runs every item of batch at once and waits for them all.
func floorRun(ctx context.Context, d *drainDB, kind handlerKind, t *tally, batch []floorItem) error {
	var wg sync.WaitGroup
	errs := make([]error, len(batch))
	for i := range batch {
		wg.Go(func() {
			it := &batch[i]
			it.start = time.Now().UnixMicro()
			var args struct {
				N int64 `json:"n"`
			}
			if errs[i] = json.Unmarshal(it.payload, &args); errs[i] == nil {
				errs[i] = t.handle(ctx, d, kind, args.N)
			}
			it.end = time.Now().UnixMicro()
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// floorScan reads a claim's rows, of columns columns: the id, payload and attempt; the other
// columns go to skip (nil for pgx, which skips them; a throwaway destination for database/sql).
func floorScan(next func() bool, scan func(...any) error, err func() error, columns int, skip any) ([]floorItem, error) {
	var (
		out []floorItem
		it  floorItem
		dst = make([]any, columns)
	)
	for i := range dst {
		dst[i] = skip
	}
	dst[0], dst[2], dst[3] = &it.id, &it.payload, &it.attempt
	for next() {
		it = floorItem{}
		if e := scan(dst...); e != nil {
			return nil, e
		}
		out = append(out, it)
	}
	return out, err()
}

// floorPostgres drains d's switchboard items through pgx directly.
func floorPostgres(ctx context.Context, d *drainDB, kind handlerKind, workers int, t *tally) error {
	claim := func(rows pgx.Rows, err error) ([]floorItem, error) {
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		return floorScan(rows.Next, rows.Scan, rows.Err, 21, nil)
	}
	first := &pgx.Batch{}
	first.Queue(floorIndexPlans)
	first.Queue(floorPostgresClaim, floorPostgresArgs(workers)...)
	res := d.pgx.SendBatch(ctx, first)
	_, err := res.Exec()
	var batch []floorItem
	if err == nil {
		batch, err = claim(res.Query())
	}
	if cerr := res.Close(); err == nil {
		err = cerr
	}
	for err == nil && len(batch) > 0 {
		if err = floorRun(ctx, d, kind, t, batch); err != nil {
			break
		}
		n := len(batch)
		num := func(v func(it *floorItem) int64) string {
			return floorArray(batch, func(it *floorItem) string { return strconv.FormatInt(v(it), 10) })
		}
		text := func(s string) string { return floorArray(batch, func(*floorItem) string { return `"` + s + `"` }) }
		zero := num(func(*floorItem) int64 { return 0 })
		var b pgx.Batch
		b.Queue(floorIndexPlans)
		b.Queue(floorPostgresComplete, num(func(it *floorItem) int64 { return it.id }), num(func(it *floorItem) int64 { return int64(it.attempt) }),
			text(floorOwner), text("succeeded"), zero, zero, text(""), num(func(it *floorItem) int64 { return it.start }),
			num(func(it *floorItem) int64 { return it.end }), text("succeeded"), text(""), text(""))
		b.Queue(floorPostgresClaim, floorPostgresArgs(workers)...)
		res := d.pgx.SendBatch(ctx, &b)
		done := 0
		_, qerr := res.Exec()
		var rows pgx.Rows
		if qerr == nil {
			rows, qerr = res.Query()
		}
		if qerr == nil {
			for rows.Next() {
				done++
			}
			rows.Close()
			qerr = rows.Err()
		}
		if qerr == nil && done != n {
			qerr = fmt.Errorf("floor: %d of %d completions accepted", done, n)
		}
		if qerr == nil {
			batch, qerr = claim(res.Query())
		}
		if cerr := res.Close(); qerr == nil {
			qerr = cerr
		}
		err = qerr
	}
	return err
}

// floorSQLite drains d's switchboard items through database/sql on its one connection, with
// its statements prepared once, as the store prepares them once per pool (SQLite parses a
// statement at every prepare, and the claim's parse costs more than running it). A claim reads
// the window of fairness keys first and, with one key, claims that key's items alone, as the
// store's does.
func floorSQLite(ctx context.Context, d *drainDB, kind handlerKind, workers int, t *tally) error {
	var stmts [4]*sql.Stmt
	for i, q := range []string{floorSQLiteWindow, floorSQLiteOneKeyClaim, floorSQLiteClaim, floorSQLiteComplete} {
		st, err := d.sql.PrepareContext(ctx, q)
		if err != nil {
			return err
		}
		defer st.Close()
		stmts[i] = st
	}
	windowStmt, oneKeyStmt, claimStmt, completeStmt := stmts[0], stmts[1], stmts[2], stmts[3]
	claimTx := func(tx *sql.Tx) ([]floorItem, error) {
		var (
			first, last, from, to sql.NullString
			n                     int
		)
		if err := tx.StmtContext(ctx, windowStmt).QueryRowContext(ctx, nil, 128).Scan(&first, &last, &from, &to, &n); err != nil || !first.Valid {
			return nil, err
		}
		st, args := claimStmt, append(floorClaimArgs(workers), from.String, to.String)
		if first.String == last.String {
			st, args = oneKeyStmt, append(floorClaimArgs(workers), first.String)
		}
		rows, err := tx.StmtContext(ctx, st).QueryContext(ctx, args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var skip any
		return floorScan(rows.Next, rows.Scan, rows.Err, 20, &skip)
	}
	inTx := func(fn func(tx *sql.Tx) error) error {
		tx, err := d.sql.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := fn(tx); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	}
	var (
		batch []floorItem
		ids   struct{ next, end int64 } // attempt ids reserved and not used
	)
	err := inTx(func(tx *sql.Tx) (err error) { batch, err = claimTx(tx); return err })
	for err == nil && len(batch) > 0 {
		if err = floorRun(ctx, d, kind, t, batch); err != nil {
			break
		}
		err = inTx(func(tx *sql.Tx) error {
			upd := tx.StmtContext(ctx, completeStmt)
			// The successes' attempt ids, from a block reserved ahead as the store does (its
			// attemptIDs): one statement in floorIDBlock ids.
			if n := int64(len(batch)); ids.end-ids.next < n {
				var last int64
				err = tx.QueryRowContext(ctx, floorReserveAttemptIDs, n+floorIDBlock).Scan(&last)
				if errors.Is(err, sql.ErrNoRows) {
					err = tx.QueryRowContext(ctx, floorFirstAttemptIDs, n+floorIDBlock).Scan(&last)
				}
				if err != nil {
					return err
				}
				ids.next, ids.end = last-n-floorIDBlock+1, last+1
			}
			for _, it := range batch {
				id := ids.next
				ids.next++
				res, err := upd.ExecContext(ctx, "succeeded", 0, 0, "succeeded", "succeeded", "", nil, it.end, id, floorOwner, it.start, it.end,
					it.id, floorOwner, it.attempt)
				if err != nil {
					return err
				}
				if n, err := res.RowsAffected(); err != nil || n != 1 {
					return fmt.Errorf("floor: completion of item %d: %d rows, %v", it.id, n, err)
				}
			}
			batch, err = claimTx(tx)
			return err
		})
	}
	return err
}

var floorSystem = drainSystem{
	name: "floor",
	seed: seedSwitchboard,
	prepare: func(tb testing.TB, d *drainDB, kind handlerKind, workers int, t *tally) func() {
		return func() {
			run := floorSQLite
			if d.engine == "postgres" {
				run = floorPostgres
			}
			if err := run(context.Background(), d, kind, workers, t); err != nil {
				tb.Fatal(err)
			}
			if t.n.Load() != t.want {
				tb.Fatalf("floor: the queue ran dry after %d of %d items", t.n.Load(), t.want)
			}
		}
	},
	succeeded: counter("SELECT COUNT(*) FROM switchboard_items_all WHERE state = 'succeeded'"),
}
