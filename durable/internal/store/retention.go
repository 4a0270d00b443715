package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-go/switchboard/durable/driver"
)

// PruneBatch is the most items one prune statement (one transaction) deletes (driver.PruneBatch).
const PruneBatch = driver.PruneBatch

// pruneLockSQL takes the transaction-level advisory lock of pruning this schema's tables, or
// answers false at once when another transaction holds it. Advisory locks are database-wide, so
// the key combines a constant ("SWBP") with the oid of this schema's items table: queues in
// other schemas of the same database prune on their own.
const pruneLockSQL = `SELECT pg_try_advisory_xact_lock((1398227536::bigint << 32) | 'switchboard_items'::regclass::oid::bigint)`

// prunable is, beside the age, what an item pruned must be: succeeded, and not holding its
// dedupe key (its window, unique_for, ended by now: placeholder $3).
const prunable = `state = 'succeeded' AND updated_at < $1
          AND (unique_for IS NULL OR unique_released_at IS NOT NULL OR updated_at + unique_for <= $3)`

// postgresPrune deletes up to $2 succeeded items last updated before $1, oldest first, with
// their attempt rows, leaving those that still hold their dedupe key at $3 (now): from the
// finished items' table, and from the claim's table the items that held their key when they
// succeeded (and those finished before migration 0029 that MoveFinished has not moved yet).
// The ids are collected once (an InitPlan through each table's succeeded index, the finished
// table's first) and the deletes find their rows through an index from them. Placeholders: $1 before, $2 limit,
// $3 now.
const postgresPrune = `WITH fd AS MATERIALIZED (
    SELECT ARRAY(
        SELECT id FROM switchboard_finished_items
        WHERE ` + prunable + `
        ORDER BY updated_at
        LIMIT $2
        FOR UPDATE SKIP LOCKED) AS ids
), ld AS MATERIALIZED (
    SELECT ARRAY(
        SELECT id FROM switchboard_items
        WHERE ` + prunable + `
        ORDER BY updated_at
        LIMIT $2 - cardinality((SELECT ids FROM fd))
        FOR UPDATE SKIP LOCKED) AS ids
), d AS MATERIALIZED (
    SELECT (SELECT ids FROM fd) || (SELECT ids FROM ld) AS ids
), a AS (
    DELETE FROM switchboard_attempts WHERE item_id = ANY((SELECT ids FROM d)::bigint[])
), f AS (
    DELETE FROM switchboard_finished_items WHERE id = ANY((SELECT ids FROM d)::bigint[]) AND state = 'succeeded'
    RETURNING id
), i AS (
    DELETE FROM switchboard_items WHERE id = ANY((SELECT ids FROM d)::bigint[]) AND state = 'succeeded'
    RETURNING id
)
SELECT (SELECT COUNT(*) FROM f) + (SELECT COUNT(*) FROM i)`

// sqlitePruneSelect lists the ids of one batch. Placeholders (SQLite's numbered ?NNN, for the
// $NNN of prunable): ?1 before, ?2 limit, ?3 now.
var sqlitePruneSelect = strings.ReplaceAll(`SELECT id FROM switchboard_items INDEXED BY switchboard_items_succeeded
	WHERE `+prunable+` ORDER BY updated_at LIMIT $2`, "$", "?")

// Prune deletes the succeeded items last updated before before, with their attempt rows, at
// most PruneBatch of them in one transaction, and returns how many it deleted. Items in any
// other state are never deleted, nor a succeeded item that holds its dedupe key at now (its
// UniqueFor has not passed since it succeeded): it is deleted once it has. On PostgreSQL the
// transaction first tries the advisory lock of pruning; when another instance holds it, Prune
// deletes nothing and reports busy (that instance is pruning: this one skips its pass). Call
// it again while it returns PruneBatch.
func (s *Store) Prune(ctx context.Context, before, now time.Time) (n int, busy bool, err error) {
	err = inTx(ctx, s.db, func(tx *sql.Tx) error {
		n, busy, err = s.e.prune(ctx, tx, before, now)
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("durable: prune: %w", err)
	}
	return n, busy, nil
}

// prune tries the advisory lock of pruning and, holding it, deletes one batch.
func (*postgresEngine) prune(ctx context.Context, tx *sql.Tx, before, now time.Time) (n int, busy bool, err error) {
	if locked, err := pruneTurn(ctx, tx); err != nil || !locked {
		return 0, err == nil, err
	}
	err = tx.QueryRowContext(ctx, postgresPrune, micros(before), PruneBatch, micros(now)).Scan(&n)
	return n, false, err
}

// pruneTurn tries the advisory lock of pruning in tx (pruneLockSQL): false when another
// instance holds it. Holding it, it has the transaction's statements planned at each run
// (customPlans): the pruner's batches find their rows through the finished items', the
// attempts' and the states' indexes, whatever plan an idle spell left on the connection.
func pruneTurn(ctx context.Context, tx *sql.Tx) (locked bool, err error) {
	if err = tx.QueryRowContext(ctx, pruneLockSQL).Scan(&locked); err != nil || !locked {
		return locked, err
	}
	_, err = tx.ExecContext(ctx, customPlans)
	return locked, err
}

// prune deletes one batch; the transaction itself holds the database's one writer.
func (*sqliteEngine) prune(ctx context.Context, tx *sql.Tx, before, now time.Time) (int, bool, error) {
	rows, err := tx.QueryContext(ctx, sqlitePruneSelect, micros(before), PruneBatch, micros(now))
	if err != nil {
		return 0, false, err
	}
	var ids []any
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, false, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(ids) == 0 {
		return 0, false, err
	}
	in := "(?" + strings.Repeat(", ?", len(ids)-1) + ")"
	if _, err := tx.ExecContext(ctx, "DELETE FROM switchboard_attempts WHERE item_id IN "+in, ids...); err != nil {
		return 0, false, err
	}
	res, err := tx.ExecContext(ctx, "DELETE FROM switchboard_items WHERE state = 'succeeded' AND id IN "+in, ids...)
	if err != nil {
		return 0, false, err
	}
	deleted, err := res.RowsAffected()
	return int(deleted), false, err
}
