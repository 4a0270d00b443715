package claimloop

import (
	"context"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/durable/internal/dbhealth"
	"github.com/switchboard-go/switchboard/durable/internal/maintenance"
	"github.com/switchboard-go/switchboard/durable/internal/store"
)

// Store is what the loop asks of the database.
type Store interface {
	IsolatedDue(ctx context.Context, now time.Time) (bool, error)
	Claim(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]store.Claimed, error)
	ClaimAlone(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]store.Claimed, error)
	ClaimIsolated(ctx context.Context, owner string, now time.Time, lease time.Duration) ([]store.Claimed, error)
	Complete(ctx context.Context, cs []store.Completion) ([]error, error)
	CompleteAndClaim(ctx context.Context, cs []store.Completion, owner string, now time.Time, lease time.Duration, limit int, alone bool) ([]error, []store.Claimed, error)
	Attempts(ctx context.Context, id store.ItemID) ([]store.Attempt, error)
}

// Executor runs the items the loop claims (package executor).
type Executor interface {
	// Process runs c as one attempt and returns its completion; it keeps no reference to c
	// once it returns (the loop reuses it for the worker's next item).
	Process(c *store.Claimed) store.Completion
	Release(c store.Claimed) store.Completion
}

// Gate is what the loop tells the admission gate (package gate).
type Gate interface {
	// Turn frees and moves the items parked on keys that moved; Moved is signalled when one did.
	Turn()
	Moved() <-chan struct{}
}

// Config configures a Loop; every field is required unless it says otherwise.
type Config struct {
	Store    Store
	Executor Executor
	Gate     Gate
	Leases   *maintenance.Leases
	Clock    behaviors.Clock
	Instance string
	// Workers is the number of items run at once; BatchSize the most claimed, and written, per
	// round trip.
	Workers, BatchSize int
	PollInterval       time.Duration
	Lease              time.Duration
	StoreContext       func() (context.Context, context.CancelFunc)
	Health             *dbhealth.Health
	Logger             *zap.Logger
	// Stop is closed when the instance stops: the loop claims nothing more, writes what is
	// left and returns. GraceEnd is closed when the shutdown's grace has passed: it gives up.
	Stop, GraceEnd <-chan struct{}
	// Grace starts the shutdown's grace: every handler has returned after Stop, and the
	// database gets the grace to take the outcomes left.
	Grace func()
	// OnClaim is called after each claiming round trip with its time, the items claimed and
	// its error. Optional.
	OnClaim func(took time.Duration, claimed int, err error)
	// Claimed is called with the items of each claim that took some, and the claim's time (the
	// Clock's, read for the claim), before they are handed out; it must not keep the slice.
	// Optional.
	Claimed func(items []store.Claimed, now time.Time)
	// Settled is called with each written batch and its results (nil: the completion was
	// taken; an error: it was rejected), after the rejections are logged.
	Settled func(batch []store.Completion, results []error)
}

// isolationCheck is the shortest interval between two looks for a due item to run alone: with
// a short PollInterval, looking on every poll would double the statements of an idle instance
// (and the load on a database that is recovering), while an item waiting a second longer to run
// alone costs nothing.
const isolationCheck = time.Second

// Loop claims, runs and completes items (see the package doc). A poison item cannot take its
// neighbours with it: an item whose lease ran out while it ran (its process died) runs alone
// next time, so an item that crashes its process again is the only one charged for it.
type Loop struct {
	cfg  Config
	work chan job
	done chan finished
	wake chan struct{}

	mu          sync.Mutex
	interrupted int // attempts recorded as interrupted
}

// New returns a loop configured by cfg.
func New(cfg Config) *Loop {
	return &Loop{cfg: cfg,
		work: make(chan job, cfg.Workers), // never full: items go only to free workers
		done: make(chan finished, cfg.Workers),
		wake: make(chan struct{}, 1),
	}
}

// Wake makes the loop claim now instead of at the end of its poll interval.
func (l *Loop) Wake() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Interrupted returns how many attempts were recorded as interrupted.
func (l *Loop) Interrupted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.interrupted
}

// Work runs one worker: each item handed to it is processed (released, once the loop stops),
// until CloseWork.
func (l *Loop) Work() {
	// One item at a time per worker: the executor is handed this worker's copy, which it does
	// not keep past Process (a copy per item, through the interface, was an allocation each).
	c := new(store.Claimed)
	for j := range l.work {
		if l.stopping() {
			l.done <- finished{l.cfg.Executor.Release(j.Claimed), j.claim}
			continue
		}
		*c, j.Claimed = j.Claimed, store.Claimed{} // one copy: the executor drops its payload once decoded
		l.done <- finished{l.cfg.Executor.Process(c), j.claim}
		*c = store.Claimed{} // the payload and metadata are not kept until the next item
	}
}

// CloseWork ends the workers once their current items are done. Call it after Run returned.
func (l *Loop) CloseWork() { close(l.work) }

func (l *Loop) stopping() bool {
	select {
	case <-l.cfg.Stop:
		return true
	default:
		return false
	}
}

// job is a claimed item handed to a worker, tagged with the claim that claimed it.
type job struct {
	store.Claimed
	claim uint64
}

// finished is the outcome of a job, with the job's tag.
type finished struct {
	store.Completion
	claim uint64
}

// Result is how Run ended: the items still running and the outcomes not written when the
// shutdown's grace ran out, and the database's last error then.
type Result struct {
	Running, Unwritten int
	Err                error
}

// Run is the claim loop. It claims items only for free workers, after writing the outcomes of
// the items that finished, so an item never starts before the outcome of one that finished
// earlier is stored (an item that then crashes the process is not charged to them). Before
// such a round trip it gathers the outcomes of the items it claimed last (see gatherWait). It
// returns when the instance has stopped and every outcome is written, or the grace ran out.
func (l *Loop) Run() Result {
	var (
		running   int                // items handed to workers whose completion has not come back
		pending   []store.Completion // completions not yet written
		isolating bool               // an item claimed alone is running
		drain     bool               // an item to run alone is due: claim nothing until idle
		lastCheck time.Time          // last look for a due item to run alone
		writeWait = 10 * time.Millisecond
		lastErr   error
		trip      time.Duration // a recent round trip's time, smoothed: how long gathering may take
		claims    uint64        // claims so far, the tag of the items each hands out
		fresh     uint64        // the first claim since outcomes were last written
		young     int           // items of those claims still running: the ones gathering waits for
	)
	cfg := l.cfg
	timer := time.NewTimer(0)
	defer timer.Stop()
	retry := time.NewTimer(writeWait)
	retry.Stop() // armed only when a write fails
	gathering := time.NewTimer(0)
	gathering.Stop()  // armed only while gathering
	stopC := cfg.Stop // nil once seen closed, so the select does not spin on it
	collect := func(f finished) {
		running--
		if f.claim >= fresh {
			young--
		}
		pending = append(pending, f.Completion)
	}
	hand := func(items []store.Claimed) int {
		claims++
		young += len(items)
		return l.handOut(items, claims)
	}
	written := func() { fresh, young = claims+1, 0 }
	for {
		// Take every completion that has arrived.
	drain:
		for {
			select {
			case c := <-l.done:
				collect(c)
			default:
				break drain
			}
		}
		if isolating && running == 0 {
			// The item run alone has ended: look for the next one now, not an isolation check
			// later, so the items a crash left to run alone run one after another.
			isolating, lastCheck = false, time.Time{}
		}
		stopping := l.stopping()
		if stopping {
			stopC = nil
		}
		now := cfg.Clock.Now()
		// Look for a due item to run alone at most once per isolation check: a cheap indexed
		// lookup, where claiming one on every idle turn would cost a statement per item.
		if !stopping && !drain && !isolating && time.Since(lastCheck) >= max(cfg.PollInterval, isolationCheck) {
			lastCheck = time.Now()
			ctx, cancel := cfg.StoreContext()
			due, err := cfg.Store.IsolatedDue(ctx, now)
			cancel()
			cfg.Health.Note("look for items to run alone", err)
			drain = due
		}
		writeFailed, claimed, short := false, false, false
		if !stopping && len(pending) > 0 && len(pending) <= cfg.BatchSize && !isolating && !drain && cfg.Workers > running {
			// The usual turn: the outcomes of the items that finished and the claim of as many
			// items as there are free workers, in one round trip.
			if young > 0 && lastErr == nil {
				// Wait a little for the items claimed since the last write that still run, so
				// this round trip also carries their outcomes and claims for their workers (see
				// gatherWait). Items that were already running then are not waited for: they
				// have shown they are slow.
				gathering.Reset(gatherWait(trip))
			gather:
				for young > 0 && len(pending) < cfg.BatchSize {
					select {
					case c := <-l.done:
						collect(c)
					case <-gathering.C:
						break gather
					case <-stopC:
						break gather
					}
				}
				gathering.Stop()
				now = cfg.Clock.Now()
			}
			n := min(cfg.Workers-running, cfg.BatchSize)
			items, took, err := l.writeAndClaim(pending, n, now, lastErr != nil)
			trip = (3*trip + took) / 4
			if err != nil {
				writeFailed, lastErr = true, err
			} else {
				pending, claimed, short = pending[:0], true, len(items) < n
				writeWait, lastErr = 10*time.Millisecond, nil
				written()
				running += hand(items)
			}
		}
		for !writeFailed && len(pending) > 0 {
			n := min(len(pending), cfg.BatchSize)
			if err := l.write(pending[:n], lastErr != nil); err != nil {
				writeFailed, lastErr = true, err
				break
			}
			pending = slices.Delete(pending, 0, n)
			writeWait, lastErr = 10*time.Millisecond, nil
			written()
		}
		if stopping {
			if running == 0 {
				if len(pending) == 0 {
					return Result{}
				}
				cfg.Grace() // every handler has returned: the database gets the grace
			}
		} else if !writeFailed {
			cfg.Gate.Turn()
			free := cfg.Workers - running
			switch {
			case claimed || isolating || free == 0:
			case running == 0 && drain:
				if n := hand(l.claim(true, 1, now)); n > 0 {
					isolating, drain, running = true, false, running+n
					break
				}
				drain = false
				fallthrough
			case !drain:
				n := min(free, cfg.BatchSize)
				got := hand(l.claim(false, n, now))
				running += got
				short = got < n
			}
			if !short && !isolating && !drain && cfg.Workers-running > 0 {
				continue // a full batch, capped by BatchSize, and workers still free: claim again
			}
		}
		// Wait for something to do.
		if writeFailed {
			retry.Reset(writeWait)
			writeWait = min(2*writeWait, time.Second)
		} else if !stopping {
			timer.Reset(cfg.PollInterval)
		}
		select {
		case c := <-l.done:
			collect(c)
		case <-l.wake:
		case <-cfg.Gate.Moved():
		case <-timer.C:
		case <-retry.C:
		case <-stopC:
		case <-cfg.GraceEnd:
			// Give up: the items left keep their leases until they run out and are swept.
			return Result{Running: running, Unwritten: len(pending), Err: lastErr}
		}
	}
}

func (l *Loop) claim(alone bool, n int, now time.Time) []store.Claimed {
	cfg := l.cfg
	ctx, cancel := cfg.StoreContext()
	defer cancel()
	var (
		items []store.Claimed
		err   error
	)
	start := time.Now()
	if alone {
		items, err = cfg.Store.ClaimIsolated(ctx, cfg.Instance, now, cfg.Lease)
	} else if cfg.Workers == 1 {
		// With one worker every claim runs alone: a crash while it runs is its own.
		items, err = cfg.Store.ClaimAlone(ctx, cfg.Instance, now, cfg.Lease, n)
	} else {
		items, err = cfg.Store.Claim(ctx, cfg.Instance, now, cfg.Lease, n)
	}
	l.noteClaim(start, len(items), err)
	cfg.Health.Note("claim", err)
	cfg.Leases.Hold(items)
	l.noteClaimed(items, now)
	return items
}

// handOut gives claimed items, tagged with claim, to free workers, each of which starts at once,
// and returns how many.
func (l *Loop) handOut(items []store.Claimed, claim uint64) int {
	for i := range items {
		l.work <- job{items[i], claim}
		items[i] = store.Claimed{} // the worker holds the only copy of the payload now
	}
	return len(items)
}

// write stores completions in one round trip. retried says an earlier write of the batch
// failed: the database may have applied it all the same (its answer was lost), and a
// rejection then only says so.
func (l *Loop) write(batch []store.Completion, retried bool) error {
	ctx, cancel := l.cfg.StoreContext()
	results, err := l.cfg.Store.Complete(ctx, batch)
	cancel()
	l.cfg.Health.Note("record outcomes", err)
	if err != nil {
		return err
	}
	l.settle(batch, results, retried)
	return nil
}

// writeAndClaim stores completions and claims up to n items in one round trip (see write and
// claim), and says how long the round trip took.
func (l *Loop) writeAndClaim(batch []store.Completion, n int, now time.Time, retried bool) ([]store.Claimed, time.Duration, error) {
	cfg := l.cfg
	ctx, cancel := cfg.StoreContext()
	start := time.Now()
	results, items, err := cfg.Store.CompleteAndClaim(ctx, batch, cfg.Instance, now, cfg.Lease, n, cfg.Workers == 1)
	took := time.Since(start)
	cancel()
	l.noteClaim(start, len(items), err)
	cfg.Health.Note("record outcomes and claim", err)
	if err != nil {
		return nil, took, err
	}
	l.settle(batch, results, retried)
	cfg.Leases.Hold(items)
	l.noteClaimed(items, now)
	return items, took, nil
}

// settle logs the rejected completions of a written batch, tells Config.Settled, and forgets
// their leases.
func (l *Loop) settle(batch []store.Completion, results []error, retried bool) {
	for i, r := range results {
		if r == nil {
			continue
		}
		if retried && l.alreadyRecorded(batch[i]) {
			continue
		}
		l.cfg.Logger.Warn("durable: completion rejected", zap.String("instance", l.cfg.Instance),
			zap.Int64("item", int64(batch[i].Fence.ItemID)), zap.Error(r))
	}
	l.cfg.Settled(batch, results)
	l.cfg.Leases.Drop(batch)
	n := 0
	for _, c := range batch {
		if c.Outcome == store.OutcomeInterrupted {
			n++
		}
	}
	if n > 0 {
		l.mu.Lock()
		l.interrupted += n
		l.mu.Unlock()
	}
}

// alreadyRecorded reports whether c's attempt row exists, written by this instance: an earlier
// write of c that timed out was applied after all.
func (l *Loop) alreadyRecorded(c store.Completion) bool {
	if c.Outcome == "" {
		return false
	}
	ctx, cancel := l.cfg.StoreContext()
	defer cancel()
	as, err := l.cfg.Store.Attempts(ctx, c.Fence.ItemID)
	if err != nil {
		return false
	}
	for _, a := range as {
		if a.Number == c.Fence.Attempt && a.Instance == c.Fence.Owner && a.Outcome == c.Outcome {
			return true
		}
	}
	return false
}

// minGather and maxGather bound gatherWait. Below a millisecond the bound hardly matters: an
// idle process wakes from a shorter timer about a millisecond late anyway. Above maxGather a
// round trip is slow enough to be the drain's limit, and outcomes are not held back longer for
// the sake of a fuller batch.
const (
	minGather = 100 * time.Microsecond
	maxGather = 5 * time.Millisecond
)

// gatherWait is how long the claim loop waits for the items claimed since the last write before
// it writes the outcomes of those that finished and claims for their workers: half a recent
// round trip. With fast handlers they finish well within it, so each round trip carries a whole
// batch instead of the workers splitting into groups that take turns at the database (each
// paying a round trip for part of the batch). When one of them is slow, the loop goes ahead
// after at most half a round trip, the most a fuller batch could have saved, and does not wait
// for that item again.
func gatherWait(trip time.Duration) time.Duration {
	return min(max(trip/2, minGather), maxGather)
}

// noteClaimed tells Config.Claimed of the items a claim made at now took.
func (l *Loop) noteClaimed(items []store.Claimed, now time.Time) {
	if l.cfg.Claimed != nil && len(items) > 0 {
		l.cfg.Claimed(items, now)
	}
}

// noteClaim tells Config.OnClaim about a claim that started at start.
func (l *Loop) noteClaim(start time.Time, claimed int, err error) {
	if l.cfg.OnClaim != nil {
		l.cfg.OnClaim(time.Since(start), claimed, err)
	}
}
