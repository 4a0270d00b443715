package durable_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

// BenchmarkSchedulerLimits is BenchmarkScheduler with concurrency limits set: "elsewhere", a
// limit on a key none of the items has, while the items carry another key (WithBreakerKey's
// column), the case of every item of an unlimited key in a queue that limits some; "limited",
// every item of one key limited to the workers, each taking and freeing a slot.
func BenchmarkSchedulerLimits(b *testing.B) {
	for _, bb := range benchBackends() {
		for _, workers := range []int{8, 32} {
			for _, mode := range []string{"elsewhere", "limited"} {
				b.Run(fmt.Sprintf("%s/workers=%d/%s", bb.name, workers, mode), func(b *testing.B) {
					be := bb.open(b)
					q := be.queue(b, durable.Config{})
					ctx := context.Background()
					st := durable.StoreOf(q)
					seed(b, st, b.N, time.Now())
					key := "other"
					if mode == "limited" {
						key = "api"
					}
					if _, err := st.DB().ExecContext(ctx, "UPDATE switchboard_items SET guard_key = '"+key+"'"); err != nil {
						b.Fatal(err)
					}
					must[record.ConcurrencyLimit](b)(q.SetConcurrencyLimit(ctx, "elsewhere", 4, "bench"))
					must[record.ConcurrencyLimit](b)(q.SetConcurrencyLimit(ctx, "api", workers, "bench"))
					b.ResetTimer()
					cpu := processCPU()
					elapsed := runDrain(b, q, b.N, workers)
					cpu = processCPU() - cpu
					b.StopTimer()
					b.ReportMetric(float64(b.N)/elapsed.Seconds(), "items/s")
					b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/item")
					if st := must[durable.Stats](b)(q.Stats(ctx)); st.Counts[record.StateSucceeded] != int64(b.N) {
						b.Fatalf("succeeded %d of %d", st.Counts[record.StateSucceeded], b.N)
					}
				})
			}
		}
	}
}
