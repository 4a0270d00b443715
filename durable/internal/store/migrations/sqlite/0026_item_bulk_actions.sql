-- Bulk actions on pending items (durable.Queue.StartItemBulkAction), kept in the table of the
-- bulk actions on dead letters (PostgreSQL's migration 0026 describes the columns). SQLite
-- cannot change a table's CHECK constraint in place, so the table is copied into one whose
-- check admits the item kinds: it holds one row per action an operator started, a few hundred
-- at most, so the copy takes milliseconds. The ids are kept (AUTOINCREMENT's sequence follows
-- the copied ids); the timeline events name the actions by id and stay valid.
CREATE TABLE switchboard_bulk_actions_0026 (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    kind          TEXT    NOT NULL,
    filter        TEXT    NOT NULL,
    reason        TEXT,
    actor         TEXT    NOT NULL,
    state         TEXT    NOT NULL,
    rate          REAL NOT NULL,
    in_flight     INTEGER NOT NULL,
    reset_breaker TEXT,
    max_letter    BIGINT  NOT NULL,
    matched       BIGINT  NOT NULL,
    cursor_id     BIGINT  NOT NULL DEFAULT 0,
    replayed      BIGINT  NOT NULL DEFAULT 0,
    still_failed  BIGINT  NOT NULL DEFAULT 0,
    discarded     BIGINT  NOT NULL DEFAULT 0,
    unknown       BIGINT  NOT NULL DEFAULT 0,
    skipped       BIGINT  NOT NULL DEFAULT 0,
    waiting_key   TEXT,
    error         TEXT,
    lease_owner   TEXT,
    lease_until   BIGINT,
    created_at    BIGINT  NOT NULL,
    updated_at    BIGINT  NOT NULL,
    finished_at   BIGINT,
    priority      INTEGER,
    max_item      BIGINT,
    changed       BIGINT  NOT NULL DEFAULT 0,
    CONSTRAINT switchboard_bulk_actions_kind CHECK (kind IN ('replay', 'discard', 'cancel', 'run_now', 'set_priority'))
);
INSERT INTO switchboard_bulk_actions_0026 (id, kind, filter, reason, actor, state, rate, in_flight, reset_breaker, max_letter, matched,
    cursor_id, replayed, still_failed, discarded, unknown, skipped, waiting_key, error, lease_owner, lease_until, created_at, updated_at, finished_at)
SELECT id, kind, filter, reason, actor, state, rate, in_flight, reset_breaker, max_letter, matched,
    cursor_id, replayed, still_failed, discarded, unknown, skipped, waiting_key, error, lease_owner, lease_until, created_at, updated_at, finished_at
FROM switchboard_bulk_actions;
DROP TABLE switchboard_bulk_actions;
ALTER TABLE switchboard_bulk_actions_0026 RENAME TO switchboard_bulk_actions;
CREATE INDEX switchboard_bulk_actions_open ON switchboard_bulk_actions (id) WHERE finished_at IS NULL;
