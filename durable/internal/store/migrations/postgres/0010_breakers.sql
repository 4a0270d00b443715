-- Shared circuit-breaker state (durable.NewBreakerStore): one row per breaker that the
-- instances of a fleet share, kept across their restarts. Times are microseconds since the Unix
-- epoch by the database's clock, so that instances with skewed clocks agree.
--   name:          the namespace of the registry the breaker belongs to (NewBreakerStore's
--                  name): one queue may hold the breakers of several registries.
--   key:           the breaker's key in its registry.
--   state:         'closed', 'open' or 'half_open'.
--   epoch:         how many transitions the breaker has made. Each transition is a
--                  compare-and-swap on it, so that of the instances moving a breaker at once one
--                  wins.
--   failures:      the consecutive counted failures that opened it; 0 once closed.
--   opened_at:     when it last opened; NULL while closed.
--   open_until:    while open, when a probe may start; NULL while closed.
--   probe_owner:   while half-open, the instance holding its probes; NULL otherwise.
--   probe_until:   while half-open, when that claim runs out (another instance may then claim
--                  the probes); NULL otherwise.
--   last_probe_at: when the probes were last claimed; NULL if never.
--   by_instance:   the instance that made the last transition.
--   updated_at:    when the last transition was made.
--   seq:           the change sequence: each transition takes the next value of
--                  switchboard_breakers_seq, so that an instance polls for the rows changed
--                  since the last it read.
CREATE SEQUENCE switchboard_breakers_seq;
CREATE TABLE switchboard_breakers (
    name          TEXT    NOT NULL,
    key           TEXT    NOT NULL,
    state         TEXT    NOT NULL CHECK (state IN ('closed', 'open', 'half_open')),
    epoch         BIGINT  NOT NULL,
    failures      INTEGER NOT NULL,
    opened_at     BIGINT,
    open_until    BIGINT,
    probe_owner   TEXT,
    probe_until   BIGINT,
    last_probe_at BIGINT,
    by_instance   TEXT    NOT NULL,
    updated_at    BIGINT  NOT NULL,
    seq           BIGINT  NOT NULL,
    PRIMARY KEY (name, key)
);
-- The changes of one registry since a seq, in order.
CREATE INDEX switchboard_breakers_changes ON switchboard_breakers (name, seq);
-- The breakers of one registry that are not closed: what an instance loads when it starts.
CREATE INDEX switchboard_breakers_unsettled ON switchboard_breakers (name, key) WHERE state <> 'closed';
-- Every change is announced on the channel switchboard_breakers, the payload being the
-- table's schema and the row's name ("schema.name"), so that the instances listening learn of
-- it at once rather than at their next poll; a channel is the database's, not a schema's, and
-- the schema in the payload keeps the registries of one name in other schemas apart.
CREATE FUNCTION switchboard_breakers_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('switchboard_breakers', TG_TABLE_SCHEMA || '.' || NEW.name);
    RETURN NULL;
END
$$;
CREATE TRIGGER switchboard_breakers_notify AFTER INSERT OR UPDATE ON switchboard_breakers
    FOR EACH ROW EXECUTE FUNCTION switchboard_breakers_notify();
