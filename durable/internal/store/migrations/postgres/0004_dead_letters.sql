-- Dead letters: one row per item that ended dead (item_id set) and per failed item of a batch
-- run (item_id NULL). Append-only: rows are never deleted; only status, error, retry_count,
-- the replay lease and updated_at change. item_id has no foreign key, so that finished items
-- may be removed from switchboard_items without touching the dead letters that name them.
--   source:       the request's registered name, or the name of the batch run.
--   name:         the registered request name the payload decodes as (for replay).
--   item_key:     the batch item's key, or the dead item's dedupe key; '' when none.
--   replay_owner: the token of the replay running the letter, while its lease (replay_until)
--                 holds; a replay whose process died stops blocking the letter when it runs out.
CREATE TABLE switchboard_dead_letters (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    item_id      BIGINT,
    source       TEXT    NOT NULL,
    name         TEXT    NOT NULL,
    item_key     TEXT    NOT NULL DEFAULT '',
    payload      BYTEA   NOT NULL,
    error        TEXT    NOT NULL DEFAULT '',
    status       TEXT    NOT NULL DEFAULT 'failed',
    retry_count  INTEGER NOT NULL DEFAULT 0,
    replay_owner TEXT,
    replay_until BIGINT,
    created_at   BIGINT  NOT NULL,
    updated_at   BIGINT  NOT NULL,
    CONSTRAINT switchboard_dead_letters_status CHECK (status IN ('failed', 'replayed', 'discarded'))
);

-- Listing: by status (default failed), newest first, optionally by source.
CREATE INDEX switchboard_dead_letters_list ON switchboard_dead_letters (status, created_at, id);
CREATE INDEX switchboard_dead_letters_source ON switchboard_dead_letters (source, status, created_at, id);
-- One letter per dead item, found by item id.
CREATE UNIQUE INDEX switchboard_dead_letters_item ON switchboard_dead_letters (item_id) WHERE item_id IS NOT NULL;

-- What operators did to dead letters: replays (outcome replayed or still_failed, with the
-- handler's error) and discards (with the reason). Append-only: never updated or deleted.
CREATE TABLE switchboard_dead_letter_events (
    id             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dead_letter_id BIGINT  NOT NULL REFERENCES switchboard_dead_letters (id),
    kind           TEXT    NOT NULL,
    actor          TEXT    NOT NULL,
    started_at     BIGINT  NOT NULL,
    ended_at       BIGINT  NOT NULL,
    outcome        TEXT    NOT NULL,
    error          TEXT,
    reason         TEXT
);

CREATE INDEX switchboard_dead_letter_events_letter ON switchboard_dead_letter_events (dead_letter_id, id);
