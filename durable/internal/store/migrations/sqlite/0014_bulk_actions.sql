-- Bulk actions on dead letters (durable.Queue.StartBulkAction): a replay or a discard of every
-- failed letter a filter selects, stored so that it survives the instance running it. A
-- running scheduler takes an unfinished action under a lease and works through its letters in
-- id order; when its process dies, another instance (or the restarted one) takes it over once
-- the lease has run out and carries on from the cursor.
--   kind:          'replay' or 'discard'.
--   filter:        the filter, as JSON (durable.DeadLetterFilter's fields).
--   reason:        why (required for a discard); NULL if none was given.
--   actor:         who started it.
--   state:         'queued', 'running', 'waiting' (a letter is leased by another replay),
--                  'paused_on_breaker', 'paused' (its letters' request name or breaker key is
--                  paused), 'done', 'cancelled', 'failed'.
--   rate:          letters per second at most.
--   in_flight:     letters at most replayed at once (fewer while a breaker is half-open).
--   reset_breaker: the breaker key reset when the action started; NULL if none.
--   max_letter:    the highest letter id when it started: letters that die later are not
--                  swept in, so a run that keeps failing cannot feed itself.
--   matched:       the letters the filter selected when it started.
--   cursor_id:     every selected letter with an id at or below it is settled.
--   replayed, still_failed, discarded, unknown, skipped: the totals per outcome. Each of the
--                  first three is counted in the transaction that settles its letter; unknown
--                  counts replays whose outcome could not be recorded; skipped, written when
--                  the action ends, the letters others settled before it reached them.
--   waiting_key:   the breaker key it waits on; NULL when it does not.
--   error:         why it failed, or what it waits for; NULL otherwise.
--   lease_owner, lease_until: the instance running it and until when; NULL when none.
--   created_at, updated_at, finished_at: microseconds since the Unix epoch; finished_at is
--                  NULL until the action is done, cancelled or failed.
CREATE TABLE switchboard_bulk_actions (
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
    CONSTRAINT switchboard_bulk_actions_kind CHECK (kind IN ('replay', 'discard'))
);
-- The unfinished actions, which the schedulers look for every poll.
CREATE INDEX switchboard_bulk_actions_open ON switchboard_bulk_actions (id) WHERE finished_at IS NULL;

-- The bulk action a replay or discard event was part of; NULL for one of its own. A resumed
-- action passes over the letters whose replay it already recorded as still failed.
ALTER TABLE switchboard_dead_letter_events ADD COLUMN bulk_action_id BIGINT;
CREATE INDEX switchboard_dead_letter_events_bulk ON switchboard_dead_letter_events (bulk_action_id, dead_letter_id)
    WHERE bulk_action_id IS NOT NULL;
