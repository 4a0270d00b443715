-- A success's attempt is recorded on its item, not in a row of its own: its attempt id (drawn
-- from the attempts' identity, so that the ids of an item's attempts stay unique), the instance
-- that made it, and when it started and ended. A failed, abandoned or interrupted attempt keeps
-- its own row. The attempt row of a success was one more insert and two more index entries for
-- every item a drain completes; an operator who wants one anyway sets durable's
-- Config.SuccessAttemptRows. Adding nullable columns without a default changes only the
-- catalog: no rewrite, no long lock.
ALTER TABLE switchboard_items
    ADD COLUMN success_id         BIGINT,
    ADD COLUMN success_instance   TEXT,
    ADD COLUMN success_started_at BIGINT,
    ADD COLUMN success_ended_at   BIGINT;
