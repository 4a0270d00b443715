-- Uniqueness windows (durable.WithUniqueFor, durable.WithUniqueWindow): a dedupe key held after
-- its item succeeded, not only while it is pending or running.
--   unique_for:         how long (microseconds) the item holds its dedupe key after it
--                       succeeded: until updated_at (its completion) plus unique_for. NULL: not
--                       after it ends.
--   unique_released_at: when an enqueue of the key, made once the window had ended, took the
--                       key over (microseconds since the Unix epoch). NULL while the item holds
--                       the key, or never held it past its end.
ALTER TABLE switchboard_items ADD COLUMN unique_for BIGINT;
ALTER TABLE switchboard_items ADD COLUMN unique_released_at BIGINT;
-- The key's holder is the pending or running item with it, or the succeeded item whose window
-- has not been taken over: at most one. An index predicate cannot read the clock, so a window
-- that ended still holds the key until the next enqueue of the key releases it (setting
-- unique_released_at) or the pruner deletes the item. A dead (or cancelled) item holds nothing.
DROP INDEX switchboard_items_dedupe;
CREATE UNIQUE INDEX switchboard_items_dedupe ON switchboard_items (dedupe_key)
    WHERE dedupe_key IS NOT NULL
      AND (state IN ('pending', 'running') OR (state = 'succeeded' AND unique_for IS NOT NULL AND unique_released_at IS NULL));
