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

// The row holds no rate: each lease takes its permits at its own request's interval and burst,
// so two keys of one name keep their own rates, and a rate changed between deployments (or
// differing while one is under way) takes the timeline on from where the other left it: no
// permit is leased twice and none is skipped. (Each lease takes seconds of permits, so that the
// timeline stays ahead of the database's now however slowly the test runs.)
func TestRateLimitLeaseKeepsEachRequestsRate(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		sms := RateLimitLease{Name: "n", Key: "sms", Interval: 20 * time.Millisecond, Burst: 1, Permits: 100, Horizon: time.Minute}
		email := RateLimitLease{Name: "n", Key: "email", Interval: 10 * time.Millisecond, Burst: 1, Permits: 100, Horizon: time.Minute}
		gs, ge := lease(t, s, sms), lease(t, s, email)
		gs2, ge2 := lease(t, s, sms), lease(t, s, email)
		if !gs2.First.Equal(gs.First.Add(2*time.Second)) || !ge2.First.Equal(ge.First.Add(time.Second)) {
			t.Fatalf("sms %+v then %+v (want 100 × 20 ms later); email %+v then %+v (want 100 × 10 ms later)", gs, gs2, ge, ge2)
		}
		// sms at half its rate now (a new deployment): its next permits follow the ones leased
		// at the old rate, 40 ms apart; back at the old rate, they follow those.
		slower := sms
		slower.Interval = 40 * time.Millisecond
		g3 := lease(t, s, slower)
		g4 := lease(t, s, sms)
		if !g3.First.Equal(gs2.First.Add(2*time.Second)) || !g4.First.Equal(g3.First.Add(4*time.Second)) {
			t.Fatalf("after %+v: at 40 ms %+v (want 2 s later), at 20 ms %+v (want 4 s after that)", gs2, g3, g4)
		}
		// A larger burst of the request lets a quiet limit give more at once: the first permit
		// is the burst's tolerance before now.
		burst := RateLimitLease{Name: "n", Key: "quiet", Interval: 10 * time.Millisecond, Burst: 4, Permits: 4, Horizon: 0}
		if g := lease(t, s, burst); g.Permits != 4 || !g.First.Equal(g.Now.Add(-30*time.Millisecond)) {
			t.Fatalf("a burst of 4 at 10 ms: %+v", g)
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
