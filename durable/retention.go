package durable

import (
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/durable/internal/store"
)

// defaultRetention is how long succeeded items are kept by default (SchedulerConfig.Retention).
const defaultRetention = 24 * time.Hour

// pruneInterval is how often a scheduler deletes the succeeded items older than its retention:
// retention is counted in hours, so a minute more of a finished row costs nothing, and an idle
// pass is one probe of a small index. A variable for the tests.
var pruneInterval = time.Minute

// pruner runs a prune pass when the scheduler starts and then every pruneInterval, until it
// stops. Retention below zero keeps every item: it runs none.
func (s *scheduler) pruner() {
	if s.cfg.Retention < 0 {
		return
	}
	t := time.NewTicker(pruneInterval)
	defer t.Stop()
	for {
		s.prunePass()
		select {
		case <-s.stop:
			return
		case <-s.keeperEnd:
			return
		case <-t.C:
		}
	}
}

// prunePass deletes the succeeded items (and their attempt rows) whose last change is older
// than the retention, PruneBatch at a time, each batch its own transaction and store call
// under StoreTimeout, until a batch finds fewer, the database fails (logged like every store
// call, and tried again next pass), or the scheduler stops. On PostgreSQL one instance prunes at
// a time: when another holds the prune lock, this pass ends at once. It returns how many items
// it deleted.
func (s *scheduler) prunePass() int {
	if s.cfg.Retention < 0 {
		return 0
	}
	now := s.q.clock.Now()
	before := now.Add(-s.cfg.Retention)
	total := 0
	for !s.stopping() {
		ctx, cancel := s.storeCtx()
		n, busy, err := s.q.store.Prune(ctx, before, now)
		cancel()
		if err != nil && s.stopping() {
			break // a batch cut short by the stop: nothing to report
		}
		s.noteStore("prune succeeded items", err)
		total += n
		if err != nil || busy || n < store.PruneBatch {
			break
		}
	}
	if total > 0 {
		s.cfg.Logger.Debug("durable: pruned succeeded items", zap.String("instance", s.cfg.InstanceID), zap.Int("items", total),
			zap.Time("before", before))
	}
	return total
}

// Prune runs a prune pass now, as the scheduler does every pruneInterval, and returns how many
// items it deleted.
func (s *scheduler) Prune() int { return s.prunePass() }
