package durable_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
)

// newBreakerStore returns a breaker store of q, closed at the end of the test.
func newBreakerStore(t testing.TB, q *durable.Queue, name string, cfg durable.BreakerStoreConfig) *durable.BreakerStore {
	t.Helper()
	s, err := durable.NewBreakerStore(q, name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// received collects what a subscriber is given.
type received struct {
	mu  sync.Mutex
	got []breaker.Shared
	ch  chan breaker.Shared
}

func subscribe(t testing.TB, s *durable.BreakerStore) *received {
	r := &received{ch: make(chan breaker.Shared, 100)}
	stop := s.Subscribe(func(sh breaker.Shared) {
		r.mu.Lock()
		r.got = append(r.got, sh)
		r.mu.Unlock()
		r.ch <- sh
	})
	t.Cleanup(stop)
	return r
}

// next waits, at most bound, for the next state the subscriber is given.
func (r *received) next(t testing.TB, bound time.Duration, what string) breaker.Shared {
	t.Helper()
	select {
	case sh := <-r.ch:
		return sh
	case <-time.After(bound):
		t.Fatalf("nothing received within %v: %s", bound, what)
		return breaker.Shared{}
	}
}

func (r *received) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// Two instances (two queues on one database, each with its store of the same name): a trip by
// one is one compare-and-swap, the other's trip from the same epoch loses and gets the
// winner's state, and the other learns of it within the refresh interval; a third, started
// afterwards, loads it. A store never hears its own transitions back.
func TestBreakerStoreSharesTransitions(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		cfg := durable.BreakerStoreConfig{RefreshInterval: 20 * time.Millisecond}
		a := newBreakerStore(t, b.bare(t, durable.Config{}), "fleet", cfg)
		bs := newBreakerStore(t, b.bare(t, durable.Config{}), "fleet", cfg)
		other := newBreakerStore(t, b.bare(t, durable.Config{}), "another", cfg)
		ra, rb, rother := subscribe(t, a), subscribe(t, bs), subscribe(t, other)

		trip := breaker.Transition{Key: "payments", To: breaker.StateOpen, Failures: 5, OpenFor: time.Minute, Owner: "instance-a",
			Reason: breaker.ReasonFailureThreshold}
		won, applied, err := a.Transition(ctx, trip)
		if err != nil || !applied || won.Epoch != 1 || won.State != breaker.StateOpen || !won.OpenUntil.Equal(won.Now.Add(time.Minute)) {
			t.Fatalf("a's trip: %+v, applied %v, %v", won, applied, err)
		}
		trip.Owner = "instance-b"
		lost, applied, err := bs.Transition(ctx, trip)
		if err != nil || applied || lost.Epoch != 1 || lost.By != "instance-a" {
			t.Fatalf("b's trip from the same epoch: %+v, applied %v, %v; want a's state", lost, applied, err)
		}
		sh := rb.next(t, 5*time.Second, "b learning of a's trip")
		if sh.Key != "payments" || sh.Epoch != 1 || sh.State != breaker.StateOpen || sh.By != "instance-a" || sh.Failures != 5 {
			t.Fatalf("b was given %+v", sh)
		}
		// b resets it; a learns of the reset, and nobody else of anything.
		reset, applied, err := bs.Transition(ctx, breaker.Transition{Key: "payments", From: 1, To: breaker.StateClosed, Owner: "instance-b",
			Reason: breaker.ReasonManualReset})
		if err != nil || !applied || reset.Epoch != 2 {
			t.Fatalf("b's reset: %+v, applied %v, %v", reset, applied, err)
		}
		if sh := ra.next(t, 5*time.Second, "a learning of b's reset"); sh.Epoch != 2 || sh.State != breaker.StateClosed || sh.By != "instance-b" {
			t.Fatalf("a was given %+v", sh)
		}
		// One more change, of a, so that b's poll has run past the reset it made itself.
		if _, _, err := a.Transition(ctx, breaker.Transition{Key: "ledger", To: breaker.StateOpen, OpenFor: time.Hour, Owner: "instance-a"}); err != nil {
			t.Fatal(err)
		}
		if sh := rb.next(t, 5*time.Second, "b learning of a's second trip"); sh.Key != "ledger" {
			t.Fatalf("b was given %+v; want the ledger's trip (never its own reset)", sh)
		}
		if n, m := ra.count(), rother.count(); n != 1 || m != 0 {
			t.Fatalf("a was given %d states (want b's reset only), another name's store %d (want none)", n, m)
		}
		// A store started afterwards (a restarted instance) loads the breakers not closed.
		loaded, err := newBreakerStore(t, b.bare(t, durable.Config{}), "fleet", cfg).Load(ctx)
		if err != nil || len(loaded) != 1 || loaded[0].Key != "ledger" || loaded[0].State != breaker.StateOpen || loaded[0].Now.IsZero() {
			t.Fatalf("load: %+v, %v", loaded, err)
		}
	})
}

// On PostgreSQL a transition reaches the other instances by notification, without waiting
// for their poll (an hour away here).
func TestBreakerStoreNotifies(t *testing.T) {
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	b := postgresBackend(t, dsn)
	cfg := durable.BreakerStoreConfig{RefreshInterval: time.Hour}
	a := newBreakerStore(t, b.bare(t, durable.Config{}), "fleet", cfg)
	bs := newBreakerStore(t, b.bare(t, durable.Config{}), "fleet", cfg)
	rb := subscribe(t, bs)
	select {
	case <-durable.BreakerStoreListening(bs):
	case <-time.After(10 * time.Second):
		t.Fatal("b's store does not listen after 10 s")
	}
	start := time.Now()
	for i, key := range []string{"payments", "ledger"} {
		if _, applied, err := a.Transition(context.Background(), breaker.Transition{Key: key, To: breaker.StateOpen, OpenFor: time.Minute, Owner: "a"}); err != nil || !applied {
			t.Fatalf("trip %d: applied %v, %v", i, applied, err)
		}
		if sh := rb.next(t, 10*time.Second, "b learning of a's trip by notification"); sh.Key != key || sh.By != "a" {
			t.Fatalf("b was given %+v", sh)
		}
	}
	t.Logf("two trips learned by notification in %v", time.Since(start))
}

// The half-open moment through the store: of the instances claiming the probes at once, one
// holds them.
func TestBreakerStoreOneProbeHolder(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		const n = 4
		stores := make([]*durable.BreakerStore, n)
		for i := range stores {
			stores[i] = newBreakerStore(t, b.bare(t, durable.Config{}), "fleet", durable.BreakerStoreConfig{Timeout: 5 * time.Second})
		}
		open, _, err := stores[0].Transition(ctx, breaker.Transition{Key: "k", To: breaker.StateOpen, OpenFor: 0, Owner: "i0"})
		if err != nil {
			t.Fatal(err)
		}
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			holders []string
		)
		for i, s := range stores {
			wg.Go(func() {
				owner := string(rune('a' + i))
				sh, applied, err := s.Transition(ctx, breaker.Transition{Key: "k", From: open.Epoch, To: breaker.StateHalfOpen, ProbeFor: time.Minute, Owner: owner})
				if err != nil {
					t.Error(err)
					return
				}
				if sh.State != breaker.StateHalfOpen || sh.Epoch != open.Epoch+1 {
					t.Errorf("%s: %+v", owner, sh)
				}
				if applied {
					mu.Lock()
					holders = append(holders, owner)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(holders) != 1 {
			t.Fatalf("probe holders %v, want one", holders)
		}
	})
}

// holdBreakers makes b's breaker table unusable to the stores until release is called:
// PostgreSQL locks it; SQLite holds the database's write lock (its readers go on).
func holdBreakers(t *testing.T, b backend) (release func()) {
	t.Helper()
	db := b.pool(t)
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	lock := "LOCK TABLE switchboard_breakers IN ACCESS EXCLUSIVE MODE"
	if b.name == "sqlite" {
		lock = "UPDATE switchboard_breakers SET failures = failures"
	}
	if _, err := tx.Exec(lock); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { _ = tx.Rollback() }) }
	t.Cleanup(release)
	return release
}

// A database that does not answer costs a call at most the store's Timeout, with an error
// that says so; the caller's own cancellation is reported as such.
func TestBreakerStoreBoundsCalls(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		const timeout = 150 * time.Millisecond
		s := newBreakerStore(t, b.bare(t, durable.Config{}), "fleet", durable.BreakerStoreConfig{Timeout: timeout})
		release := holdBreakers(t, b)
		start := time.Now()
		_, applied, err := s.Transition(context.Background(), breaker.Transition{Key: "k", To: breaker.StateOpen, OpenFor: time.Minute, Owner: "a"})
		took := time.Since(start)
		if err == nil || applied || !strings.Contains(err.Error(), "did not answer within the Timeout (150ms)") {
			t.Fatalf("transition on a held table: applied %v, %v", applied, err)
		}
		if took > timeout+2*time.Second {
			t.Fatalf("the transition took %v, with a Timeout of %v", took, timeout)
		}
		if b.name == "postgres" { // SQLite's readers are not held
			start = time.Now()
			if _, err := s.Load(context.Background()); err == nil || time.Since(start) > timeout+2*time.Second {
				t.Fatalf("load on a held table: %v after %v", err, time.Since(start))
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, _, err = s.Transition(ctx, breaker.Transition{Key: "k", To: breaker.StateOpen, Owner: "a"})
		if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "Timeout") {
			t.Fatalf("a cancelled transition: %v; want context.Canceled, not the Timeout", err)
		}
		release()
		if _, applied, err := s.Transition(context.Background(), breaker.Transition{Key: "k", To: breaker.StateOpen, Owner: "a"}); err != nil || !applied {
			t.Fatalf("after the release: applied %v, %v", applied, err)
		}
	})
}

// The poll logs a failing database once, not once per poll, and once more when it answers
// again; it resumes then.
func TestBreakerStorePollLogsFailuresRateLimited(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		core, logs := observer.New(zapcore.InfoLevel)
		q := b.bare(t, durable.Config{})
		cfg := durable.BreakerStoreConfig{RefreshInterval: 10 * time.Millisecond, Logger: zap.New(core)}
		s := newBreakerStore(t, q, "fleet", cfg)
		r := subscribe(t, s)
		if b.name == "postgres" { // the listening connection's failures are its own
			<-durable.BreakerStoreListening(s)
		}
		db := b.pool(t)
		if _, err := db.Exec("ALTER TABLE switchboard_breakers RENAME TO switchboard_breakers_away"); err != nil {
			t.Fatal(err)
		}
		failures := func() int {
			return logs.FilterMessage("durable: database call failed").FilterField(zap.String("op", "breaker store: poll")).Len()
		}
		eventually(t, 10*time.Second, "three failed polls", func() bool { return durable.BreakerStorePollFailures(s) >= 3 })
		// A transition fails too (its error is the registry's to report).
		if _, _, err := s.Transition(context.Background(), breaker.Transition{Key: "k", To: breaker.StateOpen, Owner: "a"}); err == nil {
			t.Fatal("a transition without the table succeeded")
		}
		if _, err := db.Exec("ALTER TABLE switchboard_breakers_away RENAME TO switchboard_breakers"); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "the recovery logged", func() bool { return logs.FilterMessage("durable: database calls recovered").Len() > 0 })
		rec := logs.FilterMessage("durable: database calls recovered").All()[0].ContextMap()
		if n, _ := rec["failures"].(int64); failures() != 1 || n < 3 {
			for _, e := range logs.All() {
				t.Log(e.Message, e.ContextMap())
			}
			t.Fatalf("%d failure lines for %v failed polls; want one line", failures(), rec["failures"])
		}
		if rec["breaker_store"] != "fleet" {
			t.Fatalf("the recovery line names the store %v", rec["breaker_store"])
		}
		other := newBreakerStore(t, b.bare(t, durable.Config{}), "fleet", durable.BreakerStoreConfig{})
		if _, _, err := other.Transition(context.Background(), breaker.Transition{Key: "k", To: breaker.StateOpen, Owner: "b"}); err != nil {
			t.Fatal(err)
		}
		if sh := r.next(t, 5*time.Second, "the poll resuming"); sh.By != "b" {
			t.Fatalf("given %+v", sh)
		}
	})
}

// Close stops the poll and the listening connection; the store's calls fail afterwards.
func TestBreakerStoreClose(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		q := b.bare(t, durable.Config{})
		before := goleak.IgnoreCurrent()
		s, err := durable.NewBreakerStore(q, "fleet", durable.BreakerStoreConfig{RefreshInterval: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		stop := s.Subscribe(func(breaker.Shared) {})
		if b.name == "postgres" {
			<-durable.BreakerStoreListening(s)
		}
		stop()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		goleak.VerifyNone(t, before)
		if _, _, err := s.Transition(context.Background(), breaker.Transition{Key: "k", To: breaker.StateOpen}); !errors.Is(err, durable.ErrBreakerStoreClosed) {
			t.Fatalf("transition after Close: %v", err)
		}
		if _, err := s.Load(context.Background()); !errors.Is(err, durable.ErrBreakerStoreClosed) {
			t.Fatalf("load after Close: %v", err)
		}
		s.Subscribe(func(breaker.Shared) { t.Error("called after Close") })()
	})
}

// Bad names and configurations are refused, naming what is wrong.
func TestNewBreakerStoreRefusesBadInput(t *testing.T) {
	q := sqliteBackend(t).bare(t, durable.Config{})
	for _, c := range []struct {
		name string
		cfg  durable.BreakerStoreConfig
		want []string
	}{
		{"", durable.BreakerStoreConfig{}, []string{"name is empty"}},
		{"a\x00b", durable.BreakerStoreConfig{}, []string{"NUL"}},
		{"a\xffb", durable.BreakerStoreConfig{}, []string{"not valid UTF-8"}},
		{strings.Repeat("n", 1025), durable.BreakerStoreConfig{}, []string{"1025 bytes long"}},
		{"ok", durable.BreakerStoreConfig{RefreshInterval: -1, Timeout: -time.Second}, []string{"RefreshInterval -1ns is negative", "Timeout -1s is negative"}},
		{"ok", durable.BreakerStoreConfig{RefreshInterval: time.Nanosecond}, []string{"RefreshInterval 1ns is under 10ms"}},
	} {
		_, err := durable.NewBreakerStore(q, c.name, c.cfg)
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%q %+v: %v; want an error saying %q", c.name, c.cfg, err, w)
			}
		}
	}
	if _, err := durable.NewBreakerStore(nil, "ok", durable.BreakerStoreConfig{}); err == nil {
		t.Error("a nil queue was accepted")
	}
	if err := (durable.BreakerStoreConfig{}).Validate(); err != nil {
		t.Errorf("the zero config: %v", err)
	}
	s := newBreakerStore(t, q, "ok", durable.BreakerStoreConfig{})
	if _, _, err := s.Transition(context.Background(), breaker.Transition{Key: "k", To: breaker.State(9)}); err == nil || !strings.Contains(err.Error(), "unknown state") {
		t.Errorf("a transition to State(9): %v", err)
	}
}

// Registries given breaker stores of one name on one database share their breakers: a trip
// by one is seen by the other, a reset by the other closes it in both, and a registry started
// afterwards (a restarted instance) starts with the breaker open.
func TestBreakerStoreWithRegistries(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		cfg := durable.BreakerStoreConfig{RefreshInterval: 20 * time.Millisecond}
		registry := func(instance string) *breaker.Registry {
			s := newBreakerStore(t, b.bare(t, durable.Config{}), "fleet", cfg)
			return breaker.NewRegistry(breaker.Config{Store: s, Instance: instance, OpenDuration: time.Hour,
				OnStoreError: []func(error){func(err error) { t.Errorf("%s: store error: %v", instance, err) }}})
		}
		state := func(r *breaker.Registry) breaker.State {
			s, err := r.Get("payments")
			if err != nil {
				return breaker.StateClosed
			}
			return s.State
		}
		r1, r2 := registry("a"), registry("b")
		r1.Declare("payments")
		r2.Declare("payments")
		if err := r1.Trip("payments"); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "b seeing a's trip", func() bool { return state(r2) == breaker.StateOpen })
		if err := r2.Reset("payments"); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "a seeing b's reset", func() bool { return state(r1) == breaker.StateClosed })
		if err := r2.Trip("payments"); err != nil {
			t.Fatal(err)
		}
		r3 := registry("c")
		eventually(t, 10*time.Second, "a new registry starting open", func() bool { return state(r3) == breaker.StateOpen })
	})
}
