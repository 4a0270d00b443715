package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Stats counts items by state, each up to limit, and measures how long the oldest due item has
// waited at now. A state with more than limit items is counted as limit+1 and named in Over:
// each count reads at most limit+1 entries of its state's index, whatever the tables hold.
func (s *Store) Stats(ctx context.Context, now time.Time, limit int) (Stats, error) {
	if limit < 1 {
		return Stats{}, fmt.Errorf("durable: stats: the limit is %d, not positive", limit)
	}
	st := Stats{Counts: make(map[State]int64, len(countedStates)), Over: map[State]bool{}}
	err := s.readRows(ctx, s.e.rebind(boundedCountsSQL), []any{limit + 1, limit + 1, limit + 1, limit + 1, limit + 1},
		func(rows RowReader) error { return readCounts(rows, st.Counts) })
	if err != nil {
		return st, fmt.Errorf("durable: stats: %w", err)
	}
	for state, n := range st.Counts {
		if n > int64(limit) {
			st.Over[state] = true
		}
	}
	var oldest sql.NullInt64
	err = s.e.indexedRow(ctx, s.db, s.e.stmts().oldestDue, []any{micros(now), micros(now)}, &oldest)
	if err != nil {
		return st, fmt.Errorf("durable: stats: %w", err)
	}
	if oldest.Valid {
		st.OldestDue = max(0, now.Sub(fromMicros(oldest.Int64)))
	}
	return st, nil
}

// CountStates counts the items of each of states in full, reading every entry of their indexes:
// what Stats leaves out above its limit.
func (s *Store) CountStates(ctx context.Context, states []State) (map[State]int64, error) {
	out, err := countIn(ctx, s, allItems, "state", "an item state", countedStates, states)
	if err != nil {
		return nil, fmt.Errorf("durable: count items: %w", err)
	}
	return out, nil
}

// countIn counts the rows of table whose column holds each of keys, every one of keys present
// in the answer; a key not among known is refused, as not a what.
func countIn[K ~string](ctx context.Context, s *Store, table, column, what string, known, keys []K) (map[K]int64, error) {
	out := make(map[K]int64, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	args := make([]any, len(keys))
	for i, k := range keys {
		if !slices.Contains(known, k) {
			return nil, fmt.Errorf("%q is not %s", k, what)
		}
		args[i], out[k] = string(k), 0
	}
	q := "SELECT " + column + ", COUNT(*) FROM " + table + " WHERE " + column + " IN (?" + strings.Repeat(", ?", len(keys)-1) + ") GROUP BY " + column
	if err := s.readRows(ctx, s.e.rebind(q), args, func(rows RowReader) error { return readCounts(rows, out) }); err != nil {
		return nil, err
	}
	return out, nil
}

// countedStates are the states Stats counts, in the order of boundedCountsSQL.
var countedStates = []State{StatePending, StateRunning, StateSucceeded, StateDead, StateCancelled}

// boundedCountsSQL counts the items of each state up to a bound, each through its state's
// partial index (a LIMIT stops each scan). Pending and running items are live: they are read
// from the claim's table alone, as the finished table, which never holds them, has no index
// for them (read through allItems, it was scanned whole for each). Placeholders: the bound,
// once per state.
var boundedCountsSQL = boundedCounts(countedStates, func(st State) string {
	if st == StatePending || st == StateRunning {
		return "switchboard_items"
	}
	return allItems
}, "state")

// boundedCounts is a statement that counts the rows of each of keys, whose column holds it,
// up to a bound: a row (key, count) per key, each read from its table(key). Placeholders: the
// bound, once per key.
func boundedCounts[K ~string](keys []K, table func(K) string, column string) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("SELECT '%[1]s' AS k, COUNT(*) AS n FROM (SELECT 1 FROM %[2]s WHERE %[3]s = '%[1]s' LIMIT ?) c%[4]d", k, table(k), column, i)
	}
	return strings.Join(parts, "\nUNION ALL ")
}

// readCounts reads rows of (key, count) into counts.
func readCounts[K ~string](rows RowReader, counts map[K]int64) error {
	for rows.Next() {
		var (
			k string
			n int64
		)
		if err := rows.Scan(&k, &n); err != nil {
			return err
		}
		counts[K(k)] = n
	}
	return rows.Err()
}
