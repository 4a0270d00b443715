package durable_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

type benchBackend struct {
	name string
	open func(b *testing.B) backend
}

// benchBackends returns SQLite and, when a DSN is set, PostgreSQL. Each open makes a fresh
// database.
func benchBackends() []benchBackend {
	out := []benchBackend{{"sqlite", func(b *testing.B) backend { return sqliteBackend(b) }}}
	if dsn := os.Getenv(pgDSNEnv); dsn != "" {
		out = append(out, benchBackend{"postgres", func(b *testing.B) backend { return postgresBackend(b, dsn) }})
	}
	return out
}

// BenchmarkScheduler measures items per second through the scheduler: claim, dispatch through
// the mediator to a no-op handler, fenced completion with an attempt row. Each iteration is one
// item; the clock runs from Start until Shutdown has written the last completion.
func BenchmarkScheduler(b *testing.B) {
	for _, bb := range benchBackends() {
		for _, workers := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("%s/workers=%d", bb.name, workers), func(b *testing.B) {
				benchScheduler(b, bb.open(b), workers)
			})
		}
	}
}

func benchScheduler(b *testing.B, be backend, workers int) {
	q := be.queue(b, durable.Config{})
	seed(b, durable.StoreOf(q), b.N, time.Now())
	b.ResetTimer()
	cpu := processCPU()
	elapsed := runDrain(b, q, b.N, workers)
	cpu = processCPU() - cpu
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "items/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/item")
	if st := must[durable.Stats](b)(q.Stats(context.Background())); st.Counts[record.StateSucceeded] != int64(b.N) {
		b.Fatalf("succeeded %d of %d", st.Counts[record.StateSucceeded], b.N)
	}
}

// runDrain runs a scheduler with workers workers and a no-op handler on store until n items
// have been handled, and returns the time from Start until Shutdown returned.
func runDrain(b *testing.B, q *durable.Queue, n, workers int) time.Duration {
	b.Helper()
	var count atomic.Int64
	all := make(chan struct{})
	m := mediatorFor(b, handlers{work: func(ctx context.Context, w *Work) error {
		if count.Add(1) == int64(n) {
			close(all)
		}
		return nil
	}})
	s := must[*durable.Scheduler](b)(durable.NewScheduler(q, m, durable.SchedulerConfig{
		Workers: workers, BatchSize: 500, PollInterval: 10 * time.Millisecond,
		Logger: zap.NewNop(),
	}))
	begin := time.Now()
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	<-all
	if err := s.Shutdown(context.Background()); err != nil {
		b.Fatal(err)
	}
	return time.Since(begin)
}

// processCPU is the CPU time this process has used, user and system: the Go side of a drain
// (the database server's work is another process's).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkClaim measures the latency of one claim round trip of a batch of due items.
func BenchmarkClaim(b *testing.B) {
	for _, bb := range benchBackends() {
		for _, batch := range []int{1, 100} {
			b.Run(fmt.Sprintf("%s/batch=%d", bb.name, batch), func(b *testing.B) {
				store := bb.open(b).open(b)
				now := time.Now()
				seed(b, store, b.N*batch, now)
				ctx := context.Background()
				b.ResetTimer()
				for range b.N {
					got, err := store.Claim(ctx, "bench", now, time.Minute, batch)
					if err != nil || len(got) != batch {
						b.Fatalf("claimed %d: %v", len(got), err)
					}
				}
				b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "items/s")
			})
		}
	}
}
