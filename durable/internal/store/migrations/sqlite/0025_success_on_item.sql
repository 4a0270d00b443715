-- A success's attempt is recorded on its item, not in a row of its own (PostgreSQL's migration
-- 0025 says why): its attempt id (reserved from the attempts' AUTOINCREMENT sequence), the
-- instance that made it, and when it started and ended.
ALTER TABLE switchboard_items ADD COLUMN success_id BIGINT;
ALTER TABLE switchboard_items ADD COLUMN success_instance TEXT;
ALTER TABLE switchboard_items ADD COLUMN success_started_at BIGINT;
ALTER TABLE switchboard_items ADD COLUMN success_ended_at BIGINT;
