-- Crash isolation and breaker parking.
--   isolate:      1 when the item's last lease ran out while it ran (its holder died): the item is
--                 claimed alone next time, so a crash while it runs is its own.
--   alone:        1 while the current claim runs alone.
--   unattributed: abandoned attempts made beside other items: the crash that abandoned them cannot
--                 be pinned on this item, so they do not count against the retry limit.
--   parked_key:   the circuit-breaker key a pending item waits on: its breaker closing frees it.
ALTER TABLE switchboard_items ADD COLUMN isolate INTEGER NOT NULL DEFAULT 0;
ALTER TABLE switchboard_items ADD COLUMN alone INTEGER NOT NULL DEFAULT 0;
ALTER TABLE switchboard_items ADD COLUMN unattributed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE switchboard_items ADD COLUMN parked_key TEXT;
-- The due index leads with isolate: a claim's "isolate = n AND next_at <= now ORDER BY next_at,
-- id" is one index range for either value (in a generic plan too), and the normal claim never
-- walks past items waiting to run alone.
DROP INDEX switchboard_items_due;
CREATE INDEX switchboard_items_due ON switchboard_items (isolate, next_at, id) WHERE state = 'pending';
CREATE INDEX switchboard_items_parked ON switchboard_items (parked_key) WHERE parked_key IS NOT NULL;
