package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// Finished items leave the claim's table on PostgreSQL (migration 0029): the statement that
// finishes an item moves its row from switchboard_items to switchboard_finished_items, so the
// claim's table and its indexes hold the live items only, however many finished items are
// kept. The readers of items in any state read allItems, the two tables as one. On SQLite the
// view is the one table: an item is finished in place there (the migration says why).

// allItems is the view of every item, live and finished: the table the readers of an item by
// its id, token or reference, and of the listings and counts, read.
const allItems = "switchboard_items_all"

// finishedColumns are the columns of switchboard_finished_items, which are those of
// switchboard_items, in their order.
const finishedColumns = "id, name, payload, state, attempts, dedupe_key, ordering_key, next_at, lease_owner, lease_until, claimed_at, " +
	"last_error, created_at, updated_at, interruptions, isolate, alone, unattributed, parked_key, metadata, token, guard_key, " +
	"deadline, unique_for, unique_released_at, held_key, deferred, debounce_key, debounce_until, debounces, fair_key, priority, " +
	"head_start, success_id, success_instance, success_started_at, success_ended_at, reference"

// finishedFrom is finishedColumns as the select list of an insert into the finished table from
// rows of the claim's table, with the columns of set given the expressions set maps them to.
func finishedFrom(set map[string]string) string {
	cols := strings.Split(finishedColumns, ", ")
	for i, c := range cols {
		if e, ok := set[c]; ok {
			cols[i] = e
		}
	}
	return strings.Join(cols, ", ")
}

// postgresCancel cancels a pending item, moving it out of the claim's table. Placeholders:
// updated at, id.
var postgresCancel = `WITH m AS (
    DELETE FROM switchboard_items WHERE id = $2 AND state = 'pending' RETURNING *
)
INSERT INTO switchboard_finished_items (` + finishedColumns + `)
SELECT ` + finishedFrom(map[string]string{"state": "'cancelled'", "parked_key": "NULL", "updated_at": "$1"}) + ` FROM m`

// sqliteCancel cancels a pending item, in place. Placeholders: updated at, id.
const sqliteCancel = `UPDATE switchboard_items SET state = 'cancelled', parked_key = NULL, updated_at = ? WHERE id = ? AND state = 'pending'`

// postgresMoveFinished moves up to $1 items that finished in the claim's table (before
// migration 0029, or by an instance of a version before it) to the finished items' table: the
// succeeded ones first, then the dead, then the cancelled; a succeeded item holding its dedupe
// key stays. Each state is looked up by itself, through its partial index: the three states at
// once (state IN (...)) match none of those indexes' predicates, and each pass read the whole
// claim's table, its backlog with it (TestMoveFinishedReadsOnlyFinishedItems). Placeholder: $1
// limit.
const postgresMoveFinished = `WITH m AS (
    DELETE FROM switchboard_items WHERE id IN (
        SELECT id FROM (
            SELECT id FROM (SELECT id FROM switchboard_items
                WHERE state = 'succeeded'
                  AND NOT (unique_for IS NOT NULL AND dedupe_key IS NOT NULL AND unique_released_at IS NULL)
                LIMIT $1 FOR UPDATE SKIP LOCKED) s
            UNION ALL
            SELECT id FROM (SELECT id FROM switchboard_items WHERE state = 'dead' LIMIT $1 FOR UPDATE SKIP LOCKED) d
            UNION ALL
            SELECT id FROM (SELECT id FROM switchboard_items WHERE state = 'cancelled' LIMIT $1 FOR UPDATE SKIP LOCKED) c
        ) f
        LIMIT $1)
    RETURNING *
)
INSERT INTO switchboard_finished_items (` + finishedColumns + `)
SELECT ` + finishedColumns + ` FROM m`

// MoveFinished moves one batch of at most PruneBatch items that finished in the claim's table
// to the finished items' table, in a transaction of its own, and returns how many it moved: on
// PostgreSQL, the items that finished before migration 0029 (which moves them as they finish),
// read meanwhile through the view of all items. Like Prune it first tries the advisory lock of
// pruning, and reports busy when another instance holds it. On SQLite, where items finish in
// place, it moves nothing.
func (s *Store) MoveFinished(ctx context.Context) (n int, busy bool, err error) {
	if s.e.String() != "postgres" {
		return 0, false, nil
	}
	err = inTx(ctx, s.db, func(tx *sql.Tx) error {
		locked, err := pruneTurn(ctx, tx)
		if err != nil || !locked {
			busy = err == nil
			return err
		}
		res, err := tx.ExecContext(ctx, postgresMoveFinished, PruneBatch)
		if err != nil {
			return err
		}
		moved, err := res.RowsAffected()
		n = int(moved)
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("durable: move finished items: %w", err)
	}
	return n, busy, nil
}
