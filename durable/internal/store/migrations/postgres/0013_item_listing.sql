-- Browsing items (durable.Queue.Items): an operator lists the items of one state, a page at a
-- time from a cursor, so that a page far in reads as few rows as the first. Each state's
-- listing reads one index in its order and sorts nothing:
--   pending:   the due index (isolate, next_at, id), as it is: in the order the items run;
--   parked:    by breaker key, then when due;
--   running:   by when the lease runs out;
--   succeeded, dead, cancelled: by when they finished (updated_at), newest first.
-- Every index is a write per state change of every item, so the listings reuse the indexes
-- the scheduler has, widened by the columns their order needs (the same writes); the two new
-- ones hold only dead and cancelled items, written once per item that ends so. A new state,
-- 'cancelled', is an item an operator cancelled while it was pending: terminal, and kept.
DROP INDEX switchboard_items_lease;
CREATE INDEX switchboard_items_lease ON switchboard_items (lease_until, id) WHERE state = 'running';
DROP INDEX switchboard_items_succeeded;
CREATE INDEX switchboard_items_succeeded ON switchboard_items (updated_at, id) WHERE state = 'succeeded';
DROP INDEX switchboard_items_parked;
CREATE INDEX switchboard_items_parked ON switchboard_items (parked_key, next_at, id) WHERE parked_key IS NOT NULL;
CREATE INDEX switchboard_items_dead ON switchboard_items (updated_at, id) WHERE state = 'dead';
CREATE INDEX switchboard_items_cancelled ON switchboard_items (updated_at, id) WHERE state = 'cancelled';
