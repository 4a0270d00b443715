package durable_test

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/internal/pgtest"
	"github.com/switchboard-go/switchboard/durable/record"
)

// Three instances share a server of max_connections 20, each with the budget the rule of
// docs/durable.md ("How many connections an instance uses") gives it, each running everything
// that takes a connection (a scheduler of 8 workers, a BreakerStore with a subscriber, two
// RateLimitStores leasing) and then a burst of 300 enqueues from 150 goroutines at once, which
// the fleet drains. The server refuses no connection (no SQLSTATE 53300 in any enqueue's
// error, any child's log or the server's log), no item is lost or run twice, and the parent,
// sampling pg_stat_activity by each instance's application_name every 10 ms (at start, idle,
// during the burst and during the drain), never sees an instance hold more than its budget,
// nor other than one notification connection (the scheduler's wake-up and the breaker store's
// subscriber share it).
func TestFleetBudgetFitsASmallServer(t *testing.T) {
	t.Parallel()
	const (
		maxConnections = 20
		reserved       = 3 // superuser_reserved_connections, the default
		held           = 2 // the test's own: its queue (a budget of 1) and its sampler's connection
		instances      = 3
		// The rule: instances × MaxConns ≤ max_connections − reserved − what else connects,
		// so MaxConns = (20 − 3 − 2) / 3 = 5.
		budget  = (maxConnections - reserved - held) / instances
		items   = 300 // enqueued by each instance...
		senders = 150 // ...from this many goroutines at once
		workers = 8
	)
	srv := pgtest.StartServer(t, pgtest.ServerConfig{MaxConnections: maxConnections})
	ctx := context.Background()
	obs := budgetQueue(t, srv.DSN, "test-observer", 1) // migrates the schema before the children start
	sdb, err := sql.Open("pgx", must[string](t)(pgtest.WithParam(srv.DSN, "application_name", "test-sampler")))
	if err != nil {
		t.Fatal(err)
	}
	sdb.SetMaxOpenConns(1)
	sdb.SetMaxIdleConns(1)
	t.Cleanup(func() { _ = sdb.Close() })
	led := startLedger(t)

	var apps []string
	for i := range instances {
		apps = append(apps, fmt.Sprintf("budget-%d", i+1))
	}
	sampler := startConnSampler(t, apps, budget, 10*time.Millisecond, "start", pgActivity(sdb, "budget-"))
	var children []*budgetChild
	for _, app := range apps {
		children = append(children, startBudgetChild(t, budgetSpec{
			Instance: app, DSN: must[string](t)(pgtest.WithParam(srv.DSN, "application_name", app)), MaxConns: budget,
			Workers: workers, PollInterval: 100 * time.Millisecond, Items: items, Senders: senders,
			HandlerDelay: 20 * time.Millisecond, FleetRate: 10000, OtherRate: 10000, Ledger: led.srv.URL,
		}))
	}
	for _, c := range children {
		c.waitFor(t, c.ready, "READY", time.Minute)
	}
	// Each listens once its scheduler and its breaker store's subscriber have started.
	deadline := time.Now().Add(20 * time.Second)
	for {
		l, err := sampler.latestListening(ctx)
		if err == nil && !slices.Contains(slices.Collect(maps.Values(l)), 0) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("20 s after the instances started, not all of them listen: %v (%v)", l, err)
			break
		}
		time.Sleep(10 * time.Millisecond) // polling pg_stat_activity, with a deadline
	}
	sampler.setPhase("idle")
	for sampler.count("idle") < 50 {
		time.Sleep(10 * time.Millisecond) // the idle samples
	}

	sampler.setPhase("burst")
	begun := time.Now()
	for _, c := range children {
		c.send(t, "go")
	}
	for _, c := range children {
		c.waitFor(t, c.burst, "end of its burst", time.Minute)
	}
	burstTook := time.Since(begun)
	sampler.setPhase("drain")
	var enqueued []record.ItemID
	for _, c := range children {
		ids, _ := c.results()
		enqueued = append(enqueued, ids...)
	}
	drained := waitDrained(t, obs, len(enqueued), time.Minute)
	t.Logf("%d items enqueued in %v, drained %v later", len(enqueued), burstTook.Round(time.Millisecond), (time.Since(begun) - burstTook).Round(time.Millisecond))
	sampler.setPhase("stop")
	for _, c := range children {
		c.stop(t)
	}
	sampler.report(t)

	// No connection refused: not to an enqueue, not to anything a child logs.
	var refused int
	for _, c := range children {
		ids, errs := c.results()
		byState := map[string]int{}
		for _, e := range errs {
			byState[strings.Fields(e)[0]]++
		}
		logRefused, _ := linesWith(c.stderrText(), refusalMarks)
		logFailed, first := linesWith(c.stderrText(), connErrorMarks)
		refused += byState["53300"] + logRefused
		if len(errs) > 0 || logFailed > 0 {
			var example string
			if len(errs) > 0 {
				example = errs[0]
			}
			t.Errorf("%s: %d of %d enqueues failed (by SQLSTATE: %v; e.g. %s); %d log lines of failed connections, %d of them refused for lack of slots (e.g. %q)",
				c.spec.Instance, len(errs), len(ids)+len(errs), byState, example, logFailed, logRefused, first)
		}
	}
	// The server logs every connection it refused, which the clients may have tried again
	// (a poll) or logged once for many (their logs are rate-limited).
	serverRefused := strings.Count(srv.Log(), "too many clients")
	if refused > 0 || serverRefused > 0 {
		t.Errorf("connections refused for lack of slots with %d instances on a server of max_connections %d: the server refused %d; the children saw %d errors of SQLSTATE 53300 (enqueues' errors and log lines)",
			instances, maxConnections, serverRefused, refused)
	}
	checkRanOnce(t, obs, led, enqueued, drained, nil)

	// One notification connection per instance throughout: the scheduler and the breaker
	// store's subscriber share it.
	for _, phase := range []string{"idle", "burst", "drain"} {
		if sampler.count(phase) == 0 {
			t.Errorf("no sample of the connections in phase %s", phase)
		}
		for app, l := range sampler.listening(phase) {
			if l.min != 1 || l.max != 1 {
				t.Errorf("%s, %s: %v notification connections, want exactly 1", phase, app, &l)
			}
		}
	}
}

// budgetQueue opens a queue on dsn whose connections are named app, with a budget of maxConns,
// closed at the end of the test.
func budgetQueue(t *testing.T, dsn, app string, maxConns int) *durable.Queue {
	t.Helper()
	q, err := durable.Open(context.Background(), budgetDriver(must[string](t)(pgtest.WithParam(dsn, "application_name", app)), maxConns, false), durable.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q
}

// waitDrained waits until q holds n succeeded items and none pending or running, failing the
// test after bound; it reports whether it drained.
func waitDrained(t *testing.T, q *durable.Queue, n int, bound time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		st, err := q.Stats(context.Background())
		if err == nil && st.Counts[record.StateSucceeded] >= int64(n) && st.Counts[record.StatePending]+st.Counts[record.StateRunning] == 0 {
			return true
		}
		if time.Now().After(deadline) {
			t.Errorf("not drained within %v: %v (%v), want %d succeeded; the server's sessions:\n%s", bound, st.Counts, err, n, sessions(q))
			return false
		}
		time.Sleep(50 * time.Millisecond) // polling the database's state, with a deadline
	}
}

// sessions describes the client sessions of q's server, grouped by what they do: a drain that
// does not end may be waiting on a lock, or on a pool.
func sessions(q *durable.Queue) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := durable.StoreOf(q).DB().QueryContext(ctx, `SELECT count(*), coalesce(state, ''), coalesce(wait_event_type, ''), coalesce(wait_event, ''),
			coalesce(max(extract(epoch FROM now() - xact_start))::int, -1), left(regexp_replace(coalesce(query, ''), '\s+', ' ', 'g'), 100)
		FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
		GROUP BY 2, 3, 4, 6 ORDER BY 1 DESC`)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var n, age int
		var state, waitType, wait, query string
		if err := rows.Scan(&n, &state, &waitType, &wait, &age, &query); err != nil {
			return err.Error()
		}
		fmt.Fprintf(&b, "  %d× %s %s/%s, oldest transaction %d s: %s\n", n, state, waitType, wait, age, query)
	}
	return b.String()
}

// checkRanOnce fails t for each enqueued item that is lost (not succeeded, or never reached
// its handler) or whose handler ran more than once, unless explain (when given) accepts the
// item's extra runs: it gets the item's attempts and handler calls and returns why they are
// allowed, or "". It returns how many items each reason explained.
func checkRanOnce(t *testing.T, q *durable.Queue, led *ledger, enqueued []record.ItemID, drained bool,
	explain func(as []record.Attempt, calls []ledgerCall) string) (explained map[string]int) {
	t.Helper()
	ctx := context.Background()
	var lost, twice []string
	explained = map[string]int{}
	for _, id := range enqueued {
		calls := led.callsOf(id)
		it, err := q.Item(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if it.State != record.StateSucceeded || len(calls) == 0 {
			lost = append(lost, fmt.Sprintf("item %d: %s after %d attempts, %d handler calls", id, it.State, it.Attempts, len(calls)))
			continue
		}
		if len(calls) > 1 {
			as, err := q.Attempts(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			why := ""
			if explain != nil {
				why = explain(as, calls)
			}
			if why != "" {
				explained[why]++
				continue
			}
			var cs []string
			for _, c := range calls {
				cs = append(cs, fmt.Sprintf("%s#%d", c.instance, c.attempt))
			}
			twice = append(twice, fmt.Sprintf("item %d: calls %v, attempts %s", id, cs, outcomes(as)))
		}
	}
	if len(lost) > 0 && drained {
		t.Errorf("%d items lost:\n  %s", len(lost), strings.Join(lost[:min(len(lost), 10)], "\n  "))
	} else if len(lost) > 0 {
		t.Logf("%d items not run (the queue did not drain), e.g. %s", len(lost), lost[0])
	}
	if len(twice) > 0 {
		t.Errorf("%d items run more than once:\n  %s", len(twice), strings.Join(twice[:min(len(twice), 10)], "\n  "))
	}
	return explained
}

// An instance listens on one connection however many watchers it runs: its scheduler's
// wake-up and two breaker stores with subscribers share it (pg_stat_activity, by the
// instance's application_name, shows one backend idle after a LISTEN, in every sample), and
// the instance holds no more than its budget. With a budget of 1, or behind a pooler in
// transaction mode, it listens on none, and its scheduler still finds new items (it polls).
func TestOneNotificationConnectionPerInstance(t *testing.T) {
	t.Parallel()
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	activity := pgtest.Open(t, dsn)
	for _, tc := range []struct {
		name     string
		maxConns int
		pooling  bool
		want     int // notification connections
	}{
		{"budget 4", 4, false, 1},
		{"budget 1", 1, false, 0},
		{"transaction pooling", 4, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := postgresBackend(t, dsn)
			app := "notify-" + randomSuffix()
			q := openQueue(t, budgetDriver(must[string](t)(pgtest.WithParam(b.target, "application_name", app)), tc.maxConns, tc.pooling), durable.Config{})
			start(t, q, mediatorFor(t, handlers{}), durable.SchedulerConfig{PollInterval: 50 * time.Millisecond})
			var stores []*durable.BreakerStore
			for _, name := range []string{"a", "b"} {
				st := must[*durable.BreakerStore](t)(durable.NewBreakerStore(q, name, durable.BreakerStoreConfig{}))
				t.Cleanup(func() { _ = st.Close() })
				st.Subscribe(func(breaker.Shared) {})
				stores = append(stores, st)
			}
			sample := pgActivity(activity, app)
			ctx := context.Background()
			if tc.want > 0 {
				for _, st := range stores {
					select {
					case <-durable.BreakerStoreListening(st):
					case <-time.After(20 * time.Second):
						t.Fatal("a breaker store did not listen within 20 s")
					}
				}
			}
			// Every sample for a while: the watchers came and stay.
			for i := range 20 {
				conns := must[[]sampledConn](t)(sample(ctx))
				var listening []string
				for _, c := range conns {
					if isListening(c) {
						listening = append(listening, fmt.Sprintf("pid %d %q", c.pid, c.query))
					}
				}
				if len(listening) != tc.want || len(conns) > tc.maxConns {
					t.Fatalf("sample %d: %d connections (budget %d), %d of them listening, want %d: %v", i, len(conns), tc.maxConns, len(listening), tc.want, listening)
				}
				time.Sleep(10 * time.Millisecond) // samples spread over 200 ms
			}
			// Its scheduler finds a new item, listening or polling.
			id := must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: 1})).ID
			waitState(t, q, id, record.StateSucceeded)
		})
	}
}
