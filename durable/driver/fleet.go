package driver

import (
	"context"
	"time"
)

// FleetStores is the optional capability behind durable.NewBreakerStore and
// durable.NewRateLimitStore: circuit breakers and rate limits shared by every instance on the
// database, with the database's clock. Without it those constructors fail, saying the driver
// lacks it; the queue itself needs neither.
type FleetStores interface {
	// TransitionBreaker applies t if the breaker's epoch is still t.From, using the database's
	// clock for every time it sets, and returns the row afterwards and whether t made it: when
	// another instance moved the breaker first, that instance's row. t.From == 0 creates the row
	// (at epoch 1) of a breaker without one, except for a move to BreakerHalfOpen: probes are
	// claimed only of a breaker stored open (once its open time has passed) or half-open (once
	// the previous holder's claim ran out). A breaker without a row reads as closed at epoch 0.
	TransitionBreaker(ctx context.Context, t BreakerTransition) (BreakerRow, bool, error)

	// Breaker returns the row of name's key, with the database's now: closed at epoch 0 when the
	// breaker has none.
	Breaker(ctx context.Context, name, key string) (BreakerRow, error)

	// LoadBreakers returns the rows of name's breakers that are not closed, in key order.
	LoadBreakers(ctx context.Context, name string) ([]BreakerRow, error)

	// BreakerChanges returns at most limit rows of name's breakers whose seq is above after, in
	// seq order.
	BreakerChanges(ctx context.Context, name string, after int64, limit int) ([]BreakerRow, error)

	// LastBreakerSeq returns the largest seq of name's breakers: 0 when it has none.
	LastBreakerSeq(ctx context.Context, name string) (int64, error)

	// LeaseRateLimit leases l.Permits permits of a shared limit, all or none, with the database's
	// clock: one conditional statement on the limit's row (and, the first time, one that makes
	// it).
	LeaseRateLimit(ctx context.Context, l RateLimitLease) (RateLimitGrant, error)

	// RateLimitLessees records that instance leases name's key now and returns how many instances
	// did so within the last within (this one included); with pruneAfter above 0, it first deletes
	// the lessees not seen for that long. Two statements, three with a prune.
	RateLimitLessees(ctx context.Context, name, key, instance string, within, pruneAfter time.Duration) (int, error)
}
