package maintenance

import (
	"context"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/durable/internal/dbhealth"
	"github.com/switchboard-go/switchboard/durable/internal/store"
)

// Leases holds the leases of the items an instance has claimed and not yet completed or
// released: the claim loop adds and removes them, the rescuer extends them. It is keyed by
// fence, not item id: after a stalled worker lost its lease, the same instance may claim the
// item again while the stale dispatch still runs, and ending the stale one must not forget the
// new one.
type Leases struct {
	mu sync.Mutex
	m  map[store.Fence]struct{}
}

// Hold records the leases of claimed items.
func (l *Leases) Hold(items []store.Claimed) {
	if len(items) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[store.Fence]struct{}{}
	}
	for _, it := range items {
		l.m[it.Fence()] = struct{}{}
	}
}

// Drop forgets the leases of the completions of batch.
func (l *Leases) Drop(batch []store.Completion) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range batch {
		delete(l.m, c.Fence)
	}
}

// ids returns the ids of the items held, sorted, each once.
func (l *Leases) ids() []store.ItemID {
	l.mu.Lock()
	ids := make([]store.ItemID, 0, len(l.m))
	for f := range l.m {
		ids = append(ids, f.ItemID)
	}
	l.mu.Unlock()
	slices.Sort(ids)
	return slices.Compact(ids)
}

// RescueStore is what the rescuer asks of the database.
type RescueStore interface {
	Extend(ctx context.Context, owner string, ids []store.ItemID, until time.Time) error
	Sweep(ctx context.Context, now time.Time) (int, error)
}

// RescuerConfig configures a Rescuer; every field is required.
type RescuerConfig struct {
	Store             RescueStore
	Leases            *Leases
	Clock             behaviors.Clock
	Instance          string
	Lease             time.Duration // how far a heartbeat extends a lease
	HeartbeatInterval time.Duration
	SweepInterval     time.Duration
	StoreContext      func() (context.Context, context.CancelFunc)
	Health            *dbhealth.Health
	Logger            *zap.Logger
	// Swept is called after a sweep that returned items to the queue (the claim loop claims
	// them now).
	Swept func()
}

// Rescuer extends the leases of an instance's running items and sweeps expired leases.
type Rescuer struct{ cfg RescuerConfig }

// NewRescuer returns a rescuer configured by cfg.
func NewRescuer(cfg RescuerConfig) *Rescuer { return &Rescuer{cfg: cfg} }

// Run sweeps once, then extends leases every HeartbeatInterval and sweeps every SweepInterval
// until stop is closed.
func (r *Rescuer) Run(stop <-chan struct{}) {
	hb := time.NewTicker(r.cfg.HeartbeatInterval)
	defer hb.Stop()
	sweep := time.NewTicker(r.cfg.SweepInterval)
	defer sweep.Stop()
	r.sweepOnce()
	for {
		select {
		case <-stop:
			return
		case <-hb.C:
			r.heartbeat()
		case <-sweep.C:
			r.sweepOnce()
		}
	}
}

// heartbeat extends the leases held.
func (r *Rescuer) heartbeat() {
	ids := r.cfg.Leases.ids()
	if len(ids) == 0 {
		return // nothing to extend: no call, so nothing to say about the database
	}
	ctx, cancel := r.cfg.StoreContext()
	err := r.cfg.Store.Extend(ctx, r.cfg.Instance, ids, r.cfg.Clock.Now().Add(r.cfg.Lease))
	cancel()
	r.cfg.Health.Note("extend leases", err)
}

func (r *Rescuer) sweepOnce() {
	ctx, cancel := r.cfg.StoreContext()
	n, err := r.cfg.Store.Sweep(ctx, r.cfg.Clock.Now())
	cancel()
	r.cfg.Health.Note("sweep expired leases", err)
	if err != nil {
		return
	}
	if n > 0 {
		r.cfg.Logger.Info("durable: swept expired leases", zap.String("instance", r.cfg.Instance), zap.Int("items", n))
		r.cfg.Swept()
	}
}

// Sweep sweeps expired leases now, as Run does every SweepInterval.
func (r *Rescuer) Sweep(ctx context.Context) (int, error) {
	return r.cfg.Store.Sweep(ctx, r.cfg.Clock.Now())
}
