-- The dashboard's history (durable.Queue.History): one row per minute per instance, and one
-- per minute for the fleet (instance ''); PostgreSQL's migration 0027 says why each column
-- is stored and what it holds.
CREATE TABLE switchboard_history (
    minute   BIGINT NOT NULL,
    instance TEXT   NOT NULL,
    outcomes TEXT   NOT NULL,
    gauges   TEXT,
    breakers TEXT,
    PRIMARY KEY (minute, instance)
);
