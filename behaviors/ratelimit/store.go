package ratelimit

import (
	"context"
	"time"
)

// PermitStore shares rate limits among the instances of a fleet: it keeps, per key, the time of the
// next permit of the fleet's limit (a GCRA's theoretical arrival time) by its own clock (a
// database's), and leases permits off it in batches. Every permit of the limit's timeline is
// leased to one instance once, so the instances together never take more than the limit,
// whichever join, leave or crash: the permits a crashed instance leased and did not use just
// pass unused, at most one lease period of them.
//
// The limiter calls it from one background goroutine per Behavior, ahead of demand, never on
// a call's path. durable.NewRateLimitStore keeps the limits in a queue's database.
type PermitStore interface {
	// Lease leases r.Permits consecutive permits of r.Key's limit, if the last of them comes
	// no later than LeasePeriod after the store's now: all of them or none (Lease.Permits 0,
	// when other instances leased the permits of the coming period already). An error says
	// nothing was leased, or that it is unknown; the limiter falls back to its share.
	Lease(ctx context.Context, r LeaseRequest) (Lease, error)
	// LeasePeriod is how far ahead of its now the store leases permits: the longest that
	// permits leased by an instance that crashed go unused, and so how soon the others take
	// its share.
	LeasePeriod() time.Duration
}

// LeaseRequest is a lease of permits of one key's limit; see PermitStore.Lease.
type LeaseRequest struct {
	// Key is the limit's key.
	Key string
	// Interval is the time between two permits: one second divided by the key's rate (its
	// own, or Config.Rate), the fleet's. A store keeps to the Interval of each request: it
	// holds no rate of its own.
	Interval time.Duration
	// Burst is how many permits the limit has at once after a quiet spell: the key's.
	Burst int
	// Permits is how many permits to lease: at least 1.
	Permits int
}

// Lease is the answer of PermitStore.Lease.
type Lease struct {
	// Permits is the number of permits leased: LeaseRequest.Permits, or 0.
	Permits int
	// First is the time of the first permit leased, by the store's clock; the others follow
	// it at LeaseRequest.Interval. A permit may be used from its time on.
	First time.Time
	// Next is, when Permits is 0, the store's next free permit, by its clock.
	Next time.Time
	// Now is the store's clock when it leased, so that the limiter translates its times.
	Now time.Time
	// Instances is the number of instances that leased permits of the key lately, this one
	// included: the limiter's divisor for its share when the store does not answer.
	Instances int
}
