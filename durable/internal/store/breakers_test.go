package store

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// dbNow reads the database's clock, as the breaker statements do.
func dbNow(t testing.TB, s *Store) time.Time {
	t.Helper()
	var v int64
	if err := s.DB().QueryRow("SELECT " + s.Engine().appliedAt()).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return fromMicros(v)
}

func transition(t testing.TB, s *Store, tr BreakerTransition) (BreakerRow, bool) {
	t.Helper()
	row, applied, err := s.TransitionBreaker(context.Background(), tr)
	if err != nil {
		t.Fatal(err)
	}
	return row, applied
}

// A transition is a compare-and-swap on the epoch: from the epoch stored it applies and adds
// one; from any other it does nothing and returns the row that is stored. A breaker without a
// row is at epoch 0, and a transition from 0 creates its row.
func TestBreakerTransitionCAS(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		open := BreakerTransition{Name: "reg", Key: "k", From: 0, To: BreakerOpen, Failures: 5, OpenFor: time.Hour, Owner: "a"}
		row, applied := transition(t, s, open)
		if !applied || row.Epoch != 1 || row.State != BreakerOpen || row.Failures != 5 || row.By != "a" || row.Key != "k" {
			t.Fatalf("first trip: applied %v, %+v", applied, row)
		}
		if !row.OpenUntil.Equal(row.Now.Add(time.Hour)) || !row.OpenedAt.Equal(row.Now) || !row.UpdatedAt.Equal(row.Now) {
			t.Fatalf("first trip's times: %+v", row)
		}
		// A second trip from 0 (another instance that had not seen the first) loses.
		again := open
		again.Owner, again.Failures = "b", 7
		lost, applied := transition(t, s, again)
		if applied || lost.Epoch != 1 || lost.By != "a" || lost.Failures != 5 || !lost.OpenUntil.Equal(row.OpenUntil) {
			t.Fatalf("second trip from 0: applied %v, %+v; want a's row", applied, lost)
		}
		// A wrong epoch, from an instance ahead of the store or behind it, loses too.
		for _, from := range []int64{2, 9} {
			tr := BreakerTransition{Name: "reg", Key: "k", From: from, To: BreakerClosed, Owner: "b"}
			if got, applied := transition(t, s, tr); applied || got.Epoch != 1 || got.State != BreakerOpen {
				t.Fatalf("close from epoch %d: applied %v, %+v", from, applied, got)
			}
		}
		// From the epoch stored: a close clears the open and probe times.
		closed, applied := transition(t, s, BreakerTransition{Name: "reg", Key: "k", From: 1, To: BreakerClosed, Owner: "b"})
		if !applied || closed.Epoch != 2 || closed.State != BreakerClosed || closed.By != "b" || closed.Failures != 0 ||
			!closed.OpenedAt.IsZero() || !closed.OpenUntil.IsZero() || closed.ProbeOwner != "" || closed.Seq <= row.Seq {
			t.Fatalf("close: applied %v, %+v", applied, closed)
		}
		// Another name's breaker of the same key is another breaker.
		if other, applied := transition(t, s, BreakerTransition{Name: "reg2", Key: "k", To: BreakerOpen, OpenFor: time.Minute, Owner: "a"}); !applied || other.Epoch != 1 {
			t.Fatalf("same key in another name: applied %v, %+v", applied, other)
		}
		// A key without a row reads as closed at epoch 0; a transition from a later epoch
		// applies to nothing.
		none, applied := transition(t, s, BreakerTransition{Name: "reg", Key: "none", From: 3, To: BreakerOpen, Owner: "a"})
		if applied || none.Epoch != 0 || none.State != BreakerClosed || none.Key != "none" || none.Now.IsZero() {
			t.Fatalf("transition of a key without a row: applied %v, %+v", applied, none)
		}
	})
}

// Bad transitions are refused before anything is sent, naming what is wrong.
func TestBreakerTransitionRefusesBadInput(t *testing.T) {
	s := sqliteBackend(t).open(t)
	for _, c := range []struct {
		tr   BreakerTransition
		want string
	}{
		{BreakerTransition{Key: "k", To: BreakerOpen}, "empty name"},
		{BreakerTransition{Name: "r", Key: "k\x00", To: BreakerOpen}, "key"},
		{BreakerTransition{Name: "r", Key: "k", To: "ajar"}, `invalid state "ajar"`},
		{BreakerTransition{Name: "r", Key: "k", To: BreakerHalfOpen}, "needs an owner"},
		{BreakerTransition{Name: "r", Key: "k", To: BreakerHalfOpen, Owner: "a", Claim: "c\xff"}, "claim"},
		{BreakerTransition{Name: "r", Key: "k", To: BreakerOpen, From: -1}, "negative epoch"},
		{BreakerTransition{Name: "r", Key: "k", To: BreakerOpen, Failures: -1}, "negative failure count"},
		{BreakerTransition{Name: "r", Key: "k", To: BreakerOpen, OpenFor: -time.Second}, "negative duration"},
	} {
		_, _, err := s.TransitionBreaker(context.Background(), c.tr)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one saying %q", c.tr, err, c.want)
		}
	}
}

// Of transitions from the same epoch made at once, by separate pools (separate connections,
// as instances have), exactly one applies, and the epoch goes up by one.
func TestBreakerConcurrentTransitions(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		const n = 8
		stores := make([]*Store, n)
		for i := range stores {
			stores[i] = b.open(t)
		}
		race := func(tr func(i int) BreakerTransition) (winners int, rows []BreakerRow) {
			rows = make([]BreakerRow, n)
			applied := make([]bool, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range stores {
				wg.Go(func() {
					<-start
					var err error
					rows[i], applied[i], err = stores[i].TransitionBreaker(context.Background(), tr(i))
					if err != nil {
						t.Error(err)
					}
				})
			}
			close(start)
			wg.Wait()
			for _, a := range applied {
				if a {
					winners++
				}
			}
			return winners, rows
		}
		owner := func(i int) string { return string(rune('a' + i)) }
		for _, step := range []struct {
			from int64
			to   BreakerState
		}{{0, BreakerOpen}, {1, BreakerClosed}, {2, BreakerOpen}} {
			winners, rows := race(func(i int) BreakerTransition {
				return BreakerTransition{Name: "reg", Key: "k", From: step.from, To: step.to, OpenFor: time.Hour, Owner: owner(i)}
			})
			if winners != 1 {
				t.Fatalf("from epoch %d: %d transitions applied, want 1", step.from, winners)
			}
			for i, r := range rows {
				if r.Epoch != step.from+1 || r.State != step.to || r.By != rows[0].By {
					t.Fatalf("from epoch %d: instance %d got %+v; want the one winner's row at epoch %d", step.from, i, r, step.from+1)
				}
			}
		}
		// The claim of the probes, once the open time has passed: one holder.
		opened, _ := transition(t, stores[0], BreakerTransition{Name: "reg", Key: "p", To: BreakerOpen, Owner: "a"})
		winners, rows := race(func(i int) BreakerTransition {
			return BreakerTransition{Name: "reg", Key: "p", From: opened.Epoch, To: BreakerHalfOpen, ProbeFor: time.Hour, Owner: owner(i)}
		})
		if winners != 1 || rows[0].State != BreakerHalfOpen || rows[0].Epoch != opened.Epoch+1 {
			t.Fatalf("claims of the probes: %d applied, row %+v", winners, rows[0])
		}
	})
}

// A move to half-open claims the probes: refused while the breaker is open and while another
// instance's claim lasts, allowed once either has run out.
func TestBreakerHalfOpenClaim(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		claim := func(from int64, owner string, probeFor time.Duration) (BreakerRow, bool) {
			return transition(t, s, BreakerTransition{Name: "reg", Key: "k", From: from, To: BreakerHalfOpen, ProbeFor: probeFor, Owner: owner})
		}
		// Of a breaker without a row there is nothing to probe.
		if row, applied := claim(0, "a", time.Hour); applied || row.Epoch != 0 {
			t.Fatalf("claim without a row: applied %v, %+v", applied, row)
		}
		open, _ := transition(t, s, BreakerTransition{Name: "reg", Key: "k", To: BreakerOpen, OpenFor: time.Hour, Owner: "a"})
		if row, applied := claim(open.Epoch, "a", time.Hour); applied || row.State != BreakerOpen || row.Epoch != open.Epoch {
			t.Fatalf("claim before the open time passed: applied %v, %+v", applied, row)
		}
		// Opened for no time: the open time has passed at once.
		open, _ = transition(t, s, BreakerTransition{Name: "reg", Key: "k", From: open.Epoch, To: BreakerOpen, OpenFor: 0, Owner: "a"})
		held, applied := claim(open.Epoch, "a", time.Hour)
		if !applied || held.State != BreakerHalfOpen || held.ProbeOwner != "a" || !held.ProbeUntil.Equal(held.Now.Add(time.Hour)) ||
			!held.LastProbeAt.Equal(held.Now) || !held.OpenedAt.Equal(open.OpenedAt) || held.By != "a" {
			t.Fatalf("claim after the open time: applied %v, %+v", applied, held)
		}
		if row, applied := claim(held.Epoch, "b", time.Hour); applied || row.ProbeOwner != "a" || row.Epoch != held.Epoch {
			t.Fatalf("claim while a's lasts: applied %v, %+v", applied, row)
		}
		// A claim held for no time has run out at once: another instance takes it over.
		reclaimed, _ := transition(t, s, BreakerTransition{Name: "reg", Key: "k", From: held.Epoch, To: BreakerOpen, OpenFor: 0, Owner: "a"})
		short, applied := claim(reclaimed.Epoch, "a", 0)
		if !applied {
			t.Fatalf("claim: %+v", short)
		}
		taken, applied := claim(short.Epoch, "b", time.Minute)
		if !applied || taken.ProbeOwner != "b" || taken.Epoch != short.Epoch+1 || taken.LastProbeAt.Before(short.LastProbeAt) {
			t.Fatalf("claim after a's ran out: applied %v, %+v", applied, taken)
		}
		// The verdict: a close ends the claim.
		closed, applied := transition(t, s, BreakerTransition{Name: "reg", Key: "k", From: taken.Epoch, To: BreakerClosed, Owner: "b"})
		if !applied || closed.ProbeOwner != "" || !closed.ProbeUntil.IsZero() || !closed.LastProbeAt.Equal(taken.LastProbeAt) {
			t.Fatalf("close after the probe: applied %v, %+v", applied, closed)
		}
	})
}

// Every time a transition sets is the database's: Now lies between two readings of the
// database's clock around the call.
func TestBreakerTimesFromTheDatabaseClock(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		before := dbNow(t, s)
		row, _ := transition(t, s, BreakerTransition{Name: "reg", Key: "k", To: BreakerOpen, OpenFor: time.Minute, Owner: "a"})
		after := dbNow(t, s)
		if row.Now.Before(before) || row.Now.After(after) {
			t.Fatalf("transition's now %v is not within the database's %v … %v", row.Now, before, after)
		}
		got, err := s.Breaker(context.Background(), "reg", "k")
		if err != nil {
			t.Fatal(err)
		}
		if later := dbNow(t, s); got.Now.Before(after) || got.Now.After(later) || !got.OpenUntil.Equal(row.OpenUntil) {
			t.Fatalf("read: %+v; want now within %v … %v", got, after, later)
		}
	})
}

// Load reads the breakers of a name that are not closed; the changes since a seq are the rows
// transitioned after it, in order.
func TestBreakerLoadAndChanges(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		start, err := s.LastBreakerSeq(ctx, "reg")
		if err != nil || start != 0 {
			t.Fatalf("last seq of an empty table: %d, %v", start, err)
		}
		a, _ := transition(t, s, BreakerTransition{Name: "reg", Key: "a", To: BreakerOpen, OpenFor: time.Hour, Owner: "i"})
		bb, _ := transition(t, s, BreakerTransition{Name: "reg", Key: "b", To: BreakerOpen, OpenFor: 0, Owner: "i"})
		transition(t, s, BreakerTransition{Name: "reg", Key: "c", To: BreakerClosed, Owner: "i"})
		transition(t, s, BreakerTransition{Name: "reg", Key: "b", From: bb.Epoch, To: BreakerHalfOpen, ProbeFor: time.Hour, Owner: "i"})
		transition(t, s, BreakerTransition{Name: "other", Key: "z", To: BreakerOpen, Owner: "i"})
		loaded, err := s.LoadBreakers(ctx, "reg")
		if err != nil {
			t.Fatal(err)
		}
		if len(loaded) != 2 || loaded[0].Key != "a" || loaded[1].Key != "b" || loaded[1].State != BreakerHalfOpen || loaded[0].Now.IsZero() {
			t.Fatalf("load: %+v; want a (open) and b (half-open)", loaded)
		}
		changes, err := s.BreakerChanges(ctx, "reg", a.Seq, 10)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for i, c := range changes {
			keys = append(keys, c.Key)
			if i > 0 && c.Seq <= changes[i-1].Seq {
				t.Fatalf("changes out of order: %+v", changes)
			}
		}
		if strings.Join(keys, ",") != "c,b" {
			t.Fatalf("changes after a: %v; want c, then b (its claim is its latest change)", keys)
		}
		if limited, _ := s.BreakerChanges(ctx, "reg", 0, 2); len(limited) != 2 || limited[0].Key != "a" {
			t.Fatalf("changes limited to 2: %+v", limited)
		}
		last, err := s.LastBreakerSeq(ctx, "reg")
		if err != nil || last != changes[len(changes)-1].Seq {
			t.Fatalf("last seq %d, %v; want %d", last, err, changes[len(changes)-1].Seq)
		}
	})
}

// On PostgreSQL, every committed transition is notified to the watchers of its name (and
// schema); SQLite answers ErrNoNotifications.
func TestWatchBreakers(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		listening, changed := make(chan struct{}, 1), make(chan struct{}, 10)
		done := make(chan error, 1)
		go func() {
			done <- s.WatchBreakers(ctx, "reg", func() { listening <- struct{}{} }, func() { changed <- struct{}{} })
		}()
		if b.name == "sqlite" {
			if err := <-done; !errors.Is(err, ErrNoNotifications) {
				t.Fatalf("sqlite: %v", err)
			}
			return
		}
		select {
		case <-listening:
		case err := <-done:
			t.Fatal(err)
		}
		other := b.open(t)
		transition(t, other, BreakerTransition{Name: "another", Key: "k", To: BreakerOpen, Owner: "x"})
		transition(t, other, BreakerTransition{Name: "reg", Key: "k", To: BreakerOpen, Owner: "x"})
		select {
		case <-changed:
		case err := <-done:
			t.Fatal(err)
		case <-time.After(10 * time.Second):
			t.Fatal("no notification within 10 s")
		}
		if len(changed) != 0 {
			t.Fatal("a change of another name was notified")
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("after cancel: %v", err)
		}
	})
}
