package breaker

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

var errReuse = errors.New("dependency down")

// A miss past MaxBreakers that evicts allocates nothing once the registry is warm: the new
// key reuses an evicted breaker, the shard maps keep their room, and the sweep its buffer.
func TestKeyMissAllocatesNothing(t *testing.T) {
	const bound = 1_000
	r := NewRegistry(Config{MaxBreakers: bound})
	evicted := 0
	r.AddEvictionListener(func(string) { evicted++ })
	keys := make([]string, 20*bound)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	i := 0
	miss := func() {
		p, err := r.Gate(keys[i%len(keys)])
		if err != nil {
			t.Fatal(err)
		}
		p.Done(context.Background(), nil)
		i++
	}
	for range 2 * len(keys) { // warm-up: every key once, the free list and maps at size
		miss()
	}
	before := evicted
	// Every allocation counted, not an average rounded down as testing.AllocsPerRun gives it.
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for range 5 * bound {
		miss()
	}
	runtime.ReadMemStats(&m1)
	if n := m1.Mallocs - m0.Mallocs; n != 0 {
		t.Fatalf("%d misses allocated %d times, want 0", 5*bound, n)
	}
	if evicted == before {
		t.Fatal("no miss evicted")
	}
	if n := r.Len(); n > bound*5/4 {
		t.Fatalf("%d breakers held, more than 1.25 × MaxBreakers", n)
	}
}

// evictNow sweeps key's breaker out of r: the first sweep clears its mark, the second
// evicts it.
func evictNow(t *testing.T, r *Registry, key string) {
	t.Helper()
	r.Sweep()
	r.Sweep()
	if _, err := r.Get(key); err == nil {
		t.Fatalf("%s still held after two sweeps", key)
	}
}

// reusedPair returns a registry and the permits of "old", since evicted, and of "new", whose
// breaker is old's, reused.
func reusedPair(t *testing.T) (r *Registry, old, fresh Permit) {
	t.Helper()
	r = NewRegistry(Config{FailureThreshold: 1, MaxBreakers: -1})
	old, err := r.Gate("old")
	if err != nil {
		t.Fatal(err)
	}
	evictNow(t, r, "old")
	if fresh, err = r.Gate("new"); err != nil {
		t.Fatal(err)
	}
	if fresh.b != old.b {
		t.Fatal("the new key did not reuse the evicted breaker")
	}
	return r, old, fresh
}

// A call holding a permit of a breaker that was evicted and then reused for another key never
// touches the new key's breaker: its failure goes to its own key's live breaker, as it would
// had the breaker not been reused, and a holder two reuses behind is ignored.
func TestStalePermitOfReusedBreaker(t *testing.T) {
	ctx := context.Background()
	r, old, fresh := reusedPair(t)
	if fresh.word == old.word {
		t.Fatal("the reused breaker kept its generation")
	}

	old.Done(ctx, errReuse) // FailureThreshold 1: opens old's live breaker, not new's
	if s, err := r.Get("new"); err != nil || s.State != StateClosed || s.Failures != 0 {
		t.Fatalf("new after old's stale failure: %+v, %v; want closed, 0 failures", s, err)
	}
	if s, err := r.Get("old"); err != nil || s.State != StateOpen {
		t.Fatalf("old after its forwarded failure: %+v, %v; want open", s, err)
	}
	if err := r.Reset("old"); err != nil {
		t.Fatal(err)
	}
	r.Declare("old") // kept from now on: only new's breaker is evicted and free below

	// Reused twice: the first holder is two evictions behind and says nothing any more.
	evictNow(t, r, "new")
	third, err := r.Gate("third")
	if err != nil {
		t.Fatal(err)
	}
	if third.b != old.b {
		t.Fatal("the third key did not reuse the breaker")
	}
	old.Failure()
	fresh.Failure() // one eviction behind: forwarded to new's live breaker
	if s, err := r.Get("third"); err != nil || s.State != StateClosed || s.Failures != 0 {
		t.Fatalf("third after stale failures: %+v, %v; want closed, 0 failures", s, err)
	}
	if s, err := r.Get("old"); err != nil || s.State != StateClosed {
		t.Fatalf("old after a failure two reuses late: %+v, %v; want closed", s, err)
	}
	if s, err := r.Get("new"); err != nil || s.State != StateOpen {
		t.Fatalf("new after its forwarded failure: %+v, %v; want open", s, err)
	}
	third.Done(ctx, nil)
}

// A failure through the Behavior of a call whose breaker was reused meanwhile reports the
// TrippedError of its own key.
func TestTrippedErrorNamesOwnKeyAfterReuse(t *testing.T) {
	_, p, _ := reusedPair(t)
	var te *TrippedError
	if err := p.finish(context.Background(), errReuse); !errors.As(err, &te) || te.Key != "old" {
		t.Fatalf("finish = %v, want a TrippedError of old", err)
	}
}

type reuseClock struct{ ns atomic.Int64 }

func (c *reuseClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *reuseClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
func (c *reuseClock) After(time.Duration) (<-chan time.Time, func() bool) {
	return nil, func() bool { return false }
}

// A probe that reports after its breaker was evicted and reused for another key is not taken
// for a late probe of the new key.
func TestLateProbeOfReusedBreaker(t *testing.T) {
	clock := &reuseClock{}
	var late []string
	r := NewRegistry(Config{
		FailureThreshold: 1, OpenDuration: time.Second, ProbeTimeout: time.Second, MaxBreakers: -1, Clock: clock,
		OnLateProbe: []func(LateProbe){func(l LateProbe) { late = append(late, l.Key) }},
	})
	p, _ := r.Gate("old")
	p.Failure() // open
	clock.Advance(time.Second)
	probe, err := r.Gate("old")
	if err != nil || !probe.Probe() {
		t.Fatalf("gate after the open time: %+v, %v; want a probe", probe, err)
	}
	clock.Advance(time.Second)
	if s, _ := r.Get("old"); s.State != StateOpen { // the probe timed out
		t.Fatalf("old: %+v, want open", s)
	}
	clock.Advance(time.Second)
	evictNow(t, r, "old")
	if fresh, _ := r.Gate("new"); fresh.b != probe.b {
		t.Fatal("the new key did not reuse the evicted breaker")
	}
	probe.Success()
	if len(late) != 0 {
		t.Fatalf("late probes heard: %v, want none", late)
	}
}

// A key whose breaker was cached for lock-free lookups, then evicted and reused for another
// key, finds a breaker of its own: its calls never reach the other key's breaker.
func TestCachedBreakerEvictedAndReused(t *testing.T) {
	r := NewRegistry(Config{FailureThreshold: 1, MaxBreakers: -1})
	for range 2 { // the second lookup caches the breaker
		p, err := r.Gate("old")
		if err != nil {
			t.Fatal(err)
		}
		p.Success()
	}
	p, _ := r.Gate("old")
	evictNow(t, r, "old")
	fresh, _ := r.Gate("new")
	if fresh.b != p.b {
		t.Fatal("the new key did not reuse the evicted breaker")
	}
	q, err := r.Gate("old")
	if err != nil {
		t.Fatal(err)
	}
	if q.b == fresh.b {
		t.Fatal("old's lookup found new's breaker")
	}
	q.Failure() // FailureThreshold 1
	if s, _ := r.Get("new"); s.State != StateClosed || s.Failures != 0 {
		t.Fatalf("new after old's failure: %+v, want closed, 0 failures", s)
	}
	if s, _ := r.Get("old"); s.State != StateOpen {
		t.Fatalf("old after its failure: %+v, want open", s)
	}
}

// Every call of a cached key reads its cache entry, from every P: an entry fills a cache line of
// its own, so that no object written often shares it (testing.PB's counter did, unpadded, and
// two Ps calling one key ran at a third of their speed).
func TestLinesOfTheHotPath(t *testing.T) {
	if got := unsafe.Sizeof(cacheEntry{}); got != cacheLine {
		t.Fatalf("a cache entry is %d bytes, want %d", got, cacheLine)
	}
	// A breaker's size a multiple of a line (and a size class of the allocator): every breaker
	// starts a line, and a sweep or reuse reads the lines it expects.
	if got := unsafe.Sizeof(breaker{}); got%cacheLine != 0 || got > 3*cacheLine {
		t.Fatalf("a breaker is %d bytes, want a multiple of %d up to %d", got, cacheLine, 3*cacheLine)
	}
	if got := unsafe.Offsetof(breaker{}.hash); got != cacheLine {
		t.Fatalf("a breaker's hash is at %d, want %d: its first line holds what the closed path and a sweep's checks read", got, cacheLine)
	}
}

// Two keys of one shard with one hash (which a 64-bit hash makes all but impossible, so the
// test places them by hand): each finds its own breaker, a snapshot lists both, and sweeps
// evict both, telling the eviction listeners each key.
func TestShardKeysSharingAHash(t *testing.T) {
	r := NewRegistry(Config{})
	var gone []string
	r.AddEvictionListener(func(key string) { gone = append(gone, key) })
	sh, h := &r.shards[5], uint64(7*shardCount+5)
	add := func(key string) *breaker {
		sh.mu.Lock()
		defer sh.mu.Unlock()
		b := r.addLocked(sh, h, key)
		r.size.Add(1)
		return b
	}
	x, y := add("x"), add("y")
	sh.mu.Lock()
	if sh.lookupLocked(h, "x") != x || sh.lookupLocked(h, "y") != y || sh.lookupLocked(h, "z") != nil {
		t.Fatal("a key sharing its hash with another found the wrong breaker")
	}
	sh.mu.Unlock()
	if s := r.Snapshot(); len(s) != 2 || s[0].Key != "x" || s[1].Key != "y" {
		t.Fatalf("Snapshot = %+v, want x and y", s)
	}
	r.Sweep() // both were made since the previous sweep
	if n := r.Sweep(); n != 2 || r.Len() != 0 {
		t.Fatalf("the second sweep evicted %d, Len %d; want 2 and 0", n, r.Len())
	}
	slices.Sort(gone)
	if !slices.Equal(gone, []string{"x", "y"}) {
		t.Fatalf("eviction listeners heard %q, want x and y", gone)
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if len(sh.m) != 0 || len(sh.more) != 0 {
		t.Fatalf("the shard still holds %d + %d breakers", len(sh.m), len(sh.more))
	}
}
