package breaker

import (
	"context"
	"time"
)

// Store keeps the state of breakers that several registries share: the instances of a fleet,
// or one instance across its restarts. It decides every transition once for all of them, by
// compare-and-swap on an epoch that each transition increments, so that two instances tripping
// at once make one trip and only one instance holds a half-open breaker's probes. Its times come
// from its own clock (a database's), so instances with skewed clocks agree.
//
// The registry calls it only when its state changes or may change: never on the success path of
// a closed breaker, never for a call an open one refuses. A store that cannot be reached leaves
// the registry on its local state, which it reconciles when the store answers again.
// durable.NewBreakerStore keeps the state in the queue's database.
type Store interface {
	// Transition moves the shared breaker of t.Key from the epoch t.From to t.To, if its stored
	// epoch is still t.From (0: the key has no stored state), and returns its state afterwards
	// and whether this transition made it: when another instance moved it first, the state
	// that instance made. A move to StateHalfOpen is a claim of the probes: it applies only
	// once the stored open time has passed, or the previous holder's claim ran out
	// (ProbeUntil), and makes t.Owner the holder and t.Claim the claim's token, which the
	// store keeps as ProbeClaim until the next transition. Errors leave the stored state as it
	// was, or unknown (a claim may still commit after its caller gave up: the registry knows
	// it for its own by its token); the registry keeps its local state meanwhile.
	Transition(ctx context.Context, t Transition) (s Shared, applied bool, err error)
	// Load returns the stored state of every shared breaker that is not closed. A registry
	// loads them when it starts, and after a claim of the probes it got no answer to, to
	// learn who holds them.
	Load(ctx context.Context) ([]Shared, error)
	// Subscribe calls fn with the state of each shared breaker whose state another instance
	// changed, within the store's refresh interval, until the returned stop is called. fn is
	// called by one goroutine at a time, in the order the store learned of the changes.
	Subscribe(fn func(Shared)) (stop func())
}

// Shared is one breaker's state as a Store holds it.
type Shared struct {
	// Key is the breaker's key.
	Key string
	// State is closed, open, or half-open (its probes held by ProbeOwner).
	State State
	// Epoch counts the breaker's transitions; 0 for a key the store has no state of.
	Epoch int64
	// Failures is the number of consecutive counted failures that opened it.
	Failures int
	// OpenedAt is when it last opened, by the store's clock; zero while closed.
	OpenedAt time.Time
	// OpenUntil is, for an open breaker, when a probe may start, by the store's clock.
	OpenUntil time.Time
	// ProbeOwner is, for a half-open breaker, the instance holding its probes.
	ProbeOwner string
	// ProbeClaim is, for a half-open breaker, the token of the claim that holds its probes
	// (Transition.Claim); empty otherwise. A registry knows its own claims by it, not by
	// ProbeOwner: a claim belongs to the call that made it, not to every registry, or every
	// process after a restart, that goes by the same instance name.
	ProbeClaim string
	// ProbeUntil is, for a half-open breaker, when the holder's claim runs out, by the store's
	// clock: another instance may then claim the probes.
	ProbeUntil time.Time
	// LastProbeAt is when the probes were last claimed, by the store's clock; zero if never.
	LastProbeAt time.Time
	// By is the instance that made the last transition.
	By string
	// Now is the store's clock when this state was read, so that a registry can translate the
	// store's times into its own.
	Now time.Time
}

// Transition is a change of one shared breaker's state; see Store.Transition.
type Transition struct {
	// Key is the breaker's key.
	Key string
	// From is the epoch the transition starts from: the one the registry last saw.
	From int64
	// To is the new state.
	To State
	// Failures is the new consecutive failure count: the streak that opened it; 0 for a close.
	Failures int
	// OpenFor is, for a move to StateOpen, the open duration: the store sets OpenUntil to its
	// own now plus OpenFor.
	OpenFor time.Duration
	// ProbeFor is, for a move to StateHalfOpen, how long the claim holds: the store sets
	// ProbeUntil to its own now plus ProbeFor (the registry's ProbeTimeout).
	ProbeFor time.Duration
	// Owner is the instance making the transition: the probes' holder of a move to
	// StateHalfOpen, and Shared.By afterwards.
	Owner string
	// Claim is, for a move to StateHalfOpen, the claim's token: unique to the registry's claim
	// of the probes from this epoch, and Shared.ProbeClaim while the claim holds. A registry
	// whose claim timed out and committed all the same recognises it by the token when it
	// learns of it, and uses it once (the probe it sent on its own meanwhile, or the next
	// call) or publishes its verdict over it; it never takes it for another half-open period.
	Claim string
	// Reason says why, for records.
	Reason ChangeReason
}
