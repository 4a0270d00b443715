-- Finished items leave the claim's table. An item that succeeded, died or was cancelled is moved,
-- by the statement that finishes it, to switchboard_finished_items, a table of the same columns
-- with only the indexes its readers need; switchboard_items keeps the live items (pending and
-- running) and the succeeded items that still hold their dedupe key (their window's uniqueness
-- is the dedupe index's, on this table). So the claim's table and its indexes stay the size of
-- the work in flight however long finished items are kept, and vacuum has little to clean
-- there. Every reader of items in any state reads switchboard_items_all, the two tables as one.
--
-- Online: every statement here changes only the catalog or an empty table; the locks they take
-- on switchboard_items and switchboard_attempts last as long as the catalog change. The items
-- that finished before this migration stay where they are and are read through the view; the
-- pruner moves them a batch at a time, each batch a transaction of its own
-- (MoveFinishedBatch), so no lock is held while a large table is read.
--
-- A migration that adds a column to switchboard_items adds it to switchboard_finished_items too
-- and creates the view again (its SELECT * was expanded when it was created).
CREATE TABLE switchboard_finished_items (LIKE switchboard_items INCLUDING DEFAULTS);
ALTER TABLE switchboard_finished_items ADD PRIMARY KEY (id);
CREATE UNIQUE INDEX switchboard_finished_items_token ON switchboard_finished_items (token) WHERE token IS NOT NULL;
CREATE INDEX switchboard_finished_items_succeeded ON switchboard_finished_items (updated_at, id) WHERE state = 'succeeded';
CREATE INDEX switchboard_finished_items_dead ON switchboard_finished_items (updated_at, id) WHERE state = 'dead';
CREATE INDEX switchboard_finished_items_cancelled ON switchboard_finished_items (updated_at, id) WHERE state = 'cancelled';
CREATE INDEX switchboard_finished_items_reference ON switchboard_finished_items (reference) WHERE reference IS NOT NULL;

CREATE VIEW switchboard_items_all AS
    SELECT * FROM switchboard_items
    UNION ALL
    SELECT * FROM switchboard_finished_items;

-- An item's attempt rows outlive its row in switchboard_items: the key they referenced moves.
ALTER TABLE switchboard_attempts DROP CONSTRAINT IF EXISTS switchboard_attempts_item_id_fkey;

-- A token is unique among all items, finished ones included, and a unique index cannot span two
-- tables: an insert whose token a finished item holds inserts nothing, as one whose token a live
-- item holds does (ON CONFLICT DO NOTHING). The function looks in the claim's table first, then
-- in the finished table, each with a snapshot of its own (in READ COMMITTED each statement of
-- the function takes one): an item moves from the first to the second in one transaction, so
-- one not yet moved when the first look is taken is seen there, and one moved before it is seen
-- by the second. It takes no lock: an application's transaction that enqueued a taken token
-- holds nothing a completion or a cancel of that item waits for.
CREATE FUNCTION switchboard_token_free() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM switchboard_items WHERE token = NEW.token) THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM switchboard_finished_items WHERE token = NEW.token) THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER switchboard_items_token_free BEFORE INSERT ON switchboard_items
    FOR EACH ROW WHEN (NEW.token IS NOT NULL) EXECUTE FUNCTION switchboard_token_free();
