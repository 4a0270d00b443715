-- Browsing items (durable.Queue.Items): an operator lists the items of one state, optionally
-- of one request name or parked on one breaker key, created in a time range, a page at a time.
-- Each listing reads its page in (created_at, id) order from a cursor, so that a page far in
-- reads as few rows as the first: every listing has an index whose leading columns are its
-- equality filters and whose next ones are that order, and none sorts. A new state,
-- 'cancelled', is an item an operator cancelled while it was pending: terminal, and kept.
--
-- One index per state, each holding only the items in its state: an item is in one of them at
-- a time, so a state change writes one entry, as one index on state would. Their predicates
-- say "created_at >= 0", always true, as the listings do, so that only a statement saying it can
-- read them: statistics taken when nothing was pending or running once had the planner read
-- every pending or running item through an index on state for a claim or a sweep, and would
-- have it read these the same way.
CREATE INDEX switchboard_items_list_pending ON switchboard_items (created_at, id) WHERE state = 'pending' AND created_at >= 0;
CREATE INDEX switchboard_items_list_running ON switchboard_items (created_at, id) WHERE state = 'running' AND created_at >= 0;
CREATE INDEX switchboard_items_list_succeeded ON switchboard_items (created_at, id) WHERE state = 'succeeded' AND created_at >= 0;
CREATE INDEX switchboard_items_list_dead ON switchboard_items (created_at, id) WHERE state = 'dead' AND created_at >= 0;
CREATE INDEX switchboard_items_list_cancelled ON switchboard_items (created_at, id) WHERE state = 'cancelled' AND created_at >= 0;
-- The listings of one request name: one more entry per state change of every item, the price
-- of finding a rare name's items among millions without reading the others.
CREATE INDEX switchboard_items_by_name ON switchboard_items (name, state, created_at, id);
-- The items parked on one breaker key (what unparking and reparking probe, as before), now in
-- listing order; only parked items have entries.
DROP INDEX switchboard_items_parked;
CREATE INDEX switchboard_items_parked ON switchboard_items (parked_key, created_at, id) WHERE parked_key IS NOT NULL;
-- Every parked item, in listing order; only parked items have entries.
CREATE INDEX switchboard_items_parked_list ON switchboard_items (created_at, id)
    WHERE state = 'pending' AND parked_key IS NOT NULL AND created_at >= 0;
