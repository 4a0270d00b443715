package durable

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestFullCountsOneAtATime: while a full count runs, a caller with nothing kept waits for it
// and takes its result (one count, not two); a caller with a kept count takes that, with its
// age, rather than waiting; a caller whose context ends while it waits gets its error.
func TestFullCountsOneAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var f fullCounts[string]
		t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		var calls atomic.Int32
		release := make(chan struct{})
		count := func(ctx context.Context, keys []string) (map[string]int64, error) {
			n := calls.Add(1)
			<-release
			return map[string]int64{"a": 100 * int64(n)}, nil
		}
		type answer struct {
			n   int64
			age time.Duration
			err error
		}
		get := func(ctx context.Context, now time.Time) <-chan answer {
			ch := make(chan answer, 1)
			go func() {
				c, age, err := f.get(ctx, count, []string{"a"}, now)
				ch <- answer{c["a"], age, err}
			}()
			return ch
		}

		first := get(context.Background(), t0)
		synctest.Wait() // the first caller counts
		second := get(context.Background(), t0)
		ctx, cancel := context.WithCancel(context.Background())
		third := get(ctx, t0)
		synctest.Wait()
		select {
		case a := <-second:
			t.Fatalf("a caller with nothing kept returned %+v while the count ran; want it to wait", a)
		default:
		}
		cancel()
		if a := <-third; !errors.Is(a.err, context.Canceled) {
			t.Errorf("a waiting caller whose context ended: %+v, want context.Canceled", a)
		}
		close(release)
		for _, ch := range []<-chan answer{first, second} {
			if a := <-ch; a.err != nil || a.n != 100 || a.age != 0 {
				t.Errorf("answer %+v, want the one count (100), made now", a)
			}
		}
		if n := calls.Load(); n != 1 {
			t.Errorf("%d counts, want 1", n)
		}

		// Stale at t0+20s: one caller counts again; another, meanwhile, takes the kept count
		// with its age instead of waiting.
		release = make(chan struct{})
		later := t0.Add(20 * time.Second)
		recount := get(context.Background(), later)
		synctest.Wait()
		if a := <-get(context.Background(), later); a.err != nil || a.n != 100 || a.age != 20*time.Second {
			t.Errorf("while a recount runs: %+v, want the kept count (100), 20 s old", a)
		}
		close(release)
		if a := <-recount; a.err != nil || a.n != 200 || a.age != 0 {
			t.Errorf("the recount: %+v, want 200, made now", a)
		}
	})
}

// TestFullCountsAreKeptLongerWhenTheyTakeLonger: a full count is kept for
// minFullCountInterval, or fullCountShare times as long as the shorter of the last two took,
// at most maxFullCountInterval; a failed count keeps nothing and its error is returned.
func TestFullCountsAreKeptLongerWhenTheyTakeLonger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var f fullCounts[string]
		t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		var calls int64
		fail := errors.New("database down")
		var failing bool
		took := 2 * time.Second // how long the next count takes
		count := func(ctx context.Context, keys []string) (map[string]int64, error) {
			calls++
			if failing {
				return nil, fail
			}
			time.Sleep(took)
			return map[string]int64{"a": calls}, nil
		}
		at := func(d time.Duration) (int64, time.Duration) {
			c, age, err := f.get(context.Background(), count, []string{"a"}, t0.Add(d))
			if err != nil {
				t.Fatal(err)
			}
			return c["a"], age
		}
		at(0)
		if n, age := at(150 * time.Second); n != 1 || age != 150*time.Second {
			t.Errorf("150 s after a count of 2 s: %d aged %v, want the kept count (1), 150 s old", n, age)
		}
		if n, age := at(201 * time.Second); n != 2 || age != 0 {
			t.Errorf("201 s after a count of 2 s: %d aged %v, want a new count", n, age)
		}
		// One slow count (a busy database) does not keep the next back: the shorter of the last
		// two decides (2 s: 200 s).
		took = 10 * time.Second
		if n, _ := at(402 * time.Second); n != 3 {
			t.Fatalf("402 s: %d, want a new count", n)
		}
		if n, age := at(603 * time.Second); n != 4 || age != 0 {
			t.Errorf("201 s after a count of 10 s that followed one of 2 s: %d aged %v, want a new count", n, age)
		}
		// Slow counts one after another are kept longer, at most maxFullCountInterval.
		if n, age := at(603*time.Second + maxFullCountInterval - time.Second); n != 4 || age != maxFullCountInterval-time.Second {
			t.Errorf("just before maxFullCountInterval after two counts of 10 s: %d aged %v, want the kept count", n, age)
		}
		if n, age := at(603*time.Second + maxFullCountInterval); n != 5 || age != 0 {
			t.Errorf("maxFullCountInterval after two counts of 10 s: %d aged %v, want a new count", n, age)
		}

		var g fullCounts[string]
		failing = true
		if _, _, err := g.get(context.Background(), count, []string{"a"}, t0); !errors.Is(err, fail) {
			t.Errorf("a failed count: %v, want its error", err)
		}
		failing = false
		if c, age, err := g.get(context.Background(), count, []string{"a"}, t0); err != nil || c["a"] != calls || age != 0 {
			t.Errorf("after a failed count: %v aged %v, %v; want a new count", c, age, err)
		}
	})
}
