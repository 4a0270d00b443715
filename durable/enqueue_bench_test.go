package durable_test

import (
	"context"
	"testing"

	"github.com/switchboard-go/switchboard/durable"
)

// BenchmarkEnqueue measures one Enqueue of a small request: encode, insert, answer. serial is
// one caller; parallel is GOMAXPROCS×4 callers sharing the queue (on SQLite they take turns on
// its one connection).
func BenchmarkEnqueue(b *testing.B) {
	for _, bb := range benchBackends() {
		b.Run(bb.name+"/serial", func(b *testing.B) {
			q := bb.open(b).queue(b, durable.Config{})
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, err := q.Enqueue(ctx, &Work{N: i}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(bb.name+"/parallel", func(b *testing.B) {
			q := bb.open(b).queue(b, durable.Config{})
			ctx := context.Background()
			b.ReportAllocs()
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := q.Enqueue(ctx, &Work{N: 1}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
