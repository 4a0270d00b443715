-- What guards an item and how long it may live:
--   guard_key: the circuit-breaker key an enqueue named for the item (durable.WithBreakerKey):
--              the scheduler asks that breaker before each attempt. NULL: the key comes from
--              the item's registration, or no breaker guards it.
--   deadline:  the time (microseconds since the Unix epoch) past which the item is dead, not
--              attempted: the earlier of the enqueue's deadline and its registration's MaxAge
--              after the enqueue. NULL: none.
ALTER TABLE switchboard_items ADD COLUMN guard_key TEXT;
ALTER TABLE switchboard_items ADD COLUMN deadline BIGINT;
-- A claimed item keeps its parked key while it runs, so the scheduler can ask that breaker
-- before the attempt (its completion sets or clears the key).
