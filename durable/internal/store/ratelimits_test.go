package store

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

func lease(t testing.TB, s *Store, l RateLimitLease) RateLimitGrant {
	t.Helper()
	g, err := s.LeaseRateLimit(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// Leases take consecutive permits of the limit's timeline, all or none, never further ahead
// than the horizon; a quiet limit gives its burst from now.
func TestRateLimitLease(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		l := RateLimitLease{Name: "n", Key: "k", Interval: 10 * time.Millisecond, Burst: 3, Permits: 5, Horizon: time.Minute}
		g := lease(t, s, l)
		// A new limit: its first permit is its burst's tolerance before now.
		if g.Permits != 5 || !g.First.Equal(g.Now.Add(-20*time.Millisecond)) {
			t.Fatalf("%+v", g)
		}
		g2 := lease(t, s, l)
		if g2.Permits != 5 || !g2.First.Equal(g.First.Add(50*time.Millisecond)) {
			t.Fatalf("%+v after %+v", g2, g)
		}
		// None when the last would come past the horizon: the next free permit is told.
		l.Horizon, l.Permits = 0, 50
		g3 := lease(t, s, l)
		if g3.Permits != 0 || !g3.Next.Equal(g.First.Add(100*time.Millisecond)) {
			t.Fatalf("%+v", g3)
		}
		// Another key and another name are other limits.
		l.Permits, l.Horizon = 1, time.Minute
		for _, other := range []RateLimitLease{{Name: "n", Key: "k2"}, {Name: "n2", Key: "k"}} {
			l2 := l
			l2.Name, l2.Key = other.Name, other.Key
			if g := lease(t, s, l2); g.Permits != 1 || g.First.After(g.Now) {
				t.Fatalf("%+v: %+v", other, g)
			}
		}
	})
}

// Instances leasing at once never get the same permit.
func TestRateLimitLeaseConcurrent(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		l := RateLimitLease{Name: "n", Key: "k", Interval: time.Millisecond, Burst: 1, Permits: 3, Horizon: time.Hour}
		var mu sync.Mutex
		seen := map[int64]bool{}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 10 {
					g, err := s.LeaseRateLimit(context.Background(), l)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					for i := range g.Permits {
						at := g.First.Add(time.Duration(i) * l.Interval).UnixNano()
						if seen[at] {
							t.Errorf("permit at %d leased twice", at)
						}
						seen[at] = true
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(seen) != 120 {
			t.Fatal(len(seen))
		}
	})
}

func TestRateLimitLessees(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		for i, inst := range []string{"a", "b", "a"} {
			n, err := s.RateLimitLessees(ctx, "n", "k", inst, time.Minute, 0)
			if err != nil || n != min(i+1, 2) {
				t.Fatal(i, n, err)
			}
		}
		if n, err := s.RateLimitLessees(ctx, "n", "other", "c", time.Minute, time.Hour); err != nil || n != 1 {
			t.Fatal(n, err)
		}
		// A prune of those not seen within a microsecond deletes a and b; b is then seen again.
		// SQLite's clock reads milliseconds: within the millisecond of the last sighting the
		// prune finds none older, so it is asked again until the database's clock has moved on.
		deadline := time.Now().Add(5 * time.Second)
		for {
			n, err := s.RateLimitLessees(ctx, "n", "k", "b", time.Minute, time.Microsecond)
			if err == nil && n == 1 {
				break
			}
			if err != nil || time.Now().After(deadline) {
				t.Fatal(n, err)
			}
		}
	})
}

func TestRateLimitLeaseRefusesBadInput(t *testing.T) {
	s := sqliteBackend(t).open(t)
	_, err := s.LeaseRateLimit(context.Background(), RateLimitLease{Key: "k\x00"})
	for _, want := range []string{"empty name", "key", "interval", "burst", "permits"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%v lacks %q", err, want)
		}
	}
}
