-- The audit log: one row per operator action on the queue that is not a dead letter's own
-- (those are in switchboard_dead_letter_events): pausing and resuming, cancelling an item or
-- running it now, changing a schedule, starting or stopping a bulk action. Rows are never
-- updated or deleted by the queue.
--   at:          when the action was taken, microseconds since the Unix epoch.
--   actor:       the operator who took it, as the admin surface's Authorizer named them.
--   action:      what was done ('pause', 'resume', 'cancel', 'run_now', ...).
--   target_kind: what it was done to ('name', 'breaker_key', 'item', 'schedule', 'bulk_action').
--   target:      which one: a request name, a key, an item's or an action's id.
--   detail:      what else the action said: a reason, an end time, a filter; NULL if nothing.
--   outcome:     how it ended ('done', or why nothing changed: 'already_running', ...).
CREATE TABLE switchboard_audit (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    at          BIGINT NOT NULL,
    actor       TEXT   NOT NULL,
    action      TEXT   NOT NULL,
    target_kind TEXT   NOT NULL,
    target      TEXT   NOT NULL,
    detail      TEXT,
    outcome     TEXT   NOT NULL
);
-- The entries about one target, newest first.
CREATE INDEX switchboard_audit_target ON switchboard_audit (target_kind, target, id);
