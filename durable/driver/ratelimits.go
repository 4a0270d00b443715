package driver

import (
	"time"
)

// RateLimitLease is a lease of permits of one shared limit; see LeaseRateLimit.
type RateLimitLease struct {
	// Name is the store's namespace; Key the limit's key in it.
	Name, Key string
	// Interval is the time between two permits; Burst the permits the limit has at once after
	// a quiet spell.
	Interval time.Duration
	Burst    int
	// Permits is how many permits to lease, all or none; Horizon how far ahead of the
	// database's now the last of them may come.
	Permits int
	Horizon time.Duration
}

// RateLimitGrant is the answer of LeaseRateLimit, with the database's clock.
type RateLimitGrant struct {
	// Permits is the number leased: the lease's Permits, or 0.
	Permits int
	// First is the first permit's time; Next, when none was leased, the limit's next free
	// permit.
	First, Next time.Time
	// Now is the database's clock at the lease.
	Now time.Time
}
