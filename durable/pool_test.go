package durable_test

import (
	"context"
	"sync"
	"testing"

	"github.com/switchboard-go/switchboard/durable"
)

// The pool a queue opens on PostgreSQL (postgres.Open) keeps the connections its peak used:
// sixteen calls at once (a scheduler's workers each taking a concurrency slot, its claim loop,
// heartbeat and listener) do not close all but two connections when they end, to dial and
// prepare their statements again at the next peak (database/sql keeps two idle by default).
func TestPostgresPoolKeepsItsPeakConnections(t *testing.T) {
	b := pgBackend(t)
	q := b.queue(t, durable.Config{})
	db := durable.StoreOf(q).DB()
	for range 3 {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 16 {
			wg.Go(func() {
				<-start
				if _, err := db.ExecContext(context.Background(), "SELECT pg_sleep(0.05)"); err != nil {
					t.Error(err)
				}
			})
		}
		close(start)
		wg.Wait()
	}
	st := db.Stats()
	if st.MaxIdleClosed > 0 || st.OpenConnections < 16 {
		t.Fatalf("after three peaks of 16 calls the pool closed %d connections for want of idle room and holds %d (opened in all: %d)",
			st.MaxIdleClosed, st.OpenConnections, st.OpenConnections+int(st.MaxIdleClosed))
	}
}
