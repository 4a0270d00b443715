-- PostgreSQL's migration 0030 fixes the plan of the trigger that keeps a token unique across
-- its two tables of items. SQLite keeps every item in one table, whose token index alone keeps
-- a token unique: no schema change.
SELECT 1;
