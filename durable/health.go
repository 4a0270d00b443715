package durable

import (
	"context"

	"github.com/switchboard-go/switchboard/durable/internal/store"
)

// Scheduling reports whether q's scheduler runs: Start succeeded and Shutdown has not been
// called. It reads state only, never the database, so a readiness probe (package health) may
// call it as often as it likes.
func (q *Queue) Scheduling() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.sched != nil && !q.stopped
}

// MissingMigrations returns the versions of the embedded migrations q's database has not
// applied, in order: none when the schema is what this package needs. It is the check Open
// makes with Config.SkipMigrations (an older migration added beside the newest counts as
// missing), and it only reads: it applies nothing. Its error says the database did not answer
// within ctx.
func (q *Queue) MissingMigrations(ctx context.Context) ([]int, error) {
	return store.MissingMigrations(ctx, q.store.DB(), q.store.Engine())
}
