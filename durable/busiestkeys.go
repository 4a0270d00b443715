package durable

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/switchboard-go/switchboard/durable/internal/store"
)

// KeyShares is how the items this instance claimed lately were shared among their fairness
// keys (WithFairnessKey): the busiest keys and each one's share of the claims. A key whose
// share stays far above the others' while its backlog grows is the one the fair claim holds
// back for the rest.
type KeyShares struct {
	// Window is the span the counts cover: the last five minutes, or the time since this
	// queue's first claim when that is shorter. Zero: the queue has claimed nothing yet.
	Window time.Duration
	// Total is the number of items claimed in Window.
	Total int
	// Keys are the busiest keys, most claims first (equal counts by key), as many as asked.
	Keys []KeyShare
	// Others is the claims of the keys not in Keys.
	Others int
}

// KeyShare is one fairness key's part of KeyShares.
type KeyShare struct {
	// Key is the fairness key.
	Key string
	// Claims is the number of its items claimed in the window.
	Claims int
	// Share is Claims divided by KeyShares.Total: 0 to 1.
	Share float64
}

// BusiestKeys returns this instance's claims of the last five minutes by fairness key: the n
// busiest keys (at most 100; n below 1 asks for 10) and their shares. It counts the claims of
// this process's scheduler only; the fleet's shares are the sum of its instances'. It counts
// claims, not items: an item claimed again (its retry, or after a breaker, pause or limit refused
// it and parked it) counts each time, so a key whose items are refused often ranks above its
// share of the work. Each ten
// seconds of the window counts up to 1,000 distinct keys; the claims of the keys beyond those
// are in Others.
func (q *Queue) BusiestKeys(n int) KeyShares {
	if n < 1 {
		n = 10
	}
	return q.shares.top(min(n, maxBusiestKeys), q.clock.Now())
}

const (
	// maxBusiestKeys is the most keys BusiestKeys lists.
	maxBusiestKeys = 100
	// shareBucket is the span of one bucket of the claim counts, and shareBuckets how many the
	// window holds: five minutes, long enough to see who a recovery's backlog crowds, short
	// enough to show a burst that has ended as ended.
	shareBucket  = 10 * time.Second
	shareBuckets = 30
	// shareKeysPerBucket bounds the memory of the counts: a queue whose items have a key each
	// (a key per record, say) would otherwise keep every key of five minutes.
	shareKeysPerBucket = 1000
)

// claimShares counts claims by fairness key in buckets of shareBucket.
type claimShares struct {
	mu      sync.Mutex
	first   time.Time // the first claim counted, the window's earliest start
	buckets [shareBuckets]shareCount
}

// shareCount is one bucket: the claims of its span by key, and those of keys past the cap.
type shareCount struct {
	span   int64 // the bucket's span: its start's Unix time divided by shareBucket
	keys   map[string]int
	others int
}

// add counts claimed, claimed at now.
func (c *claimShares) add(claimed []store.Claimed, now time.Time) {
	if len(claimed) == 0 {
		return
	}
	span := now.Unix() / int64(shareBucket/time.Second)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.first.IsZero() {
		c.first = now
	}
	b := &c.buckets[span%shareBuckets]
	if b.span != span || b.keys == nil {
		b.span, b.others = span, 0
		if b.keys == nil {
			b.keys = make(map[string]int)
		} else {
			clear(b.keys)
		}
	}
	for i := range claimed {
		k := claimed[i].FairnessKey
		if _, ok := b.keys[k]; ok || len(b.keys) < shareKeysPerBucket {
			b.keys[k]++
		} else {
			b.others++
		}
	}
}

// top sums the buckets within the window ending at now and returns the n busiest keys.
func (c *claimShares) top(n int, now time.Time) KeyShares {
	span := now.Unix() / int64(shareBucket/time.Second)
	sum := make(map[string]int)
	var out KeyShares
	c.mu.Lock()
	if !c.first.IsZero() {
		out.Window = min(now.Sub(c.first), shareBucket*shareBuckets)
	}
	for i := range c.buckets {
		b := &c.buckets[i]
		if b.keys == nil || b.span <= span-shareBuckets || b.span > span {
			continue
		}
		for k, v := range b.keys {
			sum[k] += v
			out.Total += v
		}
		out.Others += b.others
		out.Total += b.others
	}
	c.mu.Unlock()
	keys := make([]KeyShare, 0, len(sum))
	for k, v := range sum {
		keys = append(keys, KeyShare{Key: k, Claims: v})
	}
	slices.SortFunc(keys, func(a, b KeyShare) int {
		return cmp.Or(cmp.Compare(b.Claims, a.Claims), cmp.Compare(a.Key, b.Key))
	})
	for _, k := range keys[min(n, len(keys)):] {
		out.Others += k.Claims
	}
	out.Keys = keys[:min(n, len(keys))]
	for i := range out.Keys {
		out.Keys[i].Share = float64(out.Keys[i].Claims) / float64(out.Total)
	}
	return out
}
