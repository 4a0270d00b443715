package durable

import (
	"context"
	"slices"
	"sync"
	"time"
)

// ExactCountLimit is the count up to which Stats counts a state's items at every call. A
// state with more is counted in full at most every few seconds and its count kept between (see
// Stats): counting a million finished items reads a million index entries, and a dashboard
// asks every two seconds, in every open tab, while knowing that one of its states holds
// 1,000,000 items rather than 1,000,050 is all it needs of it.
const ExactCountLimit = 10_000

// Full counts are made again at most every minFullCountInterval, or every fullCountShare
// times as long as a count takes, whichever is longer, and at least every
// maxFullCountInterval: a count that reads the whole table for a second is made at most every
// 100 s, so that counting costs the database about a hundredth of one of its cores, however
// large the tables grow and however many dashboards ask. How long a count takes is the shorter
// of the last two: one made while the database was busy (a burst, a restart's reconnections)
// does not keep the next one back.
const (
	minFullCountInterval = 10 * time.Second
	maxFullCountInterval = 5 * time.Minute
	fullCountShare       = 100
)

// fullCounts keeps the full counts of the states (or letter statuses) Stats found over
// ExactCountLimit. One count runs at a time: callers that come while it runs take the kept
// counts, or wait for it when none are kept.
type fullCounts[K ~string] struct {
	mu      sync.Mutex
	counts  map[K]int64
	at      time.Time     // when the kept counts were made, by the queue's clock
	took    time.Duration // how long making them took
	before  time.Duration // how long the count before took; zero before the second count
	running chan struct{} // closed when the count under way ends; nil when none is
}

// get returns the full counts of keys at now, made by count, and how old they are: counted by
// this call (age zero) or kept from an earlier one made less than the refresh interval ago.
func (f *fullCounts[K]) get(ctx context.Context, count func(context.Context, []K) (map[K]int64, error), keys []K, now time.Time) (map[K]int64, time.Duration, error) {
	for {
		f.mu.Lock()
		kept := f.counts != nil && f.holds(keys)
		if kept && now.Sub(f.at) < f.interval() {
			counts, age := f.counts, max(0, now.Sub(f.at))
			f.mu.Unlock()
			return counts, age, nil
		}
		if running := f.running; running != nil {
			if kept {
				// Another call is counting: the kept counts, with their age, rather than a
				// second full count at once.
				counts, age := f.counts, max(0, now.Sub(f.at))
				f.mu.Unlock()
				return counts, age, nil
			}
			f.mu.Unlock()
			select {
			case <-running:
				continue
			case <-ctx.Done():
				return nil, 0, ctx.Err()
			}
		}
		running := make(chan struct{})
		f.running = running
		f.mu.Unlock()

		start := time.Now()
		counts, err := count(ctx, keys)
		took := time.Since(start)

		f.mu.Lock()
		f.running = nil
		close(running)
		if err == nil {
			f.counts, f.at, f.took, f.before = counts, now, took, f.took
		}
		f.mu.Unlock()
		if err != nil {
			return nil, 0, err
		}
		return counts, 0, nil
	}
}

// interval is how long the kept counts are kept. Called with mu held.
func (f *fullCounts[K]) interval() time.Duration {
	took := f.took
	if f.before > 0 {
		took = min(took, f.before)
	}
	return min(max(minFullCountInterval, fullCountShare*took), maxFullCountInterval)
}

// holds reports whether the kept counts include every one of keys. Called with mu held.
func (f *fullCounts[K]) holds(keys []K) bool {
	for _, s := range keys {
		if _, ok := f.counts[s]; !ok {
			return false
		}
	}
	return true
}

// overKeys lists the keys of over, sorted, so that two calls over the same keys ask for the
// same full count.
func overKeys[K ~string](over map[K]bool) []K {
	var out []K
	for s, o := range over {
		if o {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}
