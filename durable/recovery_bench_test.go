package durable_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
)

// BenchmarkRecoveredEndpoint measures what a recovered endpoint's backlog costs the other
// keys: 10,000 items parked on key k0 (its breaker open) while items of nine other keys arrive
// at a steady 200 a second, 8 workers, each item taking 1 ms. Phase "steady": 3 s of that load
// alone; phase "recovery": the breaker closes (Unpark: all 10,000 come due at once) and the
// same load goes on for 3 s. Reported: the other keys' pickup p99 (enqueue to handler start) in
// each phase and their ratio, and how many backlog items ran during the recovery phase. Run
// with -benchtime=1x.
func BenchmarkRecoveredEndpoint(b *testing.B) {
	for _, bb := range benchBackends() {
		b.Run(bb.name, func(b *testing.B) {
			be := bb.open(b)
			q := be.queue(b, durable.Config{})
			st := durable.StoreOf(q)
			now := time.Now()
			seedRows(b, be.name, st.DB(), "pending", 1, 10_000, now.Add(time.Hour))
			if _, err := st.DB().Exec(`UPDATE switchboard_items SET parked_key = 'k0'`); err != nil {
				b.Fatal(err)
			}
			var (
				mu      sync.Mutex
				sent    = map[int]time.Time{}
				waits   []time.Duration
				backlog int
			)
			m := mediatorFor(b, handlers{work: func(_ context.Context, w *Work) error {
				at := time.Now()
				mu.Lock()
				if t0, ok := sent[w.N]; ok {
					waits = append(waits, at.Sub(t0))
				} else {
					backlog++
				}
				mu.Unlock()
				time.Sleep(time.Millisecond) // the remote call
				return nil
			}})
			start(b, q, m, durable.SchedulerConfig{Workers: 8, PollInterval: time.Second})
			ctx := context.Background()
			n := bMark
			phase := func() (p99 time.Duration, ran int) {
				mu.Lock()
				waits, backlog = waits[:0], 0
				mu.Unlock()
				tick := time.NewTicker(5 * time.Millisecond)
				defer tick.Stop()
				for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
					<-tick.C
					n++
					mu.Lock()
					sent[n] = time.Now()
					mu.Unlock()
					if _, err := q.Enqueue(ctx, &Work{N: n}, durable.WithFairnessKey(fmt.Sprintf("e%d", n%9+1))); err != nil {
						b.Fatal(err)
					}
				}
				time.Sleep(200 * time.Millisecond) // the last items start
				mu.Lock()
				defer mu.Unlock()
				ws := slices.Clone(waits)
				slices.Sort(ws)
				return ws[(len(ws)-1)*99/100], backlog
			}
			b.ResetTimer()
			steady, _ := phase()
			if _, err := st.Unpark(ctx, []string{"k0"}, time.Now()); err != nil {
				b.Fatal(err)
			}
			recovery, ran := phase()
			b.StopTimer()
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			b.ReportMetric(ms(steady), "steady-p99-ms")
			b.ReportMetric(ms(recovery), "recovery-p99-ms")
			b.ReportMetric(float64(recovery)/float64(steady), "p99-ratio")
			b.ReportMetric(float64(ran), "backlog-ran")
			b.ReportMetric(0, "ns/op")
		})
	}
}
