package durable

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable/driver"
	"github.com/switchboard-go/switchboard/durable/internal/dbhealth"
	"github.com/switchboard-go/switchboard/durable/internal/notify"
	"github.com/switchboard-go/switchboard/durable/record"
)

// Driver is the database a Queue keeps items in, made by package durable/sqlite or
// durable/postgres, or by a third party's driver (package durable/driver). Each alone imports
// its database driver and owns its migrations, so a program links only the database it uses.
type Driver = driver.Driver

// Config configures a Queue, and the scheduler Queue.Start runs in this instance: one struct
// given to Open, whose zero fields are the defaults documented on each. The database is Open's
// Driver argument. The scheduler's fields (InstanceID to OnSettled) matter only to an instance
// that calls Start; one that only enqueues or operates leaves them zero.
type Config struct {
	// SkipMigrations makes Open only check the schema's version, for a schema a migration tool
	// manages (the driver's MigrationSQL). Default false: Open applies what is missing.
	SkipMigrations bool

	// Policy is the retry policy of durable items, under each registration's WithPolicy; its
	// classification, over each request's in-process policy, decides what is deferred and
	// retried. Zero fields mean durable defaults, since nobody waits: 10 attempts (see
	// record.Item.Counted), Exponential from 1 s doubling to 1 h (eight and a half minutes, enough
	// to outlast a restart downstream), Jitter On (items that failed together do not return
	// together), and timeouts, transport errors and open circuits retried (durable work is
	// for the dependency that is down).
	Policy retry.Policy
	Clock  behaviors.Clock // of due times and leases; default behaviors.SystemClock
	Rand   func() float64  // [0, 1) for jitter, called concurrently; default math/rand/v2
	// Recheck is how long an item the scheduler could not start waits to be looked at again
	// when nothing else says when: an unknown name or a missing handler (an instance on
	// another version may know it), or a breaker whose probes are out, whose verdict frees or
	// moves the item at once and Recheck only bounds the wait should that word not reach this
	// instance (the breaker's own bound comes first when it is sooner: the probe timeout, or
	// the end of another instance's claim of the probes). An item parked on an open breaker
	// waits until the breaker may probe instead.
	// Default 1 minute: a rolling deploy's new instances are up well within it.
	Recheck time.Duration
	// PriorityAging is how much sooner each level of priority (WithPriority) makes an item
	// due, for the claim's order: a priority 9 item goes before the priority 0 items that came
	// due less than 9 × PriorityAging before it, and after the older ones, which have aged to
	// its level. So it is also the bound of starvation: under a constant stream of higher
	// priority work, a low priority item waits at most the difference of the priorities ×
	// PriorityAging longer than it would have. Default DefaultPriorityAging, a minute: an
	// urgent item overtakes minutes of routine backlog, and a routine item is not held more
	// than minutes by urgent ones. An item keeps the head start it was enqueued with.
	PriorityAging time.Duration
	// SuccessAttemptRows writes each succeeded attempt as a row of the attempts table, as every
	// other attempt is. Default false: a success's attempt id, instance and times are kept on
	// its item, where Queue.Attempts, the admin's timeline and the dead letters read them as
	// they read the rows; the row was one more insert, and two more index entries, for every
	// item a queue completes. Set it for tools of your own that read the attempts table.
	SuccessAttemptRows bool

	// OnDead are called, in order, once for each new dead letter (an item that became dead,
	// a failed item of RunBatch), after it is stored, outside any transaction, on the goroutine
	// that stored it: keep them quick. A panic in one is logged and the next still runs. A
	// process that dies after the commit never calls them: alert on Stats.DeadLetters.
	// Default empty: the warning logged for each letter is the only notice. Observers of
	// every queue event (metrics, logging) attach once to the mediator instead (DeadObserver).
	OnDead []func(ctx context.Context, d record.DeadLetter)
	// Logger gets dead letters, OnDead panics, failed propagators, migrations and the
	// scheduler's operational errors (a failing database at most every 30 s). Default zap.L()
	// as of Open: silent until the application calls zap.ReplaceGlobals.
	Logger *zap.Logger
	// ReplayLease is how long a replay holds its letter, extended while it runs. Default 1
	// minute: an operator retrying after a crash waits little, and a hiccup does not let a
	// second replay in beside a running one.
	ReplayLease time.Duration
	// Propagators carry values of the enqueuing caller's context (trace context, tenant) to
	// the dispatch as the item's metadata; one that panics is skipped and logged. Default none.
	Propagators []Propagator
	// MaxPayloadBytes is the longest encoded request stored (ErrPayloadTooLarge, before any
	// database call). Default 4 MiB: far above ordinary requests, while a payload is copied on
	// its way and a connection keeps a buffer of the largest value it carried. Keep large
	// documents in a blob store. At most MaxPayloadLimit.
	MaxPayloadBytes int

	// InstanceID names this instance in leases and attempt rows; unique per instance. Default
	// the host name, process id and a random suffix.
	InstanceID string
	// Workers is the number of items run at once; items are claimed only for free workers,
	// so a crash charges only the items that ran. Default 4.
	Workers      int
	BatchSize    int           // items claimed, and outcomes written, per round trip; default 100
	PollInterval time.Duration // the wait when no item was due; default 1 s
	// Lease is how long a claim holds an item, extended by heartbeats; when a dead holder's
	// lease runs out the item is swept back and a late completion rejected. Default 30 s.
	Lease             time.Duration
	ScheduleLease     time.Duration // a schedule run's lease on its schedule; default Lease
	HeartbeatInterval time.Duration // how often leases are extended; under both leases; default Lease/3
	SweepInterval     time.Duration // how often expired leases are swept; default Lease/2
	// StoreTimeout bounds each of the scheduler's database calls, so a hung database is
	// retried, not waited on; under both leases. Default Lease/3: a heartbeat that timed out
	// has time for another.
	StoreTimeout  time.Duration
	ShutdownGrace time.Duration // see Queue.Shutdown; default 5 s
	// Breakers, when set, guards the items of registrations without WithBreaker, under its own
	// key function (Registry.KeyOf, the request type's key unless it has one): before each
	// attempt the scheduler asks the item's breaker, and an item whose breaker is open is not
	// attempted; it is parked on the key until the breaker may let a probe through, only as many
	// parked items as there are probe slots run while it is half-open, and its closing frees
	// them (see WithBreaker). The scheduler listens to it and to every registry a WithBreaker
	// names. Queue.Pause with a KeyTarget holds back the items of a key whatever its breaker
	// says. Default none: a breaker in the pipeline still refuses at dispatch, and the item is
	// parked on the refusal's key, not charged an attempt.
	Breakers *breaker.Registry
	// Retention is how long succeeded items are kept; one instance deletes older ones every
	// minute. Other states are never deleted (pending and running are work, dead ones the
	// letters' history). Default 24 h: yesterday's work stays visible, the table small.
	// Negative: forever.
	Retention time.Duration
	// HistoryRetention is how long the history of Queue.History is kept: each running
	// scheduler writes one row a minute (its outcomes and the breaker states it saw), and the
	// instance that prunes succeeded items deletes the rows older than this. Default
	// DefaultHistoryRetention, 25 h: the dashboard charts the last 24 h, and the hour more keeps
	// its left edge from reading pruned minutes as quiet ones. Negative: this instance records
	// no history and deletes none (another instance's retention still applies).
	HistoryRetention time.Duration
	// OnClaim are called, in order, after each claiming round trip (which also writes the
	// outcomes of the items just finished) with its time, items claimed and error: a slow
	// claim is the first sign of a database in trouble (metrics.Recorder counts them, attached
	// to the mediator Start is given: see ClaimObserver). The claim loop waits for them: keep
	// them cheap. A panic in one is logged and the next still runs.
	OnClaim []func(took time.Duration, claimed int, err error)
	// OnSettled are called, in order, once the outcome of a claim of an item is written, with
	// the item's request name and how the claim ended (record.Settled: succeeded, retried, dead,
	// refused, paused, concurrency_limited, expired, interrupted, released). metrics.Recorder
	// counts them, attached to the mediator Start is given (see SettledObserver). Called by the claim loop after the write, so a reader of the queue
	// may see an outcome before its observers hear it; every call for the claims written is
	// made before Shutdown returns. Keep them cheap. A panic in one is logged and the next
	// still runs.
	OnSettled []func(name string, outcome record.Settled)
}

// Open returns a Queue over driver's database, migrating it unless SkipMigrations.
func Open(ctx context.Context, drv Driver, cfg Config) (*Queue, error) {
	if drv == nil {
		return nil, errors.New("durable: Open: the driver is nil: pass sqlite.Open(path) (package durable/sqlite) or postgres.Open(dsn, postgres.Config{}) (package durable/postgres)")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	st, err := drv.Open(ctx)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return nil, fmt.Errorf("durable: Open: the driver %T returned no executor and no error", drv)
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.L()
	}
	log := cfg.Logger
	fail := func(err error) (*Queue, error) {
		_ = st.Close()
		return nil, err
	}
	if cfg.SkipMigrations {
		if err := checkVersion(ctx, st); err != nil {
			return fail(err)
		}
	} else if err := st.Migrate(ctx, func(m driver.Migration) {
		log.Info("durable: schema migration applied", zap.Int("version", m.Version), zap.String("migration", m.Name))
	}); err != nil {
		return fail(err)
	}
	if cfg.Recheck == 0 {
		cfg.Recheck = time.Minute
	}
	if cfg.MaxPayloadBytes == 0 {
		cfg.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if cfg.PriorityAging == 0 {
		cfg.PriorityAging = DefaultPriorityAging
	}
	q := &Queue{store: st, countLimit: ExactCountLimit, reg: newRegistry(defaultPolicy.Merge(cfg.Policy)), clock: cfg.Clock,
		rand: cfg.Rand, recheck: cfg.Recheck, priorityAging: cfg.PriorityAging, propagators: slices.Clone(cfg.Propagators), maxPayload: cfg.MaxPayloadBytes,
		successRows: cfg.SuccessAttemptRows}
	for i, p := range q.propagators {
		if dp, ok := p.(dispatching); ok {
			q.dispatchers = append(q.dispatchers, dispatcher{index: i, p: dp})
		}
	}
	if q.clock == nil {
		q.clock = behaviors.SystemClock
	}
	if q.rand == nil {
		q.rand = rand.Float64
	}
	q.deadLetterConfig(cfg)
	q.schedCfg = cfg.scheduler()
	q.schedCfg.Logger = q.log
	q.sender = newSenderName()
	q.notifyHealth = dbhealth.Health{Log: q.log}
	if n, ok := st.(driver.Notifier); ok && n.Notifies() {
		q.notifier = notify.NewNotifier(n, q.sender, &q.notifyHealth)
	}
	return q, nil
}

// Validate reports each problem of cfg, naming its field. Open calls it.
func (cfg Config) Validate() error {
	var errs []error
	// Over the durable defaults: a BaseDelay beyond the default MaxDelay is a mistake too.
	if err := defaultPolicy.Merge(cfg.Policy).Validate(); err != nil {
		errs = append(errs, fmt.Errorf("durable: Config: Policy: %w", err))
	}
	if cfg.Recheck < 0 {
		errs = append(errs, fmt.Errorf("durable: Config: Recheck %v is negative", cfg.Recheck))
	}
	if cfg.PriorityAging < 0 {
		errs = append(errs, fmt.Errorf("durable: Config: PriorityAging %v is negative", cfg.PriorityAging))
	}
	if cfg.ReplayLease < 0 {
		errs = append(errs, fmt.Errorf("durable: Config: ReplayLease %v is negative", cfg.ReplayLease))
	}
	if cfg.MaxPayloadBytes < 0 {
		errs = append(errs, fmt.Errorf("durable: Config: MaxPayloadBytes %d is negative", cfg.MaxPayloadBytes))
	} else if cfg.MaxPayloadBytes > MaxPayloadLimit {
		errs = append(errs, fmt.Errorf("durable: Config: MaxPayloadBytes %d is more than MaxPayloadLimit (%d), the longest value the databases store", cfg.MaxPayloadBytes, MaxPayloadLimit))
	}
	errs = append(errs, checkPropagators(cfg.Propagators)...)
	if _, err := cfg.scheduler().withDefaults(); err != nil {
		errs = append(errs, fmt.Errorf("durable: Config: %w", err))
	}
	return errors.Join(errs...)
}

// checkVersion fails unless db has applied every embedded migration: its newest version is
// not enough, since a migration may be added beside an older one.
func checkVersion(ctx context.Context, st driver.Executor) error {
	have, err := st.Version(ctx)
	if err != nil {
		return err
	}
	missing, err := st.MissingMigrations(ctx)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("durable: Open: SkipMigrations is set and the database's schema is at version %d, but this package needs version %d and the database lacks migrations %v: run the driver package's Migrate (or apply its MigrationSQL with your migration tool) first",
			have, st.SchemaVersion(), missing)
	}
	return nil
}
