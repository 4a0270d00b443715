package benchmarks

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/durabletest"
	"github.com/switchboard-go/switchboard/durable/record"
)

// pickupsPerOp is how many items one op of BenchmarkFleetPickup enqueues (run it with
// -benchtime 1x: a count of iterations above 1 runs the case once with 1 first, as every
// benchmark does, which opens the fleet twice).
const pickupsPerOp = 200

// pickupCase is one row of BenchmarkFleetPickup.
type pickupCase struct {
	via  string
	poll time.Duration // the schedulers' PollInterval; 0: the default, 1 s
	n    int           // instances, the one that enqueues included
}

func (c pickupCase) name() string {
	if c.via == direct {
		return fmt.Sprintf("%s/instances=%d", c.via, c.n)
	}
	return fmt.Sprintf("%s/poll=%v/instances=%d", c.via, c.poll, c.n)
}

// pickupCases are BenchmarkFleetPickup's rows: two instances and fifty directly (the wake goes
// through LISTEN/NOTIFY), fifty through PgBouncer (no LISTEN: the schedulers poll) at a poll
// interval of 100 ms and at the default, 1 s.
var pickupCases = []pickupCase{
	{via: direct, n: 2},
	{via: direct, n: 50},
	{via: pgbouncer, poll: 100 * time.Millisecond, n: 50},
	{via: pgbouncer, poll: time.Second, n: 50},
}

// BenchmarkFleetPickup measures how long an item due now waits for its handler when one
// instance enqueues it and another instance's scheduler picks it up: from the start of the
// Enqueue to the start of the handler. The fleet is openFleet's (N instances on a database of
// their own, each with a BreakerStore with a subscriber); the instance that enqueues runs no
// scheduler, so that another always picks the item up, and the other N−1 run one with the
// default settings but PollInterval. Each item is enqueued once the outcome of the one before
// is stored (every scheduler idle again), pickupsPerOp per op; it reports the median (p50-ms)
// and the 95th percentile (p95-ms) in milliseconds, and the mean (mean-ms). Through
// Config.OnClaim it also splits the wait: wake-p50-ms is the median from the start of the
// Enqueue to the start of the claim that took the item (the insert, the notification or the
// poll, the claim loop's wake), claim-p50-ms the median of that claim's round trip, and
// claims/item the claims the whole fleet made per item (the woken schedulers' and the polls').
//
// Directly, the enqueue's notification (NOTIFY, after its commit) wakes every other
// instance's scheduler, and all of them claim at once; through PgBouncer, without
// notifications, the first of the schedulers' polls after the commit finds it, so that with
// N−1 schedulers polling out of step the wait is a fraction of the poll interval.
func BenchmarkFleetPickup(b *testing.B) {
	dsn := pgDSN(b)
	if dsn == "" {
		b.Skipf("%s not set: the PostgreSQL rows are skipped", durabletest.PostgresDSNEnv)
	}
	for _, c := range pickupCases {
		b.Run(c.name(), func(b *testing.B) {
			bouncer := bouncerDSN(b)
			if c.via == pgbouncer && bouncer == "" {
				b.Skipf("%s not set: the PgBouncer rows are skipped", bouncerDSNEnv)
			}
			benchFleetPickup(b, c, dsn, bouncer)
		})
	}
}

// wonClaim is the claim that took an item: when its round trip started, and how long it took.
type wonClaim struct {
	start time.Time
	took  time.Duration
}

// quantile returns the q-quantile of ds (nearest rank below), sorting ds.
func quantile(ds []time.Duration, q float64) time.Duration {
	slices.Sort(ds)
	return ds[int(float64(len(ds)-1)*q)]
}

// pickedUp is a handler's start: the item and when.
type pickedUp struct {
	n  int64
	at time.Time
}

func benchFleetPickup(b *testing.B, c pickupCase, dsn, bouncer string) {
	d := newOwnDatabase(b, dsn, bouncer, "bench_pickup_")
	started := make(chan pickedUp, 1)
	settled := make(chan struct{}, 1)
	won := make(chan wonClaim, 1)
	var claims atomic.Int64
	fleet := openFleet(b, fleetConfig{db: d, via: c.via, n: c.n, schedulers: c.n - 1,
		queue: durable.Config{PollInterval: c.poll,
			OnSettled: []func(string, record.Settled){func(string, record.Settled) {
				select {
				case settled <- struct{}{}:
				default:
				}
			}},
			OnClaim: []func(time.Duration, int, error){func(took time.Duration, n int, _ error) {
				claims.Add(1)
				if n > 0 {
					end := time.Now()
					select {
					case won <- wonClaim{start: end.Add(-took), took: took}:
					default:
					}
				}
			}},
		},
		handle: func(_ string, it *fleetItem) {
			at := time.Now()
			select {
			case started <- pickedUp{it.N, at}:
			default:
			}
		}})
	producer := fleet[c.n-1].q
	if c.via == direct {
		waitListening(b, d, c.n) // the producer's breaker store listens too
	}
	ctx := context.Background()
	total := b.N * pickupsPerOp
	waits := make([]time.Duration, 0, total)
	wakes := make([]time.Duration, 0, total)
	trips := make([]time.Duration, 0, total)
	b.ResetTimer()
	claims0 := claims.Load()
	for i := range int64(total) {
		t0 := time.Now()
		if _, err := producer.Enqueue(ctx, &fleetItem{N: i}); err != nil {
			b.Fatal(err)
		}
		deadline := time.NewTimer(30 * time.Second)
		select {
		case p := <-started:
			if p.n != i {
				b.Fatalf("item %d started while waiting for item %d", p.n, i)
			}
			waits = append(waits, p.at.Sub(t0))
		case <-deadline.C:
			b.Fatalf("item %d: no handler started within 30 s", i)
		}
		select {
		case w := <-won:
			wakes = append(wakes, w.start.Sub(t0))
			trips = append(trips, w.took)
		case <-deadline.C:
			b.Fatalf("item %d: no claim of it seen within 30 s", i)
		}
		select {
		case <-settled:
		case <-deadline.C:
			b.Fatalf("item %d: no outcome stored within 30 s", i)
		}
		deadline.Stop()
	}
	claimed := claims.Load() - claims0
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	var sum time.Duration
	for _, w := range waits {
		sum += w
	}
	b.ReportMetric(ms(quantile(waits, 0.5)), "p50-ms")
	b.ReportMetric(ms(quantile(waits, 0.95)), "p95-ms")
	b.ReportMetric(ms(sum/time.Duration(len(waits))), "mean-ms")
	b.ReportMetric(ms(quantile(wakes, 0.5)), "wake-p50-ms")
	b.ReportMetric(ms(quantile(trips, 0.5)), "claim-p50-ms")
	b.ReportMetric(float64(claimed)/float64(total), "claims/item")
	b.ReportMetric(0, "ns/op")
}
