-- Fleet-wide rate limits (durable.NewRateLimitStore): one row per limit that the instances of a
-- fleet share. Each row is a GCRA: the theoretical arrival time of the limit's next permit,
-- which every lease of a batch of permits advances by the batch, in one conditional statement,
-- so that every permit of the limit's timeline is leased to one instance once.
--   name:       the namespace of the store (RateLimitStoreConfig.Name).
--   key:        the limit's key.
--   tat:        the time of the limit's next free permit, in nanoseconds since the Unix epoch by
--               the database's clock (a permit every interval; a microsecond clock would round
--               the interval of most rates).
--   granted:    the permits the last lease granted: 0 when the coming lease period was leased
--               already and it granted none.
--   updated_at: when the last lease was made, in microseconds since the Unix epoch.
CREATE TABLE switchboard_rate_limits (
    name       TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    tat        BIGINT  NOT NULL,
    granted    INTEGER NOT NULL,
    updated_at BIGINT  NOT NULL,
    PRIMARY KEY (name, key)
);
-- The instances that lease a limit's permits, each with the last time it said so (about once a
-- second while it leases): how many share the limit, which each instance divides the rate by
-- when the database does not answer. Rows of instances long gone are deleted by the others.
CREATE TABLE switchboard_rate_limit_lessees (
    name     TEXT   NOT NULL,
    key      TEXT   NOT NULL,
    instance TEXT   NOT NULL,
    seen_at  BIGINT NOT NULL,
    PRIMARY KEY (name, key, instance)
);
