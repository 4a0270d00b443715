-- The dashboard's history (durable.Queue.History): one row per minute per instance, written by
-- each running scheduler once a minute, and one row per minute for the fleet (instance ''),
-- written by the first instance to flush the minute. None of it can be derived from the other
-- tables at a past minute: outcomes per minute would need a scan of the items by end time
-- (and pruned items are gone), the depth at a past minute is stored nowhere, and a breaker
-- keeps only its current state. Rows older than the history retention are deleted.
--   minute:   the minute's start, microseconds since the Unix epoch.
--   instance: the scheduler's instance id; '' for the fleet's row.
--   outcomes: JSON object, how many claims settled in the minute by record.Settled word
--             ({"succeeded": 12, "dead": 1}); '{}' in the fleet's row.
--   gauges:   JSON object {"items": {state: count}, "dead_letters": {status: count}} sampled
--             at the minute's end; only in the fleet's row, NULL elsewhere.
--   breakers: JSON object, the worst state ("open", "half_open") of each breaker key that was
--             not closed during the minute, at most 50 keys, with "omitted" counting the rest:
--             {"keys": {key: state}, "omitted": 0}; NULL in the fleet's row.
CREATE TABLE switchboard_history (
    minute   BIGINT NOT NULL,
    instance TEXT   NOT NULL,
    outcomes TEXT   NOT NULL,
    gauges   TEXT,
    breakers TEXT,
    PRIMARY KEY (minute, instance)
);
