package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// raceSeed inserts n due items; one in five has an ordering key (25 keys). It returns the ids
// in order and each keyed item's key.
func raceSeed(t *testing.T, store *Store, n int) (ids []ItemID, keyOf map[ItemID]string) {
	t.Helper()
	now := time.Now().Add(-time.Second).UnixMicro()
	_, err := store.DB().Exec(`INSERT INTO switchboard_items (name, payload, state, ordering_key, next_at, created_at, updated_at)
		SELECT 'test.work', '\x7b7d', 'pending', CASE WHEN g % 5 = 0 THEN 'k' || (g % 25) END, $1::bigint + g, $1::bigint, $1::bigint
		FROM generate_series(1, $2::int) g`, now-int64(n), n)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := store.DB().Query(`SELECT id, COALESCE(ordering_key, '') FROM switchboard_items ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	keyOf = map[ItemID]string{}
	for rows.Next() {
		var id int64
		var key string
		if err := rows.Scan(&id, &key); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ItemID(id))
		if key != "" {
			keyOf[ItemID(id)] = key
		}
	}
	return ids, keyOf
}

// TestClaimConcurrentExactlyOnce: 8 claimers on 4 pools (instances) claim from one table at once,
// in batches of random size, and never complete anything. Every claimable item (each unkeyed
// item and the first item of each ordering key) must be claimed exactly once, with attempt 1,
// and nothing else.
func TestClaimConcurrentExactlyOnce(t *testing.T) {
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	be := postgresBackend(t, dsn)
	stores := []*Store{be.open(t), be.open(t), be.open(t), be.open(t)}
	ids, keyOf := raceSeed(t, stores[0], 4000)
	want := map[ItemID]bool{}
	firstOfKey := map[string]bool{}
	for _, id := range ids {
		if k, ok := keyOf[id]; ok {
			if firstOfKey[k] {
				continue
			}
			firstOfKey[k] = true
		}
		want[id] = true
	}
	var (
		mu      sync.Mutex
		claimed = map[ItemID]int{}
		dups    []string
		total   atomic.Int64
		wg      sync.WaitGroup
	)
	deadline := time.Now().Add(60 * time.Second)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			store := stores[g%len(stores)]
			owner := fmt.Sprintf("claimer-%d", g)
			empties := 0
			for total.Load() < int64(len(want)) && empties < 50 && time.Now().Before(deadline) {
				got, err := store.Claim(context.Background(), owner, time.Now(), time.Minute, 1+rand.IntN(64))
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					empties++
					continue
				}
				mu.Lock()
				for _, c := range got {
					claimed[c.ID]++
					if claimed[c.ID] > 1 {
						dups = append(dups, fmt.Sprintf("item %d claimed again by %s", c.ID, owner))
					}
					if c.Attempts != 1 || c.LeaseOwner != owner {
						dups = append(dups, fmt.Sprintf("item %d: attempts %d owner %q", c.ID, c.Attempts, c.LeaseOwner))
					}
				}
				mu.Unlock()
				total.Add(int64(len(got)))
			}
		}()
	}
	wg.Wait()
	for _, d := range dups {
		t.Error(d)
	}
	for id := range want {
		if claimed[id] != 1 {
			t.Errorf("item %d claimed %d times", id, claimed[id])
		}
	}
	for id := range claimed {
		if !want[id] {
			t.Errorf("item %d claimed while an earlier item of key %s was running", id, keyOf[id])
		}
	}
	var running, attempts int
	if err := stores[0].DB().QueryRow(`SELECT COUNT(*), COALESCE(SUM(attempts), 0) FROM switchboard_items WHERE state = 'running'`).Scan(&running, &attempts); err != nil {
		t.Fatal(err)
	}
	if running != len(want) || attempts != len(want) {
		t.Errorf("database: %d running with %d attempts, want %d and %d", running, attempts, len(want), len(want))
	}
}

// TestClaimReleaseRace: 8 claimers on 4 pools claim in batches of random size; each claimed item
// is either released (claim undone, due again at once, so other claimers race for it while it
// changes under their snapshots) or completed as succeeded. An item must never be handed to a
// claimer while another holds it, a keyed item never while an earlier item of its key is
// unfinished, every completion must be accepted, and at the end every item has succeeded once,
// with attempt count 1 and one attempt row.
func TestClaimReleaseRace(t *testing.T) {
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	be := postgresBackend(t, dsn)
	stores := []*Store{be.open(t), be.open(t), be.open(t), be.open(t)}
	ids, keyOf := raceSeed(t, stores[0], 3000)
	earlier := map[ItemID][]ItemID{} // keyed item -> earlier items of its key
	seen := map[string][]ItemID{}
	for _, id := range ids {
		if k, ok := keyOf[id]; ok {
			earlier[id] = append([]ItemID(nil), seen[k]...)
			seen[k] = append(seen[k], id)
		}
	}
	var (
		mu        sync.Mutex
		holder    = map[ItemID]string{}
		finished  = map[ItemID]bool{} // marked before the success is written
		claims    atomic.Int64
		successes atomic.Int64
		wg        sync.WaitGroup
	)
	fail := func(format string, args ...any) { t.Errorf(format, args...) }
	deadline := time.Now().Add(90 * time.Second)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			store := stores[g%len(stores)]
			owner := fmt.Sprintf("claimer-%d", g)
			for successes.Load() < int64(len(ids)) && time.Now().Before(deadline) {
				got, err := store.Claim(ctx, owner, time.Now(), time.Minute, 1+rand.IntN(32))
				if err != nil {
					fail("claim: %v", err)
					return
				}
				claims.Add(int64(len(got)))
				var cs []Completion
				mu.Lock()
				for _, c := range got {
					if h, ok := holder[c.ID]; ok {
						fail("item %d claimed by %s while %s holds it", c.ID, owner, h)
					}
					if finished[c.ID] {
						fail("item %d claimed by %s after it succeeded", c.ID, owner)
					}
					for _, e := range earlier[c.ID] {
						if !finished[e] {
							fail("item %d (key %s) claimed by %s before earlier item %d finished", c.ID, keyOf[c.ID], owner, e)
						}
					}
					holder[c.ID] = owner
				}
				for _, c := range got {
					now := time.Now()
					comp := Completion{Fence: c.Fence(), EndedAt: now}
					if rand.IntN(2) == 0 {
						comp.State, comp.NextAt = StatePending, now.Add(-time.Millisecond) // undo: due again at once
					} else {
						comp.State, comp.Outcome, comp.StartedAt = StateSucceeded, OutcomeSucceeded, now
						finished[c.ID] = true
					}
					// Forget the holder before the completion is written: once it is, another
					// claimer may take the item.
					delete(holder, c.ID)
					cs = append(cs, comp)
				}
				mu.Unlock()
				if len(cs) == 0 {
					continue
				}
				res, err := store.Complete(ctx, cs)
				if err != nil {
					fail("complete: %v", err)
					return
				}
				for i, r := range res {
					if r != nil {
						fail("completion of item %d rejected: %v", cs[i].Fence.ItemID, r)
					} else if cs[i].State == StateSucceeded {
						successes.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	if successes.Load() != int64(len(ids)) {
		t.Fatalf("%d of %d items succeeded", successes.Load(), len(ids))
	}
	// Each success is recorded on its item, once: no attempt row, and an attempt id of its own.
	var bad, attemptRows, successIDs int
	err := stores[0].DB().QueryRow(`SELECT
		(SELECT COUNT(*) FROM switchboard_items_all WHERE state <> 'succeeded' OR attempts <> 1 OR success_id IS NULL),
		(SELECT COUNT(*) FROM switchboard_attempts),
		(SELECT COUNT(DISTINCT success_id) FROM switchboard_items_all)`).Scan(&bad, &attemptRows, &successIDs)
	if err != nil {
		t.Fatal(err)
	}
	if bad != 0 || attemptRows != 0 || successIDs != len(ids) {
		t.Errorf("database: %d items not succeeded with 1 attempt recorded on them; %d attempt rows and %d success ids for %d items",
			bad, attemptRows, successIDs, len(ids))
	}
	t.Logf("%d items, %d claims", len(ids), claims.Load())
}
