-- A dead letter keeps the request metadata of its item (or of its batch run's caller), so a
-- replay runs with the context values the request was sent with (trace context, tenant).
ALTER TABLE switchboard_dead_letters ADD COLUMN metadata JSONB;
-- Who holds a replay lease and since when, so that a replay whose process died before it
-- finished leaves an "abandoned" event in the timeline once its lease runs out.
ALTER TABLE switchboard_dead_letters ADD COLUMN replay_actor TEXT;
ALTER TABLE switchboard_dead_letters ADD COLUMN replay_started BIGINT;
