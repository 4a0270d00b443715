package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// attemptIDBlock is how many attempt ids a SQLite pool reserves at a time for the successes it
// records on their items: a completion of one item at a time then pays no statement for its id
// but once in this many.
const attemptIDBlock = 256

// attemptIDs keeps the attempt ids a SQLite pool reserved (from the attempts table's
// AUTOINCREMENT sequence, which later rows go past) and has not used yet. Its completions take
// their successes' ids from it; a completion that finds too few reserves a new block in its own
// transaction, which becomes the pool's only when that transaction commits (a rolled back
// reservation was never made). Ids taken by a transaction that then fails are left unused: a
// gap, never an id given twice.
type attemptIDs struct {
	mu        sync.Mutex
	next, end int64 // the reserved ids not yet taken: from next to before end
}

// take returns the first of n consecutive attempt ids for a completion in tx, and the function
// to call with whether tx committed. A nil a reserves exactly n, every time.
func (a *attemptIDs) take(ctx context.Context, tx *sql.Tx, n int64) (first int64, done func(committed bool), err error) {
	none := func(bool) {}
	if n == 0 {
		return 0, none, nil
	}
	if a != nil {
		a.mu.Lock()
		if a.end-a.next >= n {
			first = a.next
			a.next += n
			a.mu.Unlock()
			return first, none, nil
		}
		a.mu.Unlock()
	}
	block := n
	if a != nil {
		block += attemptIDBlock
	}
	var last int64
	err = tx.QueryRowContext(ctx, sqliteReserveAttemptIDs, block).Scan(&last)
	if errors.Is(err, sql.ErrNoRows) {
		err = tx.QueryRowContext(ctx, sqliteFirstAttemptIDs, block).Scan(&last)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("reserve attempt ids: %w", err)
	}
	first = last - block + 1
	if a == nil {
		return first, none, nil
	}
	return first, func(committed bool) {
		if committed {
			a.mu.Lock()
			a.next, a.end = first+n, last+1
			a.mu.Unlock()
		}
	}, nil
}

// successes counts the completions of cs that record a success on its item.
func successes(cs []Completion) int64 {
	n := int64(0)
	for i := range cs {
		if cs[i].Outcome == OutcomeSucceeded {
			n++
		}
	}
	return n
}
