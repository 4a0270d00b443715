package durable_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-go/switchboard/durable/internal/pgtest"
	"github.com/switchboard-go/switchboard/durable/record"
)

// The fifty-instance fleet's settings, shared by its subtests.
const (
	fiftyInstances = 50
	fiftyItems     = 10              // enqueued by each instance
	fiftyRate      = 25              // calls a second of the key "fleet", across the fleet
	fiftyLease     = 6 * time.Second // how soon the killed instance's items come back
	// fiftyTimeout bounds every call of the instances' schedulers and stores, generously for
	// fifty processes on a small machine: a call that outlives its context ends its connection
	// and, behind PgBouncer, the server connection it ran on, which PgBouncer (1.18) replaces
	// one at a time; with the defaults (a breaker store's 250 ms, a scheduler's Lease/3) the
	// timeouts of a busy second emptied PgBouncer's pool faster than it refilled, until no
	// server connection was left and every client waited.
	fiftyTimeout  = 2 * time.Second
	fiftyPoll     = 500 * time.Millisecond // without notifications every instance polls
	fiftyServer   = 100                    // the server's max_connections
	fiftyReserved = 3                      // its superuser_reserved_connections
	fiftyHeld     = 3                      // the test's own: its queue (a budget of 2) and its sampler's connection
)

// Fifty instances (OS processes) share a server of max_connections 100, each running a
// scheduler of two workers, a BreakerStore with a subscriber and two RateLimitStores in use
// (every item leases a permit of the fleet's limit of 25 calls a second on one key, and one of
// its instance's own limit in a second store), each enqueueing 10 items at once, which the
// fleet drains together; one instance is SIGKILLed a third of the way through, and its
// running items come back after their lease. Directly, each has the budget the rule gives it,
// (100 − 3 − 3) / 50 = 1 (so it polls, without LISTEN); through PgBouncer in transaction
// mode, a budget of 4 connections to PgBouncer, whose pool of 20 server connections fits the
// server (20 ≤ 100 − 3 − 3). In both: no connection is refused or fails (no enqueue's error,
// no child's log line, no server log line says so), no instance holds more than its budget
// (pg_stat_activity directly, PgBouncer's SHOW CLIENTS through it, sampled every 100 ms),
// nothing is lost, nothing runs twice but what the killed instance's abandoned attempts
// explain, and the endpoint behind the fleet's limit counts, over the seconds the backlog
// keeps the fleet busy, 80 to 105% of the limit a second on average, and no more than 115%
// of it in any three seconds.
func TestFleetFiftyInstances(t *testing.T) {
	if raceEnabled {
		// Fifty race-instrumented processes drain at a fraction of the limit on a small
		// machine, over minutes; the race detector covers the same code in
		// TestFleetBudgetFitsASmallServer.
		t.Skip("fifty processes under the race detector overload a small machine")
	}
	t.Parallel()
	t.Run("direct", func(t *testing.T) { runFiftyInstances(t, false) })
	t.Run("pgbouncer", func(t *testing.T) { runFiftyInstances(t, true) })
}

func runFiftyInstances(t *testing.T, bouncer bool) {
	const poolSize = 20 // PgBouncer's server connections: ≤ fiftyServer − fiftyReserved − fiftyHeld
	srv := pgtest.StartServer(t, pgtest.ServerConfig{MaxConnections: fiftyServer, PgBouncer: bouncer, PoolSize: poolSize})
	ctx := context.Background()
	obs := budgetQueue(t, srv.DSN, "test-observer", 2)                           // migrates the schema before the children start
	budget, dsn := (fiftyServer-fiftyReserved-fiftyHeld)/fiftyInstances, srv.DSN // (100 − 3 − 3) / 50 = 1
	if bouncer {
		budget, dsn = 4, srv.BouncerDSN
	}
	var apps []string
	for i := range fiftyInstances {
		apps = append(apps, fmt.Sprintf("fifty-%02d", i+1))
	}
	var sampler *connSampler
	if bouncer {
		admin, err := pgx.Connect(ctx, must[string](t)(pgtest.BouncerAdminDSN(srv.BouncerDSN)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Close(context.Background()) })
		watch := &bouncerWatch{conn: admin, prefix: "fifty-", db: "postgres", begun: time.Now()}
		sampler = startConnSampler(t, apps, budget, 100*time.Millisecond, "start", watch.clients)
		t.Cleanup(func() { watch.report(t) })
	} else {
		sdb := pgtest.Open(t, must[string](t)(pgtest.WithParam(srv.DSN, "application_name", "test-sampler")))
		sdb.SetMaxOpenConns(1)
		sampler = startConnSampler(t, apps, budget, 100*time.Millisecond, "start", pgActivity(sdb, "fifty-"))
	}
	led := startLedger(t)
	begun := time.Now()
	children := make([]*budgetChild, len(apps))
	for i, app := range apps {
		children[i] = startBudgetChild(t, budgetSpec{
			Instance: app, DSN: must[string](t)(pgtest.WithParam(dsn, "application_name", app)),
			MaxConns: budget, TransactionPooling: bouncer, Workers: 2, PollInterval: fiftyPoll, Lease: fiftyLease, StoreTimeout: fiftyTimeout,
			Items: fiftyItems, Senders: 4, FleetRate: fiftyRate, OtherRate: 1000, Ledger: led.srv.URL,
		}, "GOMAXPROCS=1") // fifty light processes on a small machine
	}
	for _, c := range children {
		c.waitFor(t, c.ready, "READY", 90*time.Second)
	}
	t.Logf("%d instances ready after %v", len(children), time.Since(begun).Round(time.Millisecond))
	for _, c := range children {
		c.send(t, "warm")
	}
	for _, c := range children {
		c.waitFor(t, c.warm, "its warm-up call", time.Minute)
	}

	sampler.setPhase("run")
	led.begin()
	for _, c := range children {
		c.send(t, "go")
	}
	for _, c := range children {
		c.waitFor(t, c.burst, "end of its enqueues", time.Minute)
	}
	var enqueued []record.ItemID
	for _, c := range children {
		ids, _ := c.results()
		enqueued = append(enqueued, ids...)
	}
	total := len(enqueued)
	enqueuedAt := time.Since(led.start)
	t.Logf("%d items enqueued after %v", total, enqueuedAt.Round(time.Millisecond))

	// A third of the way through, one instance dies with its items running.
	killed := children[0]
	deadline := time.Now().Add(time.Minute)
	for led.count() < total/3 {
		if time.Now().After(deadline) {
			t.Fatalf("the fleet made %d calls within a minute, want %d", led.count(), total/3)
		}
		time.Sleep(20 * time.Millisecond) // polling the ledger's count, with a deadline
	}
	killed.kill()
	killedAt := time.Since(led.start)
	t.Logf("%s killed at %.2f s, after %d calls", killed.spec.Instance, killedAt.Seconds(), led.count())

	drained := waitDrained(t, obs, total, time.Minute)
	drainedAt := time.Since(led.start)
	sampler.setPhase("stop")
	for _, c := range children[1:] {
		c.stop(t)
	}
	sampler.report(t)
	t.Logf("drained at %.2f s", drainedAt.Seconds())

	// No connection refused or failed, for an enqueue or for anything an instance logs.
	var failedEnqueues, failedLines int
	var example []string
	for _, c := range children {
		_, errs := c.results()
		n, first := linesWith(c.stderrText(), connErrorMarks)
		failedEnqueues += len(errs)
		failedLines += n
		if len(errs) > 0 {
			example = append(example, c.spec.Instance+": "+errs[0])
		}
		if n > 0 {
			example = append(example, c.spec.Instance+": "+first[0])
		}
	}
	serverRefused := strings.Count(srv.Log(), "too many clients")
	if failedEnqueues+failedLines+serverRefused > 0 {
		t.Errorf("connection errors: %d enqueues failed, %d log lines of failed connections, the server refused %d; e.g.\n  %s",
			failedEnqueues, failedLines, serverRefused, strings.Join(example[:min(len(example), 5)], "\n  "))
	}
	// What else the instances logged (a lease of the rate limit that timed out, say).
	for _, c := range children {
		if text := c.stderrText(); text != "" {
			t.Logf("%s logged %d lines, the first: %s", c.spec.Instance, strings.Count(text, "\n"), strings.SplitN(text, "\n", 2)[0])
		}
	}
	if !bouncer {
		for _, phase := range []string{"start", "run"} {
			for app, l := range sampler.listening(phase) {
				if l.max != 0 {
					t.Errorf("%s, %s: %d notification connections with a budget of 1, want none", phase, app, l.max)
				}
			}
		}
	}

	// Nothing lost; nothing run twice but what the SIGKILL explains: an item the killed
	// instance was running when it died has an abandoned attempt of its (the sweep's row), and
	// may have reached its handler in it.
	var recovered int
	explained := checkRanOnce(t, obs, led, enqueued, drained, func(as []record.Attempt, calls []ledgerCall) string {
		lostToKill := 0
		for _, a := range as {
			if a.Instance == killed.spec.Instance && (a.Outcome == record.OutcomeAbandoned || a.Outcome == record.OutcomeInterrupted) {
				lostToKill++
			}
		}
		if len(calls)-1 <= lostToKill {
			return "the SIGKILL"
		}
		return ""
	})
	for _, id := range enqueued {
		for _, a := range attempts(t, obs, id) {
			if a.Instance == killed.spec.Instance && a.Outcome == record.OutcomeAbandoned {
				recovered++
			}
		}
	}
	t.Logf("%d items the killed instance was running came back after its lease; %d of them had reached their handler (run twice, explained)", recovered, explained["the SIGKILL"])
	if recovered == 0 {
		t.Errorf("the killed instance ran no item when it died: the kill tested nothing")
	}

	// The fleet's limit: every second after the enqueues in which the backlog kept the fleet
	// busy (what was left at its end was more than two seconds' worth: at the end a call that
	// finds the fleet's permits leased a lease period ahead is refused after its MaxWait, and
	// its item tried again after a backoff), but for the second of the kill, whose leased
	// permits (at most a lease period of the killed instance's share) pass unused.
	secs := int(drainedAt/time.Second) + 1
	counts := led.perSecond(secs)
	left := total
	var busy []int
	for s, n := range counts {
		left -= n
		if s >= int((enqueuedAt+time.Second-1)/time.Second) && left >= 2*fiftyRate && s != int(killedAt/time.Second) {
			busy = append(busy, s)
		}
	}
	t.Logf("calls per second: %v (enqueued by %.2f s, killed at %.2f s); the busy seconds: %v", counts, enqueuedAt.Seconds(), killedAt.Seconds(), busy)
	if len(busy) < 5 {
		t.Errorf("only %d busy seconds: the run did not measure the fleet's limit", len(busy))
	}
	if len(busy) == 0 {
		return
	}
	// On average over the busy seconds the fleet keeps to its limit, and uses most of it; and
	// no three seconds go far past it. Not each second within a few percent, as three
	// processes do (TestFleetRateLimitSharedByThreeProcesses): fifty processes and their
	// database on a small, busy machine stall now and then (a second of 7 calls, the next of
	// 58), and each instance places the permits it leased by a clock offset it estimates from
	// its leases' round trips, long and uneven here, which shifts them by up to half of one.
	var sum, within int
	for _, s := range busy {
		sum += counts[s]
		if float64(counts[s]) >= fiftyRate*0.9 && float64(counts[s]) <= fiftyRate*1.05 {
			within++
		}
	}
	mean := float64(sum) / float64(len(busy))
	t.Logf("the busy seconds' mean: %.1f calls (the limit %d); %d of %d busy seconds within 90..105%% of it", mean, fiftyRate, within, len(busy))
	if mean < fiftyRate*0.8 || mean > fiftyRate*1.05 {
		t.Errorf("the busy seconds' mean is %.1f calls, want %.1f..%.2f", mean, fiftyRate*0.8, fiftyRate*1.05)
	}
	for s := busy[0]; s+2 <= busy[len(busy)-1]; s++ {
		if n := counts[s] + counts[s+1] + counts[s+2]; float64(n) > 3*fiftyRate*1.15 {
			t.Errorf("seconds %d..%d: %d calls, more than %.2f", s, s+2, n, 3*fiftyRate*1.15)
		}
	}
}
