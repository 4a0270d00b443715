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

// PrunerConfig configures a Pruner; every field is required.
type PrunerConfig struct {
	Store        PruneStore
	Clock        behaviors.Clock
	Instance     string
	Retention    time.Duration // below zero: keep every item
	StoreContext func() (context.Context, context.CancelFunc)
	Health       *dbhealth.Health
	Logger       *zap.Logger
	// Stopping reports that the instance stops: a pass in progress ends.
	Stopping func() bool
}

// Pruner deletes the succeeded items older than its retention.
type Pruner struct{ cfg PrunerConfig }

// NewPruner returns a pruner configured by cfg.
func NewPruner(cfg PrunerConfig) *Pruner { return &Pruner{cfg: cfg} }

// Run runs a pass at once and then every PruneInterval, until stop is closed. A negative
// retention keeps every item: it runs none.
func (p *Pruner) Run(stop <-chan struct{}) {
	if p.cfg.Retention < 0 {
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
// holds the prune lock, the pass ends at once. It returns how many items it deleted.
func (p *Pruner) Pass() int {
	if p.cfg.Retention < 0 {
		return 0
	}
	now := p.cfg.Clock.Now()
	before := now.Add(-p.cfg.Retention)
	total := 0
	for !p.cfg.Stopping() {
		ctx, cancel := p.cfg.StoreContext()
		n, busy, err := p.cfg.Store.Prune(ctx, before, now)
		cancel()
		if err != nil && p.cfg.Stopping() {
			break // a batch cut short by the stop: nothing to report
		}
		p.cfg.Health.Note("prune succeeded items", err)
		total += n
		if err != nil || busy || n < store.PruneBatch {
			break
		}
	}
	if total > 0 {
		p.cfg.Logger.Debug("durable: pruned succeeded items", zap.String("instance", p.cfg.Instance), zap.Int("items", total),
			zap.Time("before", before))
	}
	return total
}
