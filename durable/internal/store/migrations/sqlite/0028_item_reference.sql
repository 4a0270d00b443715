-- An item's reference: the application's own id for it (durable.WithReference: an order
-- number, a notification id), by which an operator finds the item, its attempts and its dead
-- letter; its dedupe key and token find it too. The dead letters get an index on their item's
-- dedupe key, so that a key finds the letter of an item that died with it. Both indexes are
-- partial: an item without a reference and a letter without a key cost them nothing.
ALTER TABLE switchboard_items ADD COLUMN reference TEXT;
CREATE INDEX switchboard_items_reference ON switchboard_items (reference) WHERE reference IS NOT NULL;
CREATE INDEX switchboard_dead_letters_key ON switchboard_dead_letters (item_key) WHERE item_key <> '';
