-- Items the durable deferral stored.
--   deferred: 1 when the deferral stored the item after the in-process attempts of its request
--             failed: its first stored attempt is already a retry of a call made, which the
--             scheduler charges to the retry budget. 0 for an item enqueued directly, whose
--             first attempt is a call even when a refusal (a rate limiter, an open breaker)
--             set its last error before it.
ALTER TABLE switchboard_items ADD COLUMN deferred INTEGER NOT NULL DEFAULT 0;
-- Items stored before the column, not yet attempted: those with a last error keep the
-- judgement the scheduler made of them before (the deferral stored them, or a refusal put them
-- off), erring on the side of fewer retries.
UPDATE switchboard_items SET deferred = 1 WHERE state = 'pending' AND attempts = 0 AND last_error IS NOT NULL;
