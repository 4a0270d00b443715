-- Attempts interrupted by a scheduler's shutdown: recorded as attempts, but not counted against
-- the retry policy's MaxAttempts.
ALTER TABLE switchboard_items ADD COLUMN interruptions INTEGER NOT NULL DEFAULT 0;
