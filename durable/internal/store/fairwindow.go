package store

import "sync"

// fairKeyWindow is how many fairness keys one fair claim visits at most. A claim probes each
// key it visits (is an item of it due?), so a claim that visited every key with pending items
// cost an index descent or two per key: tens of milliseconds with ten thousand endpoints whose
// items wait on open breakers. A window of 128 keeps the walk near a millisecond on PostgreSQL
// and is several times a claim's usual size (the scheduler claims up to its free workers), so
// that a claim still spreads over as many keys as it has items to take.
const fairKeyWindow = 128

// fairWindow is one fair claim's window of fairness keys: the claim visits at most
// fairKeyWindow keys, from the first key after after ("" for the first key of all), and sets
// next, with reported, to where the next claim of the Store starts: the last key it visited,
// or "" when it reached the last key. The keys thus take turns by windows: each key comes into
// a window once in every ceil(keys / fairKeyWindow) claims.
type fairWindow struct {
	after    string
	next     string
	reported bool
}

// fairCursor is a Store's position in the walk of the fairness keys, shared by its claims.
type fairCursor struct {
	mu    sync.Mutex
	after string
}

// open returns the window of the next claim.
func (c *fairCursor) open() *fairWindow {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &fairWindow{after: c.after}
}

// close moves the cursor to where w's claim says the next starts. A claim that took nothing
// says nothing, and the cursor stays: nothing was due in its window, and nothing elsewhere.
func (c *fairCursor) close(w *fairWindow) {
	if w == nil || !w.reported {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.after = w.next
}

// fairArgs splits the arguments of a claim into those of its statement (claimArgs) and its
// window, if it is the fair claim (the Store appends the window to the fair claim's).
func fairArgs(args []any) ([]any, *fairWindow) {
	if len(args) > 0 {
		if w, ok := args[len(args)-1].(*fairWindow); ok {
			return args[: len(args)-1 : len(args)-1], w
		}
	}
	return args, nil
}
