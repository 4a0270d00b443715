-- Pauses (durable.Queue.Pause): what the schedulers of every instance hold back, kept in the
-- database so that a pause holds on every instance and across restarts. One row per paused
-- target; Resume deletes it (the audit log keeps the history).
--   kind:       'name' (items of one request name: the claim leaves them pending, untouched)
--               or 'breaker_key' (items whose breaker key is this: the scheduler parks them
--               on the key, no attempt counted).
--   target:     the request name or the breaker key.
--   until:      when the pause ends by itself, microseconds since the Unix epoch; NULL while
--               it lasts until a resume.
--   actor:      who paused it.
--   reason:     why, as the operator said; NULL if they did not.
--   created_at: when it was paused (or last paused again).
CREATE TABLE switchboard_pauses (
    kind       TEXT   NOT NULL CHECK (kind IN ('name', 'breaker_key')),
    target     TEXT   NOT NULL,
    until      BIGINT,
    actor      TEXT   NOT NULL,
    reason     TEXT,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (kind, target)
);
