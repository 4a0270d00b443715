-- Bulk actions on pending items (durable.Queue.StartItemBulkAction): a cancel, a run-now or a
-- priority change of every pending item an item filter selects, kept in the table of the bulk
-- actions on dead letters and run by the same loop, under the same leases.
--   kind:     adds 'cancel', 'run_now' and 'set_priority' (on items) to 'replay' and
--             'discard' (on letters).
--   filter:   for an item action, durable.ItemFilter's fields as JSON.
--   priority: the priority a set_priority action gives (0-9); NULL for other kinds.
--   max_item: the highest item id when an item action started: the items enqueued later are
--             not swept in; NULL for a letter action. Its cursor_id is an item id.
--   changed:  the items an item action changed (cancelled, made due, given the priority), each
--             counted in the transaction that changes it; its skipped counts the items it
--             matched that were no longer pending (claimed, finished, cancelled) or, for a
--             run-now, held back by a pause, when it reached them.
-- Nullable columns and a constant default change only the catalog: no rewrite. The new check is
-- added NOT VALID and validated apart, which reads the (small) table without blocking writes.
ALTER TABLE switchboard_bulk_actions
    ADD COLUMN priority INTEGER,
    ADD COLUMN max_item BIGINT,
    ADD COLUMN changed  BIGINT NOT NULL DEFAULT 0;
ALTER TABLE switchboard_bulk_actions DROP CONSTRAINT switchboard_bulk_actions_kind;
ALTER TABLE switchboard_bulk_actions ADD CONSTRAINT switchboard_bulk_actions_kind
    CHECK (kind IN ('replay', 'discard', 'cancel', 'run_now', 'set_priority')) NOT VALID;
ALTER TABLE switchboard_bulk_actions VALIDATE CONSTRAINT switchboard_bulk_actions_kind;
