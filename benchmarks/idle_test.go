package benchmarks

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable/durabletest"
)

// idleSettle is how long an idle fleet runs before its window: past the start's burst (the
// migration check, the first claims and reads of every loop), and long enough that the
// backends have added that burst to pg_stat_database (at most once a second each).
const idleSettle = 3 * time.Second

// idleWindow is one op of BenchmarkIdleFleet: b.N windows of 5 s are measured (run it with
// -benchtime 1x: a count of iterations above 1 runs the case once with 1 first, as every
// benchmark does, which opens the fleet twice).
const idleWindow = 5 * time.Second

// idleSample is how often the window counts the connections.
const idleSample = 250 * time.Millisecond

// BenchmarkIdleFleet measures what a fleet with nothing to do costs the database: N instances
// (each its own durable.Open, pool and InstanceID, postgres.Open's default budget) on a
// PostgreSQL database of their own, each with a started scheduler at the default settings
// (PollInterval 1 s) and a BreakerStore (defaults: RefreshInterval 1 s) with one subscriber,
// reached directly (the instances LISTEN) or through PgBouncer in transaction pooling mode
// (TransactionPooling: no LISTEN, the schedulers poll every 1 s). After idleSettle, a window of
// b.N × 5 s (run it with -benchtime 1x) counts:
//
//   - xact/s: the database's transactions per second, from pg_stat_database's xact_commit +
//     xact_rollback of its own database, read from another database so that the reads are not
//     counted (pg_stat_statements needs a server started with it preloaded, which this
//     benchmark does not ask for). The queue sends its statements outside transactions, so
//     each statement is one; through PgBouncer, its own statements count too. xact/s/instance
//     is the same divided by N.
//   - conns: the connections to PostgreSQL in pg_stat_activity, the mean of samples every
//     250 ms. Directly, those of the instances, told apart by application_name (each
//     instance's InstanceID); conns/instance is conns divided by N, max-conns/instance the
//     most one instance held in any sample, and used-conns/instance the instance's
//     connections that ran a statement in the window (the listening one, which runs none, is
//     not among them), at its end, divided by N. Through PgBouncer, PgBouncer's server
//     connections to the database, which it shares between its clients.
//   - client-conns (through PgBouncer): the instances' connections to PgBouncer (its SHOW
//     CLIENTS), the mean of the samples, and client-conns/instance, the same divided by N.
func BenchmarkIdleFleet(b *testing.B) {
	dsn := pgDSN(b)
	if dsn == "" {
		b.Skipf("%s not set: the PostgreSQL rows are skipped", durabletest.PostgresDSNEnv)
	}
	for _, via := range []string{direct, pgbouncer} {
		b.Run(via, func(b *testing.B) {
			bouncer := bouncerDSN(b)
			if via == pgbouncer && bouncer == "" {
				b.Skipf("%s not set: the PgBouncer rows are skipped", bouncerDSNEnv)
			}
			for _, n := range []int{1, 10, 50} {
				b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) { benchIdleFleet(b, dsn, bouncer, via, n) })
			}
		})
	}
}

func benchIdleFleet(b *testing.B, dsn, bouncer, via string, n int) {
	d := newOwnDatabase(b, dsn, bouncer, "bench_idle_")
	openFleet(b, fleetConfig{db: d, via: via, n: n, schedulers: n})
	var console *sql.DB
	if via == direct {
		waitListening(b, d, n)
	} else {
		console = openBouncerConsole(b, bouncer)
	}
	ctx := context.Background()
	settle := time.NewTimer(idleSettle)
	<-settle.C

	b.ResetTimer()
	x0, err := d.xacts(ctx)
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	window := time.Duration(b.N) * idleWindow
	var samples, conns, clients, most int
	tick := time.NewTicker(idleSample)
	defer tick.Stop()
	for time.Since(t0) < window {
		<-tick.C
		total, byApp, err := d.serverConns(ctx)
		if err != nil {
			b.Fatal(err)
		}
		samples++
		if via == pgbouncer {
			conns += total
			ct, err := d.bouncerClients(ctx, console)
			if err != nil {
				b.Fatal(err)
			}
			clients += ct
			continue
		}
		for app, c := range byApp {
			if strings.HasPrefix(app, d.name+"-") {
				conns += c
				most = max(most, c)
			}
		}
	}
	x1, err := d.xacts(ctx)
	if err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(t0)
	used := 0
	if via == direct {
		if used, err = d.usedConns(ctx, d.name+"-", elapsed); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	rate := float64(x1-x0) / elapsed.Seconds()
	mean := float64(conns) / float64(samples)
	b.ReportMetric(rate, "xact/s")
	b.ReportMetric(rate/float64(n), "xact/s/instance")
	b.ReportMetric(mean, "conns")
	b.ReportMetric(mean/float64(n), "conns/instance")
	if via == direct {
		b.ReportMetric(float64(most), "max-conns/instance")
		b.ReportMetric(float64(used)/float64(n), "used-conns/instance")
	} else {
		mc := float64(clients) / float64(samples)
		b.ReportMetric(mc, "client-conns")
		b.ReportMetric(mc/float64(n), "client-conns/instance")
	}
	b.ReportMetric(0, "ns/op")
}
