package store

import (
	"context"
)

// The reads that run now and then (an item, a letter or their timelines for an operator, the
// listings and counts a dashboard polls, the batches of a bulk action, a lookup by token or
// reference) are planned at each run, on the tables as they are (replannedRows: customPlans on
// PostgreSQL). A connection keeps a plan of each after a few runs, and one made while a table
// was empty and analyzed (a drained queue, a new one's letters and attempts) scanned the whole
// table at every later run once it filled, until its next analyze: a lookup by id read every
// item, a dashboard's poll every letter (TestReadsKeepTheirIndexesAfterAnIdleSpell). Their plan
// costs a fraction of a millisecond; the claim loop's statements, which run per round trip,
// keep theirs (indexPlans).

// readRows runs query, a read that runs now and then, planned for this run, and hands its
// rows to read.
func (s *Store) readRows(ctx context.Context, query string, args []any, read func(RowReader) error) error {
	return s.e.replannedRows(ctx, s.db, query, args, read)
}

// readItem reads the one item query returns: sql.ErrNoRows when there is none.
func (s *Store) readItem(ctx context.Context, query string, args []any) (it Item, err error) {
	err = s.readRows(ctx, query, args, firstRow(func(r rowScanner) (err error) { it, _, err = scanItem(r); return err }))
	return it, err
}

// readItems appends the items of rows to out.
func readItems(rows RowReader, out *[]Item) error {
	sc := newItemScan()
	for rows.Next() {
		it, _, err := sc.scan(rows)
		if err != nil {
			return err
		}
		*out = append(*out, it)
	}
	return rows.Err()
}
