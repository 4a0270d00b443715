package durable_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable"
	istore "github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
)

// seedLetters stores n failed dead letters of Work requests and returns their ids.
func seedLetters(b *testing.B, s *istore.Store, n int) []record.DeadLetterID {
	b.Helper()
	ids := make([]record.DeadLetterID, n)
	for i := range ids {
		id, err := s.InsertDeadLetter(context.Background(), istore.NewDeadLetter{Source: "bench", Name: "test.work",
			Payload: []byte(`{"n":1}`), Error: "bad", Now: time.Now()})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = record.DeadLetterID(id)
	}
	return ids
}

// BenchmarkReplay measures one replay of one letter to a no-op handler: the lease, the
// dispatch through the mediator and the recorded outcome with its event.
func BenchmarkReplay(b *testing.B) {
	for _, bb := range benchBackends() {
		b.Run(bb.name, func(b *testing.B) {
			q := bb.open(b).queue(b, durable.Config{})
			m := mediatorFor(b, handlers{})
			ids := seedLetters(b, durable.StoreOf(q), b.N)
			ctx := context.Background()
			b.ResetTimer()
			for i := range b.N {
				if res, err := q.Replay(ctx, m, ids[i], "bench"); res != durable.Replayed || err != nil {
					b.Fatal(res, err)
				}
			}
		})
	}
}

// BenchmarkReplayMany measures a bulk replay of 100 letters to a no-op handler.
func BenchmarkReplayMany(b *testing.B) {
	for _, bb := range benchBackends() {
		b.Run(bb.name, func(b *testing.B) {
			q := bb.open(b).queue(b, durable.Config{})
			m := mediatorFor(b, handlers{})
			ctx := context.Background()
			for range b.N {
				b.StopTimer()
				ids := seedLetters(b, durable.StoreOf(q), 100)
				b.StartTimer()
				results, err := q.ReplayMany(ctx, m, ids, "bench")
				if err != nil || results[99].Resolution != durable.Replayed {
					b.Fatal(results, err)
				}
			}
		})
	}
}

// BenchmarkDeadLettersPage measures a dashboard's listing of dead letters: the first page of 50
// of 2,000 failed letters, with its total.
func BenchmarkDeadLettersPage(b *testing.B) {
	for _, bb := range benchBackends() {
		b.Run(bb.name, func(b *testing.B) {
			q := bb.open(b).queue(b, durable.Config{})
			seedLetters(b, durable.StoreOf(q), 2_000)
			ctx := context.Background()
			b.ResetTimer()
			for range b.N {
				page, err := q.DeadLetters(ctx, durable.DeadLetterFilter{})
				if err != nil || len(page.Letters) != 50 || page.Total != 2_000 || page.Over {
					b.Fatal(len(page.Letters), page.Total, page.Over, err)
				}
			}
		})
	}
}
