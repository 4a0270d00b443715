-- Fair, prioritised claims.
--   fair_key:   the key the claim shares its turns by: the enqueue's or the registration's
--               fairness key, else the breaker key that guards the item, else its name.
--   priority:   0 (the default) to 9; higher runs sooner among items due together.
--   head_start: priority × the queue's PriorityAging, in microseconds: the claim orders the due
--               items of a key by next_at - head_start, as if the item had come due that much
--               earlier, so that a low priority item waits at most that long behind higher
--               priority work that came due after it.
ALTER TABLE switchboard_items ADD COLUMN fair_key TEXT NOT NULL DEFAULT '';
ALTER TABLE switchboard_items ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE switchboard_items ADD COLUMN head_start BIGINT NOT NULL DEFAULT 0;
-- Items waiting when the columns came: their guard's key, or their name.
UPDATE switchboard_items SET fair_key = COALESCE(NULLIF(guard_key, ''), name) WHERE state IN ('pending', 'running', 'dead');
-- The claim's way in: the distinct keys of pending items, one index descent each, and each
-- key's due items in claim order. The predicate holds only for statements that name fair_key,
-- so that no other statement on pending items takes this index for its own.
CREATE INDEX switchboard_items_fair ON switchboard_items (fair_key, (next_at - head_start), id) WHERE state = 'pending' AND isolate = 0 AND fair_key IS NOT NULL;

-- The fair claim's choice of items (durable/internal/store/fairclaim.go explains it): the ids of
-- the due items it takes, each locked FOR UPDATE SKIP LOCKED by this transaction; the claim's
-- UPDATE then finds them through the primary key. A function so that its plan is cached by the
-- server connection, also behind a pooler in transaction mode, where no statement is prepared:
-- planned on every execution the claim cost several times its run. jit is off while it runs:
-- the planner's estimate of its per-key share, which it cannot fold, grows with the table, and
-- past jit_above_cost every execution would be compiled anew.
CREATE FUNCTION switchboard_claim_ids(now_at BIGINT, claim_limit BIGINT) RETURNS SETOF BIGINT
LANGUAGE plpgsql SET jit = off SET plan_cache_mode = force_generic_plan AS $claim$
DECLARE
    first_key TEXT;
    last_key  TEXT;
BEGIN
    -- One key (a queue of one request type, a backlog of one endpoint): its items in rank order,
    -- without the turns' work, which cost several times the claim itself.
    SELECT i.fair_key INTO first_key FROM switchboard_items i
    WHERE i.state = 'pending' AND i.isolate = 0 AND i.fair_key >= '' ORDER BY i.fair_key LIMIT 1;
    IF first_key IS NULL THEN
        RETURN;
    END IF;
    SELECT i.fair_key INTO last_key FROM switchboard_items i
    WHERE i.state = 'pending' AND i.isolate = 0 AND i.fair_key >= '' ORDER BY i.fair_key DESC LIMIT 1;
    IF first_key = last_key THEN
        RETURN QUERY
            SELECT i.id FROM switchboard_items i
            WHERE i.state = 'pending' AND i.isolate = 0 AND i.fair_key = first_key
              AND i.next_at - i.head_start <= now_at AND i.next_at <= now_at
              AND (i.ordering_key IS NULL OR NOT EXISTS (
                      SELECT 1 FROM switchboard_items o
                      WHERE o.ordering_key = i.ordering_key AND o.state IN ('pending', 'running') AND o.id < i.id))
              AND (i.debounce_key IS NULL OR NOT EXISTS (
                      SELECT 1 FROM switchboard_items d
                      WHERE d.name = i.name AND d.debounce_key = i.debounce_key AND d.state IN ('pending', 'running') AND d.id < i.id))
              AND i.name NOT IN (
                      SELECT p.target FROM switchboard_pauses p
                      WHERE p.kind = 'name' AND (p.until IS NULL OR p.until > now_at))
            ORDER BY i.next_at - i.head_start, i.id
            LIMIT claim_limit
            FOR UPDATE OF i SKIP LOCKED;
        RETURN;
    END IF;
    RETURN QUERY
        WITH RECURSIVE k(key) AS (
            (SELECT i.fair_key FROM switchboard_items i
             WHERE i.state = 'pending' AND i.isolate = 0 AND i.fair_key >= '' ORDER BY i.fair_key LIMIT 1)
            UNION ALL
            SELECT (SELECT i.fair_key FROM switchboard_items i
                    WHERE i.state = 'pending' AND i.isolate = 0 AND i.fair_key > k.key ORDER BY i.fair_key LIMIT 1)
            FROM k WHERE k.key IS NOT NULL
        ), due AS MATERIALIZED (
            SELECT k.key FROM k CROSS JOIN LATERAL (
                SELECT 1 FROM switchboard_items i
                WHERE i.state = 'pending' AND i.isolate = 0 AND i.fair_key = k.key
                  AND i.next_at - i.head_start <= now_at AND i.next_at <= now_at
                  AND i.name NOT IN (
                          SELECT p.target FROM switchboard_pauses p
                          WHERE p.kind = 'name' AND (p.until IS NULL OR p.until > now_at))
                ORDER BY i.next_at - i.head_start
                LIMIT 1) d
            WHERE k.key IS NOT NULL
        ), n AS (
            SELECT GREATEST(COUNT(*), 1) AS keys FROM due
        ), turns AS MATERIALIZED (
            SELECT c.id, c.rank, row_number() OVER (PARTITION BY due.key ORDER BY c.rank, c.id) AS turn
            FROM due CROSS JOIN LATERAL (
                SELECT i.id, i.next_at - i.head_start AS rank FROM switchboard_items i
                WHERE i.state = 'pending' AND i.isolate = 0 AND i.fair_key = due.key
                  AND i.next_at - i.head_start <= now_at AND i.next_at <= now_at
                  AND (i.ordering_key IS NULL OR NOT EXISTS (
                          SELECT 1 FROM switchboard_items o
                          WHERE o.ordering_key = i.ordering_key AND o.state IN ('pending', 'running') AND o.id < i.id))
                  AND (i.debounce_key IS NULL OR NOT EXISTS (
                          SELECT 1 FROM switchboard_items d
                          WHERE d.name = i.name AND d.debounce_key = i.debounce_key AND d.state IN ('pending', 'running') AND d.id < i.id))
                  AND i.name NOT IN (
                          SELECT p.target FROM switchboard_pauses p
                          WHERE p.kind = 'name' AND (p.until IS NULL OR p.until > now_at))
                ORDER BY i.next_at - i.head_start, i.id
                LIMIT (claim_limit + (SELECT n.keys FROM n) - 1) / (SELECT n.keys FROM n)
                FOR UPDATE OF i SKIP LOCKED) c
        ), taken AS MATERIALIZED (
            SELECT t.id FROM turns t ORDER BY t.turn, t.rank, t.id LIMIT claim_limit
        ), fill AS MATERIALIZED (
            SELECT i.id FROM switchboard_items i
            WHERE i.state = 'pending' AND i.isolate = 0 AND i.next_at <= now_at
              AND i.id <> ALL(ARRAY(SELECT t.id FROM turns t))
              AND (i.ordering_key IS NULL OR NOT EXISTS (
                      SELECT 1 FROM switchboard_items o
                      WHERE o.ordering_key = i.ordering_key AND o.state IN ('pending', 'running') AND o.id < i.id))
              AND (i.debounce_key IS NULL OR NOT EXISTS (
                      SELECT 1 FROM switchboard_items d
                      WHERE d.name = i.name AND d.debounce_key = i.debounce_key AND d.state IN ('pending', 'running') AND d.id < i.id))
              AND i.name NOT IN (
                      SELECT p.target FROM switchboard_pauses p
                      WHERE p.kind = 'name' AND (p.until IS NULL OR p.until > now_at))
            ORDER BY i.next_at, i.id
            LIMIT (SELECT claim_limit - COUNT(*) FROM taken)
            FOR UPDATE OF i SKIP LOCKED
        )
        SELECT taken.id FROM taken UNION ALL SELECT fill.id FROM fill;
END
$claim$;
