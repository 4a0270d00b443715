package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable/internal/pgtest"
)

// The lock order (docs/architecture.md, "Lock order"): every statement that locks several
// item rows locks them in ascending id, whatever order its caller gives them in or its plan
// reads them in. The tests below make two such statements collide on the same rows, on
// PostgreSQL with a third transaction holding the row in the middle of those both lock, so
// that each has locked what it locks before that row and waits for it when the third one
// ends: two statements locking in opposite orders then deadlock every time.

// lockFixture is the items of one lock-order case: running items (claimed by lockOwner, and
// parked on key, as a claim leaves an item's key) interleaved by id with pending items parked
// on key and due later. Both kinds are due in descending id order, so that a statement reading
// them through the parked index (parked_key, next_at, id) meets them in descending id.
type lockFixture struct {
	key     string
	now     time.Time
	running []Claimed // in id order
	pending []ItemID  // in id order
}

const lockOwner = "lock-owner"

func (f *lockFixture) runningIDs() []ItemID {
	out := make([]ItemID, len(f.running))
	for i, c := range f.running {
		out[i] = c.ID
	}
	return out
}

func (f *lockFixture) all() []ItemID {
	return slices.Sorted(slices.Values(append(f.runningIDs(), f.pending...)))
}

// lockStatement is a statement family that locks several item rows.
type lockStatement struct {
	name string
	// setup prepares what the statement needs besides the items (a pause, a limit).
	setup func(ctx context.Context, s *Store, f *lockFixture) error
	// rows are the items the statement locks.
	rows func(f *lockFixture) []ItemID
	// run runs it, given its items (where the caller gives them) in descending id order when
	// desc is set, and returns an error for anything it did not do.
	run func(ctx context.Context, s *Store, f *lockFixture, desc bool) error
}

// ordered returns ids in descending order when desc is set.
func ordered[T any](xs []T, desc bool) []T {
	out := slices.Clone(xs)
	if desc {
		slices.Reverse(out)
	}
	return out
}

// lockCompletions completes every running item of f: succeeded, failed and parked again, and
// dead (with its dead letter), in turn.
func lockCompletions(f *lockFixture, desc bool) []Completion {
	var cs []Completion
	for i, c := range f.running {
		comp := Completion{Fence: c.Fence(), StartedAt: f.now, EndedAt: f.now, Outcome: OutcomeSucceeded, State: StateSucceeded}
		switch i % 3 {
		case 1:
			comp.State, comp.Outcome, comp.Error, comp.NextAt, comp.ParkedKey = StatePending, OutcomeFailed, "boom", f.now.Add(time.Hour), f.key
		case 2:
			comp.State, comp.Outcome, comp.Error = StateDead, OutcomeFailed, "gone"
		}
		cs = append(cs, comp)
	}
	return ordered(cs, desc)
}

func accepted(results []error) error {
	return errors.Join(results...)
}

var lockStatements = []lockStatement{
	{
		name: "complete",
		rows: (*lockFixture).runningIDs,
		run: func(ctx context.Context, s *Store, f *lockFixture, desc bool) error {
			res, err := s.Complete(ctx, lockCompletions(f, desc))
			if err != nil {
				return err
			}
			return accepted(res)
		},
	},
	{
		name: "complete_and_claim",
		rows: (*lockFixture).runningIDs,
		run: func(ctx context.Context, s *Store, f *lockFixture, desc bool) error {
			res, _, err := s.CompleteAndClaim(ctx, lockCompletions(f, desc), "lock-claimer", f.now, time.Minute, 4, false)
			if err != nil {
				return err
			}
			return accepted(res)
		},
	},
	{
		name: "extend",
		rows: (*lockFixture).runningIDs,
		run: func(ctx context.Context, s *Store, f *lockFixture, desc bool) error {
			return s.Extend(ctx, lockOwner, ordered(f.runningIDs(), desc), f.now.Add(time.Hour))
		},
	},
	{
		name: "unpark",
		rows: (*lockFixture).all,
		run: func(ctx context.Context, s *Store, f *lockFixture, _ bool) error {
			_, err := s.Unpark(ctx, []string{f.key}, f.now)
			return err
		},
	},
	{
		name: "repark",
		rows: (*lockFixture).all,
		run: func(ctx context.Context, s *Store, f *lockFixture, _ bool) error {
			_, err := s.Repark(ctx, f.key, f.now.Add(time.Minute), time.Second)
			return err
		},
	},
	{
		name: "resume",
		setup: func(ctx context.Context, s *Store, f *lockFixture) error {
			return s.SetPause(ctx, PauseRow{Kind: PauseBreakerKey, Target: f.key, Actor: "test", CreatedAt: f.now}, nil)
		},
		rows: (*lockFixture).all,
		run: func(ctx context.Context, s *Store, f *lockFixture, _ bool) error {
			_, err := s.DeletePause(ctx, PauseBreakerKey, f.key, f.now, nil)
			return err
		},
	},
	{
		name: "wake_limited",
		setup: func(ctx context.Context, s *Store, f *lockFixture) error {
			return s.SetLimit(ctx, LimitRow{Key: f.key, Max: 100, Actor: "test", CreatedAt: f.now}, nil)
		},
		rows: func(f *lockFixture) []ItemID { return f.pending },
		run: func(ctx context.Context, s *Store, f *lockFixture, _ bool) error {
			_, err := s.WakeLimited(ctx, f.key, f.now)
			return err
		},
	},
}

// lockPairs are the pairs of statements that lock some rows in common, each run with the
// items its caller gives in ascending and in descending order.
func lockPairs() [][2]lockStatement {
	byName := map[string]lockStatement{}
	for _, st := range lockStatements {
		byName[st.name] = st
	}
	pairs := [][2]string{
		{"complete", "unpark"}, {"complete", "repark"}, {"complete", "resume"}, {"complete", "extend"},
		{"complete_and_claim", "unpark"}, {"complete_and_claim", "repark"},
		{"extend", "unpark"}, {"extend", "repark"}, {"extend", "resume"},
		{"unpark", "unpark"}, {"unpark", "repark"}, {"unpark", "wake_limited"}, {"repark", "wake_limited"},
		{"repark", "repark"}, {"resume", "repark"}, {"resume", "wake_limited"},
	}
	out := make([][2]lockStatement, len(pairs))
	for i, p := range pairs {
		out[i] = [2]lockStatement{byName[p[0]], byName[p[1]]}
	}
	return out
}

// seedLockFixture empties the store's item tables and inserts the items of a case.
func seedLockFixture(t *testing.T, s *Store, key string) *lockFixture {
	t.Helper()
	ctx := context.Background()
	for _, table := range []string{"switchboard_dead_letter_events", "switchboard_dead_letters", "switchboard_attempts", "switchboard_items",
		"switchboard_pauses", "switchboard_concurrency_limits"} {
		if _, err := s.DB().ExecContext(ctx, "DELETE FROM "+table); err != nil {
			t.Fatal(err)
		}
	}
	f := &lockFixture{key: key, now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	const n = 12
	for i := range n {
		it := NewItem{Name: "test.work", Payload: []byte(`{}`), ParkedKey: key, Now: f.now}
		if i%2 == 0 {
			it.NextAt = f.now.Add(-time.Duration(i+1) * time.Second) // due: claimed below
		} else {
			it.NextAt = f.now.Add(time.Hour - time.Duration(i)*time.Second)
		}
		id := must[ItemID](t)(func() (ItemID, error) { id, _, err := s.Enqueue(ctx, it); return id, err }())
		if i%2 == 1 {
			f.pending = append(f.pending, id)
		}
	}
	f.running = must[[]Claimed](t)(s.Claim(ctx, lockOwner, f.now, time.Minute, n))
	if len(f.running) != n/2 {
		t.Fatalf("claimed %d items, want %d", len(f.running), n/2)
	}
	for _, c := range f.running {
		if c.ParkedKey != key {
			t.Fatalf("claimed item %d has parked key %q, want %q (a claim keeps the key)", c.ID, c.ParkedKey, key)
		}
	}
	return f
}

// withApplicationName returns dsn (a URL or key=value DSN) with application_name set to name,
// so that the sessions of a test can be found in pg_stat_activity.
func withApplicationName(t *testing.T, dsn, name string) string {
	t.Helper()
	if !strings.Contains(dsn, "://") {
		return dsn + " application_name=" + name
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	v := u.Query()
	v.Set("application_name", name)
	u.RawQuery = v.Encode()
	return u.String()
}

// TestLockOrderPairs runs each pair of statements that lock several item rows at once over the
// same rows, the caller's order ascending for one and descending for the other, and both
// ways round. On PostgreSQL a third transaction holds the row in the middle of the rows both
// lock until both statements wait (one for it, the other for it or for the first); then it
// ends. Neither may fail: a deadlock (SQLSTATE 40P01) is two statements that took rows in
// different orders. On SQLite the pair runs at once from two pools, as two processes would.
func TestLockOrderPairs(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		var (
			a, bs  *Store
			holder *sql.DB
			app    string
		)
		if b.name == "postgres" {
			var suffix [4]byte
			_, _ = rand.Read(suffix[:])
			app = "sblockorder_" + hex.EncodeToString(suffix[:])
			target := pgtest.Schema(t, pgDSN(t), "sbtest_")
			open := func() *Store {
				db := pgtest.Open(t, withApplicationName(t, target, app))
				if err := Migrate(context.Background(), db, Postgres, nil); err != nil {
					t.Fatal(err)
				}
				return New(db, Postgres, false)
			}
			a, bs = open(), open()
			holder = pgtest.Open(t, target)
		} else {
			a, bs = b.open(t), b.open(t)
		}
		for _, p := range lockPairs() {
			for _, desc := range []bool{false, true} {
				first, second := p[0], p[1]
				name := fmt.Sprintf("%s_desc=%v/%s_desc=%v", first.name, desc, second.name, !desc)
				t.Run(name, func(t *testing.T) {
					f := seedLockFixture(t, a, "key-"+first.name+"-"+second.name)
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					for _, st := range []lockStatement{first, second} {
						if st.setup != nil {
							if err := st.setup(ctx, a, f); err != nil {
								t.Fatal(err)
							}
						}
					}
					var release func()
					if holder != nil {
						common := slices.DeleteFunc(first.rows(f), func(id ItemID) bool { return !slices.Contains(second.rows(f), id) })
						release = holdRow(t, holder, common[len(common)/2])
					}
					errs := make([]error, 2)
					var wg sync.WaitGroup
					wg.Go(func() { errs[0] = first.run(ctx, a, f, desc) })
					wg.Go(func() { errs[1] = second.run(ctx, bs, f, !desc) })
					if release != nil {
						waitForLockWaits(t, holder, app, 2)
						release()
					}
					wg.Wait()
					for i, st := range []lockStatement{first, second} {
						if errs[i] != nil {
							t.Errorf("%s: %v", st.name, errs[i])
						}
					}
				})
			}
		}
	})
}

// holdRow locks the item id in a transaction of its own on db, and returns the function that
// ends it.
func holdRow(t *testing.T, db *sql.DB, id ItemID) func() {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	var one int
	if err := tx.QueryRow("SELECT 1 FROM switchboard_items WHERE id = $1 FOR UPDATE", int64(id)).Scan(&one); err != nil {
		_ = tx.Rollback()
		t.Fatal(err)
	}
	var once sync.Once
	release := func() {
		once.Do(func() {
			if err := tx.Rollback(); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(release)
	return release
}

// waitForLockWaits waits until n sessions of application app wait for a lock.
func waitForLockWaits(t *testing.T, db *sql.DB, app string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		var waiting int
		if err := db.QueryRow(`SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).
			Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions wait for a lock after 20 s, want %d", waiting, n)
		}
		<-tick.C
	}
}
