-- Request metadata: the context values the queue's propagators carried from the enqueuing
-- caller to the item's dispatch (trace context, tenant, correlation id), a JSON object of
-- strings; NULL when there are none.
ALTER TABLE switchboard_items ADD COLUMN metadata JSONB;
-- Retention: the scheduler deletes succeeded items (and their attempt rows) once they are older
-- than its retention, oldest first, a batch at a time. This index gives it them in that order
-- without reading the pending, running or dead items.
CREATE INDEX switchboard_items_succeeded ON switchboard_items (updated_at) WHERE state = 'succeeded';
