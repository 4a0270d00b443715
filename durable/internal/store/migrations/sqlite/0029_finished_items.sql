-- The readers of items in any state read switchboard_items_all. On PostgreSQL it joins the live
-- items and the finished items, which leave the claim's table there. On SQLite every item stays
-- in switchboard_items and the view is that table: a finished item is updated in place, in a
-- B-tree that an update leaves no dead row in and whose partial indexes of pending and running
-- items a finished item is not in, where a move would write its row twice (an insert and a
-- delete) on the one writer every completion waits for.
CREATE VIEW switchboard_items_all AS SELECT * FROM switchboard_items;
