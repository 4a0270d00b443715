package postgres

import (
	"errors"
	"fmt"
	"time"
)

// Config configures the pool Open opens, and how the queue uses any pool (New's too). Its zero
// value is complete: every zero field means the default its doc gives.
//
// # How many connections an instance uses
//
// Everything an instance does on the database shares one pool of at most MaxConns
// connections: the queue's enqueues, the scheduler's claims and completions, the admission
// gate's calls (concurrency limits, pauses), maintenance, the admin API and every fleet store
// made on the queue (durable.NewBreakerStore, durable.NewRateLimitStore). One of them is the
// notification connection, held while anything watches (the scheduler's wake-up and every
// BreakerStore with subscribers share it); the others are taken per call and given back, so a
// call that finds them all busy waits for one, within its context, rather than asking the
// database for more. A connection whose statement outlived its caller's context is closed in
// the background (a cancel request, then its end: a moment on a healthy server, up to 15 s on
// a busy one), and keeps its place in the budget until it is: a new connection waits for it
// rather than joining it. An instance therefore never holds more than MaxConns connections,
// under any load, and a fleet of N instances holds at most N × MaxConns: keep that below the
// server's max_connections less its superuser_reserved_connections (3 by default), with room
// for migrations, psql and the application's own pool.
//
// An instance works without waiting on the pool with 1 (notifications) + 2 (the claim loop and
// its completions) + 1 per concurrent enqueue + 1 per fleet-store call under way; a
// scheduler's workers take one only for their own store calls (a concurrency limit, a
// rate-limit lease, a breaker transition), which are short.
type Config struct {
	// MaxConns is the most connections the instance holds at once, the notification connection
	// included. Default 10: enough that a 32-worker drain does not wait on the pool (the
	// completions are batched and the claims fetch many items per statement), and few enough
	// that nine instances fit PostgreSQL's default max_connections of 100 with room for an
	// operator. With 1, the instance does not listen (its one connection would be held by
	// LISTEN): its schedulers find new items at their poll and its breaker stores poll.
	MaxConns int

	// MaxIdleConns is how many connections stay open between calls. Default MaxConns, so a
	// burst finds its connections open instead of dialling (and authenticating) again. A
	// connection that read a large row (a payload of more than 256 KiB) is closed instead of
	// kept, so that idle connections do not pin the memory of the largest row they carried.
	MaxIdleConns int

	// IdleTimeout closes a connection idle this long. Default 5 minutes: a quiet instance gives
	// its connections back to the database, while steady traffic keeps them.
	IdleTimeout time.Duration

	// TransactionPooling says the DSN reaches PostgreSQL through a pooler in transaction mode
	// (PgBouncer's pool_mode = transaction), which gives each transaction whichever server
	// connection is free: the queue then keeps no state on a session. No statement is prepared
	// (each is sent with its parameters, in one round trip, as pgx's QueryExecModeExec does) and
	// nothing LISTENs, so every instance's schedulers find new items at their poll
	// (durable.Config.PollInterval, 1 s by default: lower it for a faster pickup) and
	// breaker stores poll for changes. Migrations take a transaction advisory lock, so they also
	// work through it. With New, set default_query_exec_mode=exec (or simple_protocol) on the
	// pool's config yourself.
	//
	// Open turns JIT compilation off on its connections (jit=off at connect, unless the DSN
	// sets jit), because the planner's estimate of a claim grows with the table and past
	// jit_above_cost every claim would be compiled anew: 1.7 s instead of 0.9 ms at a million
	// pending items. A pooler in transaction mode refuses that startup parameter, and New's
	// pool is the caller's: there, turn it off for the queue's role (ALTER ROLE … SET jit =
	// off) or the database.
	TransactionPooling bool
}

// Validate reports every field of c that is out of range, each error naming it.
func (c Config) Validate() error {
	var errs []error
	if c.MaxConns < 0 {
		errs = append(errs, fmt.Errorf("postgres.Config.MaxConns is %d: it must be 0 (the default, 10) or more", c.MaxConns))
	}
	if c.MaxIdleConns < 0 {
		errs = append(errs, fmt.Errorf("postgres.Config.MaxIdleConns is %d: it must be 0 (the default, MaxConns) or more", c.MaxIdleConns))
	}
	if c.MaxConns > 0 && c.MaxIdleConns > c.MaxConns {
		errs = append(errs, fmt.Errorf("postgres.Config.MaxIdleConns is %d, more than MaxConns (%d): idle connections are among the open ones", c.MaxIdleConns, c.MaxConns))
	}
	if c.IdleTimeout < 0 {
		errs = append(errs, fmt.Errorf("postgres.Config.IdleTimeout is %v: it must be 0 (the default, 5 minutes) or more", c.IdleTimeout))
	}
	return errors.Join(errs...)
}

// DefaultMaxConns is Config.MaxConns's default.
const DefaultMaxConns = 10

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MaxIdleConns == 0 {
		c.MaxIdleConns = c.MaxConns
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 5 * time.Minute
	}
	return c
}
