package durable

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable/internal/store"
)

func claimedOf(keys ...string) []store.Claimed {
	out := make([]store.Claimed, len(keys))
	for i, k := range keys {
		out[i].FairnessKey = k
	}
	return out
}

// The counts cover five minutes: a claim older than that is gone, one within it is counted,
// and the busiest keys come first with their shares.
func TestClaimSharesWindow(t *testing.T) {
	var c claimShares
	t0 := time.Unix(1_000_000, 0)
	if got := c.top(10, t0); got.Window != 0 || got.Total != 0 || len(got.Keys) != 0 {
		t.Fatalf("before any claim: %+v", got)
	}
	c.add(claimedOf("old", "old"), t0)
	c.add(claimedOf("a", "a", "b"), t0.Add(4*time.Minute))
	c.add(claimedOf("a", "c"), t0.Add(4*time.Minute+30*time.Second))
	got := c.top(10, t0.Add(4*time.Minute+45*time.Second))
	if got.Total != 7 || len(got.Keys) != 4 || got.Keys[0].Key != "a" || got.Keys[0].Claims != 3 || got.Keys[1].Key != "old" {
		t.Fatalf("within five minutes: %+v", got)
	}
	if got.Window != 4*time.Minute+45*time.Second {
		t.Errorf("window %v, want the time since the first claim", got.Window)
	}
	got = c.top(2, t0.Add(5*time.Minute+10*time.Second))
	want := KeyShares{Window: 5 * time.Minute, Total: 5, Others: 1,
		Keys: []KeyShare{{Key: "a", Claims: 3, Share: 0.6}, {Key: "b", Claims: 1, Share: 0.2}}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("past the first claim's five minutes:\n got %+v\nwant %+v", got, want)
	}
	// A bucket's slot is reused for a later span: its old counts do not come back.
	c.add(claimedOf("d"), t0.Add(10*time.Minute))
	got = c.top(10, t0.Add(10*time.Minute))
	if got.Total != 1 || got.Keys[0].Key != "d" {
		t.Fatalf("after five idle minutes: %+v", got)
	}
}

// One bucket counts up to shareKeysPerBucket distinct keys; the claims of the keys past those
// are counted in Others, and the keys already counted go on being counted.
func TestClaimSharesBoundsItsKeys(t *testing.T) {
	var c claimShares
	now := time.Unix(2_000_000, 0)
	keys := make([]string, shareKeysPerBucket+5)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
	}
	c.add(claimedOf(keys...), now)
	c.add(claimedOf("k0", "k0"), now)
	got := c.top(1, now)
	if got.Total != len(keys)+2 || got.Keys[0].Key != "k0" || got.Keys[0].Claims != 3 || got.Others != len(keys)-1 {
		t.Fatalf("Total %d, Others %d, Keys %+v; want %d, %d, k0 with 3", got.Total, got.Others, got.Keys, len(keys)+2, len(keys)-1)
	}
	if n := len(c.buckets[(now.Unix()/10)%shareBuckets].keys); n != shareKeysPerBucket {
		t.Errorf("the bucket holds %d keys, want %d", n, shareKeysPerBucket)
	}
}
