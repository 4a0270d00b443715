package store

import "fmt"

// The claim takes due items fairly across their fairness keys (NewItem.FairnessKey) and by
// priority (NewItem.Priority, through HeadStart), in one statement:
//
//  1. keys: a window of the distinct fairness keys of the pending items, found by a loose
//     scan of switchboard_items_fair (one index descent per key, whatever the number of items
//     a key has): at most fairKeyWindow keys, from the first key after the one the previous
//     claim of the same Store stopped at (see fairWindow);
//  2. due: those of them with an item due now (one index probe each);
//  3. per key, its items in rank order (next_at - head_start, then id: the due time advanced by
//     the priority's head start), at most ceil(limit / due keys) of them;
//  4. the keys' turns: the first item of every key, then the second of every key, and so on;
//     within a turn, by rank. The first limit of them are claimed;
//  5. fill: when the keys had fewer due items than their turns (a key with one item due beside
//     a backlog), the rest of the claim is taken in due order, as the claim did before
//     fairness, so that the claim is as full as the due items allow.
//
// So a key with a backlog of a hundred thousand due items takes one turn in each claim like a
// key with one, and an item of higher priority goes before the items of its key that came due
// less than its head start before it; the aging bound of a low priority item is the head
// start of the highest priority over its own. The cost of a claim grows with the number of
// fairness keys that have pending items, up to the window, not with the number of items: a
// key is a remote endpoint, a tenant or a request type, not a call. Past the window, the keys
// take turns by windows: a key with due items is in the window of one claim in every
// ceil(keys / fairKeyWindow), and in the meantime the fill (5) takes its items in due order.
//
// The rank condition next_at - head_start <= now bounds each key's scan to its due items and
// the higher priority items due within their head start: a parked backlog, whose due time is
// in the future, is not read. The plain due condition next_at <= now then keeps only the due.
// Isolated items (isolate 1) are claimed one at a time, oldest first, by the claim of
// claimSelect; fairness does not apply to them.

// postgresFairClaim is the claim of items not isolated. The ids are chosen and locked by the
// function switchboard_claim_ids (when all pending items have one key, as in a queue of one
// request type, it takes that key's items in rank order without the turns, whose work cost
// several times the claim itself; otherwise the statement above) (migration 0024: the
// statement above, in PL/pgSQL, whose plan the server connection caches, so that a pooler in
// transaction mode, which prepares nothing, does not plan it on every claim; with JIT off while
// it runs), collected by an InitPlan,
// ARRAY(…), run once; the update finds them through the primary key (see postgresClaim).
// Each key's items are locked by its LATERAL subquery (FOR UPDATE SKIP LOCKED), as the plain
// claim locks its rows: every id in the array is locked by this transaction and was pending,
// due and of its key when locked, so concurrent claims take disjoint items
// (TestClaimConcurrentExactlyOnce); the fill locks its rows the same way. The keys' subqueries
// may lock fewer items than there are keys beyond the turns taken (the per-key bound is rounded
// up); those are left pending, unchanged, and free when the statement's transaction ends. The
// function's query runs with a snapshot of its own, taken after the update's: an item it locked
// that the update's snapshot does not see (enqueued in between) is not updated, and stays
// pending for the next claim. The function sets the transaction's switchboard.fair_after to
// where the next claim's window starts (see fairWindow), which every returned row carries as
// its last column: RETURNING runs after the InitPlan. Placeholders as postgresClaim's: $1
// owner, $2 lease until, $3 claimed at, $4 updated at, $5 alone, $6 now, $7 limit; and $8 the
// key the window starts after (NULL: from the first), $9 the window's size.
const postgresFairClaim = `UPDATE switchboard_items
SET state = 'running', lease_owner = $1, lease_until = $2, claimed_at = $3, updated_at = $4,
    attempts = attempts + 1, alone = $5
WHERE id = ANY(ARRAY(SELECT switchboard_claim_ids($6::bigint, $7::bigint, $8::text, $9::integer)))
RETURNING ` + claimColumns + `, current_setting('switchboard.fair_after', true)`

// sqliteFairClaim is the fair claim for SQLite (PostgreSQL's is the function
// switchboard_claim_ids of migration 0024, called by postgresFairClaim), whose one writer needs
// no row locks: the keys of the window from ?8 to ?9 (read by sqliteFairWindow in the same
// transaction) are walked one index descent each; a key's items are read by a correlated IN
// subquery, whose LIMIT may not name the outer row, so the per-key bound is read from n by a
// subquery of its own. INDEXED BY keeps the planner, which has no statistics, on the fairness
// index. Placeholders: ?1 owner, ?2 lease until, ?3 claimed at, ?4 updated at, ?5 alone, ?6
// now, ?7 limit, ?8 the window's first key, ?9 its last.
var sqliteFairClaim = fmt.Sprintf(`UPDATE switchboard_items
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
              AND i.next_at - i.head_start <= ?6 AND i.next_at <= ?6 AND %[1]s)
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
              AND %[2]s
              AND %[3]s
              AND %[1]s
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
          AND %[2]s
          AND %[3]s
          AND %[1]s
        ORDER BY i.next_at, i.id
        LIMIT (SELECT ?7 - COUNT(*) FROM taken)) fill)
RETURNING `+claimColumns, fmt.Sprintf(pausedNameSQL, "?6"), orderedFirstSQL, debounceOrderSQL)

// sqliteFairWindow reads, in one statement, the least and the greatest fairness key of the
// pending items (equal, there is one key, and the claim is sqliteOneKeyClaim's) and the fair
// claim's window of keys (see fairWindow): its first key, the first after ?1 (from the least
// key when ?1 is NULL or no key follows it), its last and how many keys it has (at most ?2).
// Each key is an index descent.
const sqliteFairWindow = `WITH RECURSIVE k(key, depth) AS (
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

// sqliteOneKeyClaim is the fair claim when every pending item has the fairness key ?8: that
// key's due items in rank order. Placeholders as sqliteFairClaim's, and ?8 the key.
var sqliteOneKeyClaim = fmt.Sprintf(`UPDATE switchboard_items
SET state = 'running', lease_owner = ?1, lease_until = ?2, claimed_at = ?3, updated_at = ?4,
    attempts = attempts + 1, alone = ?5
WHERE id IN (
    SELECT i.id FROM switchboard_items i INDEXED BY switchboard_items_fair
    WHERE i.state = 'pending' AND i.isolate = 0 AND i.fair_key = ?8
      AND i.next_at - i.head_start <= ?6 AND i.next_at <= ?6
      AND %[2]s
      AND %[3]s
      AND %[1]s
    ORDER BY i.next_at - i.head_start, i.id
    LIMIT ?7)
RETURNING `+claimColumns, fmt.Sprintf(pausedNameSQL, "?6"), orderedFirstSQL, debounceOrderSQL)
