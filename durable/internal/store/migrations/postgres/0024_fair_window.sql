-- The fair claim visits a window of fairness keys, not all of them: with many keys that have
-- pending items but none due (endpoints whose items wait on an open breaker), walking every
-- key cost each claim an index descent or two per key (tens of milliseconds at ten thousand
-- keys). The claim now walks at most key_window keys, from the first key after after_key (the
-- key the previous claim of the same instance stopped at), and reports where the next should
-- start in the transaction's setting switchboard.fair_after (the claim's RETURNING reads it):
-- the last key walked, or '' when the walk reached the last key, so that the next claim starts
-- from the first again. The fill, as before, keeps the claim full from the due items of any
-- key. The function of migration 0023 stays, for instances not yet upgraded.
--
-- enable_sort is off while it runs: every step of it is served in order by the fairness index
-- (the keys in key order, a key's items in rank order), and a plan that sorts instead reads a
-- key's rows through another index and sorts them. The planner chose that when the table's
-- statistics were taken while nothing was pending (a drained queue, before a wave of work):
-- it then believes each partial index of pending items empty, the due index as cheap as the
-- fairness index, and each claim read the due items of every key for every key of its window
-- (a million index entries, seconds a claim, until the next ANALYZE). A sort it cannot avoid
-- (the turns' numbering) is still made.
CREATE FUNCTION switchboard_claim_ids(now_at BIGINT, claim_limit BIGINT, after_key TEXT, key_window INTEGER) RETURNS SETOF BIGINT
LANGUAGE plpgsql SET jit = off SET plan_cache_mode = force_generic_plan SET enable_sort = off AS $claim$
DECLARE
    first_key   TEXT;
    last_key    TEXT;
    start_key   TEXT;
    window_keys TEXT[];
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
        PERFORM set_config('switchboard.fair_after', '', true);
        RETURN;
    END IF;
    -- The window: the keys from the first after after_key (from the first key when there is
    -- none after it), at most key_window of them. The next claim starts after the last of
    -- them, or from the first key again when the walk reached the end.
    IF after_key IS NOT NULL THEN
        SELECT i.fair_key INTO start_key FROM switchboard_items i
        WHERE i.state = 'pending' AND i.isolate = 0 AND i.fair_key > after_key ORDER BY i.fair_key LIMIT 1;
    END IF;
    start_key := COALESCE(start_key, first_key);
    SELECT array_agg(w.key ORDER BY w.depth) INTO window_keys FROM (
        WITH RECURSIVE k(key, depth) AS (
            SELECT start_key, 1
            UNION ALL
            SELECT (SELECT i.fair_key FROM switchboard_items i
                    WHERE i.state = 'pending' AND i.isolate = 0 AND i.fair_key > k.key ORDER BY i.fair_key LIMIT 1),
                   k.depth + 1
            FROM k WHERE k.key IS NOT NULL AND k.depth < key_window
        )
        SELECT k.key, k.depth FROM k WHERE k.key IS NOT NULL) w;
    PERFORM set_config('switchboard.fair_after',
        CASE WHEN cardinality(window_keys) >= key_window THEN window_keys[cardinality(window_keys)] ELSE '' END, true);
    RETURN QUERY
        WITH k(key) AS (
            SELECT unnest(window_keys)
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
