package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable/driver"
	"github.com/switchboard-go/switchboard/durable/record"
)

// testClaimFairness: a claim takes the due items of the fairness keys in turn (a key's backlog
// takes one turn like a key with one item), fills the rest of the claim oldest first when the
// keys have fewer due items than turns, and within a key takes a higher priority first by its
// head start, never before the item is due. Each claimed item carries its fairness key.
func testClaimFairness(t *testing.T, open OpenFunc) {
	ex := openExecutor(t, open(t))
	ctx := context.Background()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	add := func(key string, n, priority int, due time.Time) []record.ItemID {
		t.Helper()
		ids := make([]record.ItemID, n)
		for i := range ids {
			id, _, err := ex.Enqueue(ctx, driver.NewItem{Name: workName, Payload: []byte(`{"n":1}`), NextAt: due, Now: now,
				FairnessKey: key, Priority: priority, HeadStart: time.Duration(priority) * time.Minute})
			if err != nil {
				t.Fatalf("Enqueue: %v", err)
			}
			ids[i] = id
		}
		return ids
	}
	keyOf := map[record.ItemID]string{}
	for _, id := range add("A", 20, 0, now) {
		keyOf[id] = "A"
	}
	for _, id := range add("B", 2, 0, now.Add(time.Second)) {
		keyOf[id] = "B"
	}
	add("C", 5, 9, now.Add(time.Hour)) // not due: no turn, not claimed
	at := now.Add(time.Minute)
	claim := func(limit int) map[string]int {
		t.Helper()
		cs, err := ex.Claim(ctx, "a", at, time.Minute, limit)
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		n := map[string]int{}
		for _, c := range cs {
			if c.FairnessKey != keyOf[c.ID] {
				t.Fatalf("claimed item %d carries fairness key %q; want %q (Claimed.FairnessKey)", c.ID, c.FairnessKey, keyOf[c.ID])
			}
			n[keyOf[c.ID]]++
		}
		return n
	}
	if n := claim(4); n["A"] != 2 || n["B"] != 2 || len(n) != 2 {
		t.Fatalf("a claim of 4 with keys A (20 due) and B (2 due, later): %v; want 2 of each", n)
	}
	if n := claim(6); n["A"] != 6 || len(n) != 1 {
		t.Fatalf("a claim of 6 with only A due: %v; want 6 of A", n)
	}
	urgent := add("A", 1, 9, at)[0]
	cs, err := ex.Claim(ctx, "a", at, time.Minute, 1)
	if err != nil || len(cs) != 1 || cs[0].ID != urgent {
		t.Fatalf("a claim of 1 after a priority 9 item of A came due: %+v, %v; want item %d first", cs, err, urgent)
	}
}
