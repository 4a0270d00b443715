CREATE TABLE switchboard_items (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    name         TEXT    NOT NULL,
    payload      BLOB    NOT NULL,
    state        TEXT    NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0,
    dedupe_key   TEXT,
    ordering_key TEXT,
    next_at      BIGINT  NOT NULL,
    lease_owner  TEXT,
    lease_until  BIGINT,
    claimed_at   BIGINT,
    last_error   TEXT,
    created_at   BIGINT  NOT NULL,
    updated_at   BIGINT  NOT NULL
);

CREATE INDEX switchboard_items_due ON switchboard_items (next_at, id) WHERE state = 'pending';
CREATE INDEX switchboard_items_lease ON switchboard_items (lease_until) WHERE state = 'running';
CREATE INDEX switchboard_items_state ON switchboard_items (state);
CREATE UNIQUE INDEX switchboard_items_dedupe ON switchboard_items (dedupe_key)
    WHERE dedupe_key IS NOT NULL AND state IN ('pending', 'running');
CREATE INDEX switchboard_items_ordering ON switchboard_items (ordering_key, id)
    WHERE ordering_key IS NOT NULL AND state IN ('pending', 'running');

CREATE TABLE switchboard_attempts (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    item_id    BIGINT  NOT NULL REFERENCES switchboard_items (id),
    attempt    INTEGER NOT NULL,
    instance   TEXT    NOT NULL,
    started_at BIGINT  NOT NULL,
    ended_at   BIGINT  NOT NULL,
    outcome    TEXT    NOT NULL,
    error      TEXT,
    UNIQUE (item_id, attempt)
);
