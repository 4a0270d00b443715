package durable_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/internal/pgtest"
	"github.com/switchboard-go/switchboard/durable/record"
)

// churnFor is how long TestFleetNoDeadlockWhileParking churns.
const churnFor = 60 * time.Second

// TestFleetNoDeadlockWhileParking: three schedulers of eight workers share one PostgreSQL
// database and run a stream of items guarded by four breaker keys for a minute, while their
// breakers trip and reset every few milliseconds (each trip re-parks the items parked on the
// key, each reset frees them), the keys are paused and resumed, their concurrency limits set
// and removed, and a goroutine re-parks and frees the keys' items directly: claims, batched
// completions, parking, unparking, pausing and limit slots all meet on the same rows, the
// running items among them (a claim keeps an item's parked key). No statement may deadlock:
// the database's own count of deadlocks (pg_stat_database.deadlocks of a database made for the
// test) stays 0, and so does the count of SQLSTATE 40P01 in every error the schedulers and the
// churn saw. Afterwards every item has succeeded, none died.
func TestFleetNoDeadlockWhileParking(t *testing.T) {
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	t.Parallel()
	db := newTestDatabase(t, dsn)
	b := backend{name: "postgres", target: db.dsn}
	ctx := context.Background()
	keys := []string{"host-a", "host-b", "host-c", "host-d"}

	var (
		deadlocks atomic.Int64 // errors with SQLSTATE 40P01, wherever seen
		mu        sync.Mutex
		firstErrs []string
	)
	seen := func(what string, err error) {
		if err == nil {
			return
		}
		if strings.Contains(err.Error(), "40P01") {
			deadlocks.Add(1)
		}
		mu.Lock()
		if len(firstErrs) < 20 {
			firstErrs = append(firstErrs, what+": "+err.Error())
		}
		mu.Unlock()
	}
	var logs logRecorder
	var (
		succeeded atomic.Int64
		outcomes  sync.Map // OnSettled outcome -> *atomic.Int64
	)
	type instance struct {
		q   *durable.Queue
		end func()
		reg *breaker.Registry
	}
	var fleet []instance
	for i := range 3 {
		q, end := openTestQueue(t, b, durable.Config{Policy: fastPolicy, Recheck: 200 * time.Millisecond})
		reg := breaker.NewRegistry(breaker.Config{FailureThreshold: 1, OpenDuration: 20 * time.Millisecond, HalfOpenProbes: 2})
		reg.Declare(keys...)
		m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
			// An item runs for up to a millisecond, so that some are running when their key is
			// re-parked or freed.
			if w.N%2 == 0 {
				return nil
			}
			select {
			case <-time.After(time.Millisecond):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}})
		err := durable.StartWith(q, m, durable.SchedulerConfig{InstanceID: fmt.Sprintf("lock-%d", i), Workers: 8, BatchSize: 16,
			PollInterval: 5 * time.Millisecond, Lease: 10 * time.Second, Breakers: reg, Logger: logs.logger(),
			OnClaim: []func(time.Duration, int, error){func(_ time.Duration, _ int, err error) { seen("complete and claim", err) }},
			OnSettled: []func(string, record.Settled){func(_ string, outcome record.Settled) {
				if outcome == record.SettledSucceeded {
					succeeded.Add(1)
				}
				n, _ := outcomes.LoadOrStore(outcome, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
			}}})
		if err != nil {
			t.Fatal(err)
		}
		fleet = append(fleet, instance{q, end, reg})
	}
	op := fleet[0].q
	st := durable.StoreOf(op)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	// every runs fn every d until stop.
	every := func(d time.Duration, fn func()) {
		wg.Go(func() {
			tick := time.NewTicker(d)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					fn()
				}
			}
		})
	}
	// The stream of items: enqueued while fewer than 400 wait, each guarded by a key.
	var enqueued atomic.Int64
	for e := range 2 {
		every(time.Millisecond, func() {
			for enqueued.Load()-succeeded.Load() < 400 {
				n := int(enqueued.Add(1))
				_, err := fleet[e].q.Enqueue(ctx, &Work{N: n}, durable.WithBreakerKey(keys[n%len(keys)]))
				if err != nil {
					enqueued.Add(-1)
					seen("enqueue", err)
					return
				}
			}
		})
	}
	// The breakers: a trip parks the items that meet the open breaker (and re-parks those
	// parked on it: Repark), a reset frees them (Unpark). The open time is short, so parked
	// items come due, and are claimed, still parked on the key.
	for _, in := range fleet {
		every(3*time.Millisecond, func() {
			k := keys[rand.IntN(len(keys))]
			if a := in.reg.Admission(k); a.State == breaker.StateClosed {
				seen("trip", in.reg.Trip(k))
			} else {
				seen("reset", in.reg.Reset(k))
			}
		})
	}
	// Pauses of a key, resumed (the resume frees the key's items in its transaction).
	every(20*time.Millisecond, func() {
		k := keys[rand.IntN(len(keys))]
		if rand.IntN(2) == 0 {
			_, err := op.Pause(ctx, durable.KeyTarget(k), "churn")
			seen("pause", err)
		} else {
			_, err := op.Resume(ctx, durable.KeyTarget(k), "churn")
			seen("resume", err)
		}
	})
	// Concurrency limits set and removed: slots are taken (Acquire), held-back items parked
	// and woken (WakeLimited), a removal frees the key's items (Unpark).
	every(30*time.Millisecond, func() {
		k := keys[rand.IntN(len(keys))]
		if rand.IntN(2) == 0 {
			_, err := fleet[1].q.SetConcurrencyLimit(ctx, k, 1+rand.IntN(3), "churn")
			seen("set limit", err)
		} else {
			_, err := fleet[1].q.RemoveConcurrencyLimit(ctx, k, "churn")
			seen("remove limit", err)
		}
	})
	// Parking and unparking straight on the store: the items of a key are made due within a
	// few milliseconds still parked on it, then freed, whatever their state.
	every(2*time.Millisecond, func() {
		k := keys[rand.IntN(len(keys))]
		now := time.Now()
		if rand.IntN(2) == 0 {
			_, err := st.Repark(ctx, k, now, 5*time.Millisecond)
			seen("repark", err)
		} else {
			_, err := st.Unpark(ctx, keys, now)
			seen("unpark", err)
		}
	})

	churn := time.NewTimer(churnFor)
	<-churn.C
	close(stop)
	wg.Wait()

	// Nothing holds the items back any more: every one must succeed.
	for _, in := range fleet {
		for _, k := range keys {
			seen("reset", in.reg.Reset(k))
		}
	}
	for _, k := range keys {
		_, err := op.Resume(ctx, durable.KeyTarget(k), "churn")
		seen("resume", err)
		_, err = op.RemoveConcurrencyLimit(ctx, k, "churn")
		seen("remove limit", err)
	}
	_, err := st.Unpark(ctx, keys, time.Now())
	seen("unpark", err)
	total := enqueued.Load()
	var counts map[record.ItemState]int64
	eventually(t, 60*time.Second, fmt.Sprintf("all %d items to succeed", total), func() bool {
		counts = stats(t, op).Counts
		return counts[record.StateSucceeded] == total || counts[record.StateDead] > 0
	})
	if counts[record.StateDead] > 0 {
		t.Errorf("%d items died: %v", counts[record.StateDead], counts)
	}
	for _, in := range fleet {
		in.end()
	}
	serverDeadlocks := db.deadlocks(t)

	var settled []string
	outcomes.Range(func(k, v any) bool {
		settled = append(settled, fmt.Sprintf("%s %d", k, v.(*atomic.Int64).Load()))
		return true
	})
	slices.Sort(settled)
	t.Logf("%d items in %v; claims settled: %s; %d store errors seen", total, churnFor, strings.Join(settled, ", "), len(firstErrs))
	for _, e := range firstErrs {
		t.Log(e)
	}
	if n := deadlocks.Load(); n != 0 {
		t.Errorf("%d errors with SQLSTATE 40P01 (deadlock detected) seen by the schedulers and the churn", n)
	}
	if serverDeadlocks != 0 {
		t.Errorf("the server counted %d deadlocks in the test's database", serverDeadlocks)
	}
	logs.mu.Lock()
	recs := logs.records()
	logs.mu.Unlock()
	for _, r := range recs {
		for k, v := range r.attrs {
			if strings.Contains(v, "40P01") {
				t.Errorf("logged %q with %s=%s", r.msg, k, v)
			}
		}
	}
}

// testDatabase is a database made for one test on the test server.
type testDatabase struct {
	name     string
	dsn      string // the test server's DSN naming the database
	adminDSN string // the test server's DSN, naming its own database
}

// newTestDatabase creates a database of its own on the server of dsn, dropped (its sessions
// ended) at the end of the test: the server counts deadlocks per database, so its count
// (pg_stat_database.deadlocks) is this test's, whatever other tests do on the server meanwhile.
func newTestDatabase(t *testing.T, dsn string) *testDatabase {
	t.Helper()
	admin := pgtest.Open(t, dsn)
	name := "sbtest_lock_" + randomSuffix()
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec("DROP DATABASE " + name + " WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	target := dsn + " dbname=" + name
	if strings.Contains(dsn, "://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.Path = "/" + name
		target = u.String()
	}
	return &testDatabase{name: name, dsn: target, adminDSN: dsn}
}

// deadlocks returns the server's count of deadlocks in the database, once no session is
// connected to it: a session adds what it counted to the database's statistics when it ends
// (at the latest), so every session of the test must have ended.
func (d *testDatabase) deadlocks(t *testing.T) int64 {
	t.Helper()
	admin := pgtest.Open(t, d.adminDSN)
	eventually(t, 30*time.Second, "the sessions of the test database to end", func() bool {
		var n int
		if err := admin.QueryRow(`SELECT COUNT(*) FROM pg_stat_activity WHERE datname = $1`, d.name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	var n int64
	if err := admin.QueryRow(`SELECT deadlocks FROM pg_stat_database WHERE datname = $1`, d.name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// openTestQueue opens a queue on b with cfg and the test request types; the function it
// returns shuts the queue down and closes it (once; the end of the test calls it too).
func openTestQueue(t *testing.T, b backend, cfg durable.Config) (*durable.Queue, func()) {
	t.Helper()
	q, err := durable.Open(context.Background(), b.driver(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	registerTypes(q)
	end := sync.OnceFunc(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := q.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := q.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	t.Cleanup(end)
	return q, end
}
