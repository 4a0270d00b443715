-- The fair claim visits a window of fairness keys, not all of them (PostgreSQL's migration
-- 0024 changes its function). On SQLite the window is the claim's statement's own (the store's
-- sqliteFairClaim and sqliteFairWindow): no schema change.
SELECT 1;
