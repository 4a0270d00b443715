package durable

import "context"

// Scheduling reports whether q's scheduler runs (Start succeeded, no Shutdown yet). It reads
// no database, so a readiness probe may call it often.
func (q *Queue) Scheduling() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.sched != nil && !q.stopped
}

// MissingMigrations returns, in order, the migrations q's database lacks: the
// check Open makes with Config.SkipMigrations. It applies nothing.
func (q *Queue) MissingMigrations(ctx context.Context) ([]int, error) {
	return q.store.MissingMigrations(ctx)
}
