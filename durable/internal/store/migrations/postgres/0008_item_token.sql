-- The item's token: an identity the enqueuing client gives the item before it is inserted (a
-- random one, or the caller's own), so that a client that cannot know whether its insert
-- committed (a deadline or a lost connection during the commit) can look the item up, or
-- enqueue it again without making a second one: an insert whose token is taken inserts
-- nothing and reports the item holding it. NULL in the items enqueued before this migration.
ALTER TABLE switchboard_items ADD COLUMN token TEXT;
CREATE UNIQUE INDEX switchboard_items_token ON switchboard_items (token);
