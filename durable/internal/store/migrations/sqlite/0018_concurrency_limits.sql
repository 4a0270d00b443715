-- Concurrency limits (durable.Queue.SetConcurrencyLimit): at most max_running items of a
-- breaker key run at once across every instance sharing the database. One row per limited
-- key; RemoveConcurrencyLimit deletes it (the audit log keeps the history).
--   key:         the breaker key (WithBreakerKey's, or a breaker key function's).
--   max_running: how many items of the key may run at once, at least 1.
--   actor:       who set the limit.
--   reason:      why, as the operator said; NULL if they did not.
--   created_at:  when it was set (or last changed), microseconds since the Unix epoch.
CREATE TABLE switchboard_concurrency_limits (
    key         TEXT    NOT NULL PRIMARY KEY,
    max_running INTEGER NOT NULL CHECK (max_running >= 1),
    actor       TEXT    NOT NULL,
    reason      TEXT,
    created_at  BIGINT  NOT NULL
);
-- held_key: the limited key whose slot a running item holds. The scheduler sets it, under the
-- limit row's lock, only while fewer than max_running running items hold the key; every end
-- of the lease (a completion, the sweep of an expired lease) clears it, so a slot is the
-- running item itself and frees with its lease. NULL: the item holds no slot (nearly every
-- item), and the partial index below holds only the items that do.
ALTER TABLE switchboard_items ADD COLUMN held_key TEXT;
CREATE INDEX switchboard_items_held ON switchboard_items (held_key) WHERE held_key IS NOT NULL;
