package driver

import (
	"errors"
	"time"
)

// BreakerState is the state of a shared circuit breaker as the store keeps it.
type BreakerState string

// The states of a shared breaker.
const (
	BreakerClosed   BreakerState = "closed"
	BreakerOpen     BreakerState = "open"
	BreakerHalfOpen BreakerState = "half_open"
)

// BreakerRow is one row of switchboard_breakers, as read with the database's clock; its
// fields are documented on breaker.Shared.
type BreakerRow struct {
	Key         string
	State       BreakerState
	Epoch       int64
	Failures    int
	OpenedAt    time.Time
	OpenUntil   time.Time
	ProbeOwner  string
	ProbeClaim  string
	ProbeUntil  time.Time
	LastProbeAt time.Time
	By          string
	UpdatedAt   time.Time
	// Seq is the row's place in the change sequence of its name.
	Seq int64
	// Now is the database's clock when the row was read.
	Now time.Time
}

// BreakerTransition is a compare-and-swap of one shared breaker; see TransitionBreaker.
type BreakerTransition struct {
	// Name is the registry's namespace; Key the breaker's key in it.
	Name, Key string
	// From is the epoch the transition starts from: 0 for a breaker without a row.
	From int64
	// To is the new state.
	To BreakerState
	// Failures is the new consecutive failure count.
	Failures int
	// OpenFor is, for a move to BreakerOpen, how long after the database's now it stays open.
	OpenFor time.Duration
	// ProbeFor is, for a move to BreakerHalfOpen, how long after the database's now the
	// claim of the probes holds.
	ProbeFor time.Duration
	// Owner is the instance making the transition (and, for a move to BreakerHalfOpen, the
	// probes' holder).
	Owner string
	// Claim is, for a move to BreakerHalfOpen, the claim's token, kept in probe_claim while
	// the claim holds; empty: none.
	Claim string
}

// ErrNoNotifications is WatchBreakers' error on an engine that cannot tell of changes as they
// happen (SQLite): its callers poll.
var ErrNoNotifications = errors.New("durable: the database does not notify of changes")
