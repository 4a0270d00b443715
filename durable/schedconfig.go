package durable

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
)

// SchedulerConfig configures Queue.Start: zero fields mean defaults; a negative
// value is an error, except for Retention.
type SchedulerConfig struct {
	InstanceID string // unique per instance; default host name, process id and a random suffix
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
	// StoreTimeout bounds each database call, so a hung database is retried, not waited on;
	// under both leases. Default Lease/3: a heartbeat that timed out has time for another.
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
	Logger   *zap.Logger // operational errors, a failing database at most every 30 s; default zap.L()
	// Retention is how long succeeded items are kept; one instance deletes older ones every
	// minute. Other states are never deleted (pending and running are work, dead ones the
	// letters' history). Default 24 h: yesterday's work stays visible, the table small.
	// Negative: forever.
	Retention time.Duration
	// OnClaim are called, in order, after each claiming round trip (which also writes the
	// outcomes of the items just finished) with its time, items claimed and error: a slow
	// claim is the first sign of a database in trouble (metrics.Recorder.OnClaim). The claim
	// loop waits for them: keep them cheap. A panic in one is logged and the next still runs.
	OnClaim []func(took time.Duration, claimed int, err error)
	// OnSettled are called, in order, once the outcome of a claim of an item is written, with
	// the item's request name and how the claim ended: "succeeded"; "retried" or "dead" (an
	// attempt failed, and the item is tried again or not; "dead" also for an item that cannot
	// be decoded or ran out of attempts); "refused" (a breaker or another refusing behavior held
	// it back: no attempt); "paused" (its breaker key is paused, Queue.Pause: no attempt);
	// "concurrency_limited" (its breaker key's concurrency limit had no free slot,
	// SetConcurrencyLimit: no attempt; not a rate limiter's refusal, which is "refused");
	// "expired" (its deadline ended it); "interrupted" (a shutdown cancelled it); "released"
	// (not attempted: a shutdown before it started, a name or a handler this instance lacks).
	// metrics.Recorder.OnSettled counts them. Called by the claim loop after the write, so a
	// reader of the queue may see an outcome before its observers hear it; every call for the
	// claims written is made before Shutdown returns.
	// Keep them cheap. A panic in one is logged and the next still runs.
	OnSettled []func(name, outcome string)
}

// Validate reports each problem of c, naming its field. Start calls it.
func (c SchedulerConfig) Validate() error {
	_, err := c.withDefaults()
	return err
}

func (c SchedulerConfig) withDefaults() (SchedulerConfig, error) {
	c.OnClaim, c.OnSettled = slices.Clone(c.OnClaim), slices.Clone(c.OnSettled)
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"PollInterval", c.PollInterval}, {"Lease", c.Lease}, {"ScheduleLease", c.ScheduleLease}, {"HeartbeatInterval", c.HeartbeatInterval},
		{"SweepInterval", c.SweepInterval}, {"StoreTimeout", c.StoreTimeout}, {"ShutdownGrace", c.ShutdownGrace}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s %v is negative", d.name, d.v))
		}
	}
	if c.Workers < 0 {
		errs = append(errs, fmt.Errorf("Workers %d is negative", c.Workers))
	}
	if c.BatchSize < 0 {
		errs = append(errs, fmt.Errorf("BatchSize %d is negative", c.BatchSize))
	}
	if c.InstanceID == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		c.InstanceID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if c.Workers == 0 {
		c.Workers = 4
	}
	if c.BatchSize == 0 {
		c.BatchSize = 100
	}
	if c.PollInterval == 0 {
		c.PollInterval = time.Second
	}
	if c.Lease == 0 {
		c.Lease = 30 * time.Second
	}
	if c.ScheduleLease == 0 {
		c.ScheduleLease = c.Lease
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = c.Lease / 3
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = c.Lease / 2
	}
	if c.StoreTimeout == 0 {
		c.StoreTimeout = c.Lease / 3
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = zap.L()
	}
	if c.Retention == 0 {
		c.Retention = defaultRetention
	}
	if len(errs) == 0 {
		for _, d := range []struct {
			name string
			v    time.Duration
		}{{"HeartbeatInterval", c.HeartbeatInterval}, {"SweepInterval", c.SweepInterval}, {"StoreTimeout", c.StoreTimeout}} {
			if d.v <= 0 {
				errs = append(errs, fmt.Errorf("Lease %v is too short: %s would be %v", c.Lease, d.name, d.v))
			}
		}
		if c.HeartbeatInterval >= c.Lease {
			errs = append(errs, fmt.Errorf("HeartbeatInterval (%v) must be shorter than Lease (%v), or leases run out while items run",
				c.HeartbeatInterval, c.Lease))
		}
		if c.StoreTimeout >= c.Lease {
			errs = append(errs, fmt.Errorf("StoreTimeout (%v) must be shorter than Lease (%v), or a slow heartbeat outlives the lease it extends",
				c.StoreTimeout, c.Lease))
		}
		if c.HeartbeatInterval >= c.ScheduleLease {
			errs = append(errs, fmt.Errorf("HeartbeatInterval (%v) must be shorter than ScheduleLease (%v), or leases run out while schedule runs run",
				c.HeartbeatInterval, c.ScheduleLease))
		}
		if c.StoreTimeout >= c.ScheduleLease {
			errs = append(errs, fmt.Errorf("StoreTimeout (%v) must be shorter than ScheduleLease (%v), or a slow heartbeat outlives the lease it extends",
				c.StoreTimeout, c.ScheduleLease))
		}
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("durable: invalid SchedulerConfig: %w", errors.Join(errs...))
	}
	return c, nil
}
