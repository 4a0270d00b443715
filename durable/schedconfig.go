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
	"github.com/switchboard-go/switchboard/durable/record"
)

// schedulerConfig is the scheduler's part of Config (see there for each field), which
// withDefaults completes.
type schedulerConfig struct {
	InstanceID        string
	Workers           int
	BatchSize         int
	PollInterval      time.Duration
	Lease             time.Duration
	ScheduleLease     time.Duration
	HeartbeatInterval time.Duration
	SweepInterval     time.Duration
	StoreTimeout      time.Duration
	ShutdownGrace     time.Duration
	Breakers          *breaker.Registry
	Logger            *zap.Logger
	Retention         time.Duration
	HistoryRetention  time.Duration
	OnClaim           []func(took time.Duration, claimed int, err error)
	OnSettled         []func(name string, outcome record.Settled)
}

// scheduler returns the scheduler's part of c.
func (c Config) scheduler() schedulerConfig {
	return schedulerConfig{InstanceID: c.InstanceID, Workers: c.Workers, BatchSize: c.BatchSize, PollInterval: c.PollInterval,
		Lease: c.Lease, ScheduleLease: c.ScheduleLease, HeartbeatInterval: c.HeartbeatInterval, SweepInterval: c.SweepInterval,
		StoreTimeout: c.StoreTimeout, ShutdownGrace: c.ShutdownGrace, Breakers: c.Breakers, Logger: c.Logger, Retention: c.Retention,
		HistoryRetention: c.HistoryRetention, OnClaim: c.OnClaim, OnSettled: c.OnSettled}
}

// withDefaults returns c with its zero fields set to their defaults, or each problem of c,
// naming its field, joined.
func (c schedulerConfig) withDefaults() (schedulerConfig, error) {
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
	if c.HistoryRetention == 0 {
		c.HistoryRetention = DefaultHistoryRetention
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
		return c, errors.Join(errs...)
	}
	return c, nil
}
