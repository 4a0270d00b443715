-- Debounced items (durable.WithDebounce): while an item of a request name and debounce key is
-- pending and was never claimed, an enqueue of the name and key updates it (payload,
-- metadata, due time) instead of inserting one more.
--   debounce_key:   the key; NULL: the item is not debounced.
--   debounce_until: the latest an update may make the item due: its first enqueue plus the
--                   enqueue's maximum delay (microseconds since the Unix epoch); NULL without
--                   a key.
--   debounces:      how many enqueues updated the item after the one that inserted it.
ALTER TABLE switchboard_items ADD COLUMN debounce_key TEXT;
ALTER TABLE switchboard_items ADD COLUMN debounce_until BIGINT;
ALTER TABLE switchboard_items ADD COLUMN debounces INTEGER NOT NULL DEFAULT 0;
-- The item an enqueue of the key updates: pending and never claimed. Once a claim took it
-- (claimed_at is set and never cleared), whether it runs, waits for a retry or was put back
-- unattempted, it takes no more updates, and the next enqueue of the key inserts a new item:
-- an update it had taken after its handler read the payload would be lost. At most one such
-- item per name and key; the enqueue's ON CONFLICT names this index.
CREATE UNIQUE INDEX switchboard_items_debounce ON switchboard_items (name, debounce_key)
    WHERE debounce_key IS NOT NULL AND state = 'pending' AND claimed_at IS NULL;
-- The claim takes a debounced item only when no earlier item of its name and key is pending or
-- running, so the updates of one key are delivered in the order they were made.
CREATE INDEX switchboard_items_debounce_order ON switchboard_items (name, debounce_key, id)
    WHERE debounce_key IS NOT NULL AND state IN ('pending', 'running');
