package durable_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
)

// BenchmarkPickup measures how long an item due now waits for its handler: from the start of
// its Enqueue to the start of its handler, with the scheduler idle and PollInterval its default
// (1 s), so that only a wake makes the pickup faster than a poll. Each iteration enqueues one
// item and waits for its handler to start; it reports the median and the 99th percentile in
// milliseconds (run with -benchtime=Nx, N a few hundred, for a stable p99).
//   - sqlite/one, postgres/one: the queue that enqueues runs the scheduler (a direct wake).
//   - postgres/two: one queue enqueues and another, with a pool of its own on the same schema
//     in the same process, runs the scheduler: the wake goes through the database (NOTIFY),
//     as between two instances.
func BenchmarkPickup(b *testing.B) {
	b.Run("sqlite/one", func(b *testing.B) {
		q := sqliteBackend(b).queue(b, durable.Config{})
		benchPickup(b, q, q)
	})
	dsn := os.Getenv(pgDSNEnv)
	b.Run("postgres/one", func(b *testing.B) {
		if dsn == "" {
			b.Skipf("%s not set", pgDSNEnv)
		}
		q := postgresBackend(b, dsn).queue(b, durable.Config{})
		benchPickup(b, q, q)
	})
	b.Run("postgres/two", func(b *testing.B) {
		if dsn == "" {
			b.Skipf("%s not set", pgDSNEnv)
		}
		be := postgresBackend(b, dsn)
		benchPickup(b, be.queue(b, durable.Config{}), be.queue(b, durable.Config{}))
	})
}

// benchPickup enqueues on producer items that worker's scheduler runs.
func benchPickup(b *testing.B, producer, worker *durable.Queue) {
	started := make(chan time.Time, 1)
	m := mediatorFor(b, handlers{work: func(context.Context, *Work) error {
		started <- time.Now()
		return nil
	}})
	claimed := make(chan struct{}, 1)
	start(b, worker, m, durable.SchedulerConfig{PollInterval: time.Second, OnClaim: []func(time.Duration, int, error){
		func(time.Duration, int, error) {
			select {
			case claimed <- struct{}{}:
			default:
			}
		}}})
	<-claimed // the scheduler runs: its first look found nothing
	ctx := context.Background()
	waits := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		if _, err := producer.Enqueue(ctx, &Work{N: i}); err != nil {
			b.Fatal(err)
		}
		select {
		case at := <-started:
			waits = append(waits, at.Sub(t0))
		case <-time.After(30 * time.Second):
			b.Fatalf("item %d: no handler started within 30 s", i)
		}
	}
	b.StopTimer()
	slices.Sort(waits)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(waits[len(waits)/2]), "p50-ms")
	b.ReportMetric(ms(waits[(len(waits)-1)*99/100]), "p99-ms")
	b.ReportMetric(0, "ns/op")
}
