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
