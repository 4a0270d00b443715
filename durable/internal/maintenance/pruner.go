package maintenance

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/durable/internal/dbhealth"
	"github.com/switchboard-go/switchboard/durable/internal/store"
)

// PruneInterval is how often a pruner deletes the succeeded items older than its retention:
// retention is counted in hours, so a minute more of a finished row costs nothing, and an idle
// pass is one probe of a small index. A variable for the tests.
var PruneInterval = time.Minute

// PruneStore is what the pruner asks of the database.
type PruneStore interface {
	Prune(ctx context.Context, before, now time.Time) (n int, busy bool, err error)
}

// FinishedMover is what the pruner asks of a database whose finished items may still be in the
// claim's table, to be moved out (store.Store.MoveFinished): one batch of at most
// store.PruneBatch a call, busy when another instance holds the prune lock.
type FinishedMover interface {
	MoveFinished(ctx context.Context) (n int, busy bool, err error)
}

// HistoryPruneStore is what the pruner asks of a database that keeps the history.
type HistoryPruneStore interface {
	PruneHistory(ctx context.Context, before time.Time) (int, error)
}

// PrunerConfig configures a Pruner; every field is required but History.
type PrunerConfig struct {
	Store     PruneStore
	Clock     behaviors.Clock
	Instance  string
	Retention time.Duration // below zero: keep every item
	// History, when not nil, is the history whose minutes older than HistoryRetention each
	// pass deletes (below zero: none).
	History          HistoryPruneStore
	HistoryRetention time.Duration
	StoreContext     func() (context.Context, context.CancelFunc)
	Health           *dbhealth.Health
	Logger           *zap.Logger
	// Stopping reports that the instance stops: a pass in progress ends.
	Stopping func() bool
}

// moveRecheck is the most passes a pruner lets go by without moving finished items once a
// move found none. Items finish in the claim's table only from instances of a version before
// the finished items' table (a rolling upgrade's), and a look for them reads past every
// succeeded item that holds its dedupe key for its uniqueness window (a window's worth of
// them): looked for at every pass while none come, each pass read them all. After a move
// that found none the wait doubles, from one pass to moveRecheck (an hour at the default
// interval); a move that found some looks again at the next pass.
const moveRecheck = 64

// Pruner deletes the succeeded items older than its retention.
type Pruner struct {
	cfg PrunerConfig
	// moveWait is how many passes go by after the next before the next move (0: at the next),
	// moveSkip how many of them are left.
	moveWait, moveSkip int
}

// NewPruner returns a pruner configured by cfg.
func NewPruner(cfg PrunerConfig) *Pruner { return &Pruner{cfg: cfg} }

// Run runs a pass at once and then every PruneInterval, until stop is closed. With negative
// retentions (items and history) it runs none.
func (p *Pruner) Run(stop <-chan struct{}) {
	_, moves := p.cfg.Store.(FinishedMover)
	if p.cfg.Retention < 0 && (p.cfg.History == nil || p.cfg.HistoryRetention < 0) && !moves {
		return
	}
	t := time.NewTicker(PruneInterval)
	defer t.Stop()
	for {
		p.Pass()
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// Pass deletes the succeeded items (and their attempt rows) whose last change is older than
// the retention, store.PruneBatch at a time, each batch its own transaction and store call,
// until a batch finds fewer, the database fails (logged like every store call, and tried again
// next pass), or the instance stops. On PostgreSQL one instance prunes at a time: when another
// holds the prune lock, the pass ends at once. Then it deletes the history's minutes older
// than the history's retention, unless another instance held the prune lock (it does so). It
// returns how many items it deleted. First, on a store that moves finished items out of the
// claim's table (FinishedMover), it moves those still there, a batch at a time, the same way.
func (p *Pruner) Pass() int {
	p.moveFinished()
	if p.cfg.Retention < 0 {
		p.pruneHistory()
		return 0
	}
	now := p.cfg.Clock.Now()
	before := now.Add(-p.cfg.Retention)
	total, lockHeld, _ := p.batches("prune succeeded items", func(ctx context.Context) (int, bool, error) {
		return p.cfg.Store.Prune(ctx, before, now)
	})
	if !lockHeld {
		p.pruneHistory()
	}
	if total > 0 {
		p.cfg.Logger.Debug("durable: pruned succeeded items", zap.String("instance", p.cfg.Instance), zap.Int("items", total),
			zap.Time("before", before))
	}
	return total
}

// moveFinished moves the finished items still in the claim's table out of it, a batch a
// transaction, as Pass prunes; after a move that found none it waits, as moveRecheck says.
func (p *Pruner) moveFinished() {
	m, ok := p.cfg.Store.(FinishedMover)
	if !ok {
		return
	}
	if p.moveSkip > 0 {
		p.moveSkip--
		return
	}
	total, busy, done := p.batches("move finished items", m.MoveFinished)
	switch {
	case total > 0:
		p.cfg.Logger.Info("durable: moved finished items out of the claim's table", zap.String("instance", p.cfg.Instance), zap.Int("items", total))
		p.moveWait = 0
	case done && !busy:
		p.moveWait = min(max(2*p.moveWait, 1), moveRecheck)
	}
	p.moveSkip = p.moveWait
}

// batches calls batch, each call a store call under StoreContext noted as what, until a batch
// does fewer than store.PruneBatch, another instance holds the prune lock (busy), the database
// fails or the instance stops; it returns the batches' total, whether the lock was busy, and
// whether they ran to a batch that did fewer (done: not a failure, the lock or the stop).
func (p *Pruner) batches(what string, batch func(ctx context.Context) (n int, busy bool, err error)) (total int, busy, done bool) {
	for !p.cfg.Stopping() {
		ctx, cancel := p.cfg.StoreContext()
		n, held, err := batch(ctx)
		cancel()
		if err != nil && p.cfg.Stopping() {
			break // a batch cut short by the stop: nothing to report
		}
		p.cfg.Health.Note(what, err)
		total, busy = total+n, busy || held
		if err != nil || held || n < store.PruneBatch {
			done = err == nil && !held
			break
		}
	}
	return total, busy, done
}

// pruneHistory deletes the history's minutes older than its retention: one statement over a
// range of the table's primary key, a row per instance a minute.
func (p *Pruner) pruneHistory() {
	if p.cfg.History == nil || p.cfg.HistoryRetention < 0 || p.cfg.Stopping() {
		return
	}
	ctx, cancel := p.cfg.StoreContext()
	_, err := p.cfg.History.PruneHistory(ctx, p.cfg.Clock.Now().Add(-p.cfg.HistoryRetention))
	cancel()
	if err != nil && p.cfg.Stopping() {
		return
	}
	p.cfg.Health.Note("prune history", err)
}
