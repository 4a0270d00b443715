package gate

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/budget"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable/internal/dbhealth"
	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/mediator"
)

// Store is what the gate asks of the database: parking and unparking the items of a key, the
// slots of the concurrency limits, and the stored pauses and limits.
type Store interface {
	Unpark(ctx context.Context, keys []string, now time.Time) (int, error)
	Repark(ctx context.Context, key string, at time.Time, spread time.Duration) (int, error)
	Acquire(ctx context.Context, key string, f store.Fence, hb *store.HoldBack) (got, parked bool, err error)
	WakeLimited(ctx context.Context, key string, now time.Time) (int, error)
	Pauses(ctx context.Context, kind string) ([]store.PauseRow, error)
	Limits(ctx context.Context) ([]store.LimitRow, error)
}

// Config configures a Gate. Every field is required unless it says otherwise.
type Config struct {
	Store Store
	Clock behaviors.Clock
	Rand  func() float64
	// Recheck bounds the wait of an item parked for a word that may not reach this instance
	// (a breaker's verdict, a free slot, a pause's end).
	Recheck time.Duration
	// PollInterval is the scheduler's: an item refused by what says no time to wait (a full
	// bulkhead) is due about one later, and the pauses and limits are read at most this often.
	PollInterval time.Duration
	// StoreContext bounds one store call.
	StoreContext func() (context.Context, context.CancelFunc)
	Health       *dbhealth.Health
	Logger       *zap.Logger
	Instance     string
	// Breakers are every registry that guards an item or may have parked one: Default and the
	// registrations' own. Optional.
	Breakers []*breaker.Registry
	// Default guards the items of registrations without a breaker of their own, under its own
	// key function. Optional.
	Default *breaker.Registry
	// Guard returns the registry and key function of a registration's own breaker (nil
	// registry: none). Optional.
	Guard func(name string) (reg *breaker.Registry, key func(req any) string)
	// Budget returns the retry budget an item's re-dispatches are charged to (nil: none),
	// whether one it refuses ends the item, and whether the gate counts first attempts as
	// calls itself. Optional.
	Budget func(name string, req any) (b *budget.Budget, failOver, countCalls bool)
	// Wake makes this instance's claim loop claim now; NotifyDue tells the other instances
	// that items are due.
	Wake, NotifyDue func()
}

// Gate decides, for every claim of an item, whether it may run now (see the package doc).
// It keeps what that takes between claims: the probes of half-open breakers in flight, the
// keys whose breakers moved, the paused and limited keys.
type Gate struct {
	cfg Config

	mu      sync.Mutex
	running bool
	// moved holds the breaker keys whose state changed, with the registry to ask (nil: none
	// knows the key, and an item got through it): the items parked on a closed one are freed,
	// those on one that opened again wait for its next probe.
	moved map[string]*breaker.Registry
	// probing counts, per breaker key, the items dispatched while its breaker was half-open
	// and still running: no more run than it has probe slots.
	probing map[string]int
	unpark  chan struct{} // a key moved: see Moved
	remove  []func()      // the breaker listeners

	pauses Pauses
	limits Limits
}

// New returns a gate configured by cfg; Start makes it listen to the breakers.
func New(cfg Config) *Gate {
	return &Gate{cfg: cfg, moved: map[string]*breaker.Registry{}, probing: map[string]int{}, unpark: make(chan struct{}, 1)}
}

// Start listens to every registry's state changes until Stop.
func (g *Gate) Start() {
	g.mu.Lock()
	g.running = true
	g.mu.Unlock()
	for _, reg := range g.cfg.Breakers {
		g.remove = append(g.remove, reg.AddListener(func(c breaker.StateChange) { g.breakerChanged(reg, c) }))
	}
}

// Stop stops listening, and noting moved keys.
func (g *Gate) Stop() {
	g.mu.Lock()
	g.running = false
	g.mu.Unlock()
	for _, remove := range g.remove {
		remove()
	}
	g.remove = nil
}

// Moved is signalled when a key moved (a breaker changed state, a pause ended, a slot freed):
// the claim loop then calls Turn.
func (g *Gate) Moved() <-chan struct{} { return g.unpark }

// Pauses is this instance's view of the paused breaker keys.
func (g *Gate) Pauses() *Pauses { return &g.pauses }

// Limits is this instance's view of the limited breaker keys.
func (g *Gate) Limits() *Limits { return &g.limits }

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// note marks key moved, to be freed or moved by the next Turn, while the gate runs.
func (g *Gate) note(key string, reg *breaker.Registry) {
	g.mu.Lock()
	if g.running {
		g.moved[key] = reg
	}
	g.mu.Unlock()
	signal(g.unpark)
}

// Check makes the decisions that need no decoded request: an item whose last allowed attempt
// was abandoned (its process died running it, alone) has used up its attempts, and one whose
// deadline has passed is dead. ok false: comp, the item's completion, ends it.
func (g *Gate) Check(c *store.Claimed, pol retry.Policy, comp store.Completion) (store.Completion, bool) {
	if counted := c.Counted(); counted > pol.MaxAttempts {
		comp.State, comp.Error, comp.ParkedKey = store.StateDead, fmt.Sprintf("attempts exhausted (%d); last error: %s", pol.MaxAttempts, c.LastError), ""
		comp.Cause = store.DeadAttemptsSpent
		return comp, false
	}
	if Expired(c.Deadline, comp.EndedAt) {
		comp.State, comp.Error, comp.ParkedKey, comp.Expired = store.StateDead, DeadlineError(c.Deadline, c.LastError), "", true
		comp.Cause = store.DeadDeadline
		return comp, false
	}
	return comp, true
}

// Unknown is the completion of an item whose request this instance cannot run (a name it does
// not know, a type its sender has no handler for): not attempted, looked at again Recheck
// later, by whichever instance claims it (one on another version may know it).
func (g *Gate) Unknown(c *store.Claimed, comp store.Completion, err error) store.Completion {
	comp.StartedAt = time.Time{}
	comp.State, comp.Outcome, comp.NextAt, comp.Error = store.StatePending, "", CapAt(comp.EndedAt.Add(g.cfg.Recheck), c.Deadline), err.Error()
	return comp
}

// Ticket is what Admit took for an item it let run: the probes of half-open breakers and the
// retry budget's charge. Release gives the probes back once the attempt has ended.
type Ticket struct {
	g      *Gate
	probes []string
	charge charge
	// Context is the dispatch's context, marked for the retry budget.
	Context context.Context
}

// Release gives back the probes the ticket holds, and notes their keys: the items parked
// behind a probe that ended without a verdict may go.
func (t *Ticket) Release() {
	if t.g != nil {
		t.g.unhold(t.probes)
		t.g.probesEnded(t.probes)
		t.probes = nil
	}
}

// Refund gives back the retry the ticket charged to the budget: the re-dispatch did not reach
// the dependency after all.
func (t *Ticket) Refund() { t.charge.refund(t.Context) }

// Started counts the call a first attempt is, when the gate counts it: the dispatch starts.
func (t *Ticket) Started() { t.charge.started(t.Context) }

// Admit asks c's hold-backs, in order, whether it may run now: a pause of one of its breaker
// keys, its breakers, its retry budget and its concurrency limit's slot. Once the breakers let
// it through, dispatch makes the context it is to be dispatched with. ok: it may, with the
// ticket to release when the attempt has ended (comp then notes the slot it holds, which its
// completion frees); otherwise the returned completion holds it back, uncharged (or ends it,
// for a budget that fails the item).
func (g *Gate) Admit(c *store.Claimed, req any, comp *store.Completion, dispatch func() context.Context) (Ticket, store.Completion, bool) {
	now := comp.EndedAt
	if key, until, paused := g.pausedKeyOf(c, req, now); paused {
		return Ticket{}, g.parkPaused(*comp, c, key, until), false
	}
	held, r, refused := g.admit(c, req)
	if refused {
		return Ticket{}, g.park(*comp, c, r.key, r.remaining, r.recheck, r.at), false
	}
	ctx := dispatch()
	t := Ticket{g: g, probes: held, Context: ctx}
	// The budget before the slot: an item over budget takes no slot of its key, which it would
	// free at once (waking an item parked on it for nothing). A retry charged for an item the
	// limit then holds back is given back.
	var spent *budget.SpentError
	var failOver bool
	t.Context, t.charge, spent, failOver = g.chargeRetry(ctx, c, req)
	if spent != nil {
		g.unhold(t.probes) // never sent: nothing ended
		return Ticket{}, g.overBudget(*comp, c, spent, failOver), false
	}
	if p, ok := g.limit(comp, c, req); !ok {
		t.Refund()
		g.unhold(t.probes)
		return Ticket{}, p, false
	}
	return t, store.Completion{}, true
}

// Judge decides the completion of c after its dispatch, which t admitted, ended with err (nil:
// it succeeded). stopping says a shutdown cancelled the dispatches; retries is the policy's
// classification of a failure (see Retryable). Unhandled reports an err that says this
// instance has nothing to run req with.
func (g *Gate) Judge(c *store.Claimed, req any, t *Ticket, comp store.Completion, err error, stopping bool, pol retry.Policy, retries func(error) bool) store.Completion {
	comp.ParkedKey = ""
	counted := c.Counted()
	switch {
	case err == nil:
		comp.State, comp.Outcome, comp.Freed = store.StateSucceeded, store.OutcomeSucceeded, c.ParkedKey
	case Unhandled(err, req):
		t.Refund()
		return g.Unknown(c, comp, err)
	case behaviors.IsRefusal(err) && !stopping:
		// Turned away before it reached any handler: an open breaker (of the item's own
		// pipeline, one that opened since Admit asked, or the breaker of a call its handler
		// made, such as an HTTP call's per-host one), a rate limit, a full bulkhead. No
		// attempt: the item waits on the refusal's key, and a retry its budget was charged for
		// did not reach the dependency.
		comp.Error = err.Error()
		t.Refund()
		key, remaining := refusalOf(err)
		var recheck time.Duration
		if key != "" && remaining == 0 {
			// Refused by a breaker waiting on its probes: for how long at most, as its
			// registry says (an inner breaker the gate does not know says nothing).
			if _, a := g.strictest(key); a.Refuses() && a.Remaining == 0 {
				recheck = a.Recheck
			}
		}
		return g.park(comp, c, key, remaining, recheck, comp.EndedAt)
	case stopping:
		// Shutdown cancelled the dispatch. Whatever error the handler made of that (its own,
		// not always wrapping the context's), the attempt was interrupted, not failed: no
		// backoff, no dead letter, and it does not count against MaxAttempts.
		comp.State, comp.Outcome, comp.NextAt, comp.Error = store.StatePending, store.OutcomeInterrupted, comp.EndedAt, err.Error()
	case Retryable(err, retries) && counted < pol.MaxAttempts:
		if Expired(c.Deadline, comp.EndedAt) {
			comp.State, comp.Outcome, comp.Error, comp.Expired = store.StateDead, store.OutcomeFailed, DeadlineError(c.Deadline, err.Error()), true
			comp.Cause = store.DeadDeadline
			break
		}
		// Retried at the later of its backoff and the wait any refusal or server asked for.
		comp.State, comp.Outcome, comp.Error = store.StatePending, store.OutcomeFailed, err.Error()
		comp.NextAt = CapAt(comp.EndedAt.Add(max(pol.Delay(counted, g.cfg.Rand()), behaviors.RetryAfter(err))), c.Deadline)
		if tripped, ok := errors.AsType[*breaker.TrippedError](err); ok {
			// Its failure opened the breaker: it waits on it as the items it refuses do, so the
			// breaker's closing or reset frees it with them.
			comp.ParkedKey = tripped.Key
		}
	default:
		// Out of attempts, or an error the policy calls permanent.
		comp.State, comp.Outcome, comp.Error = store.StateDead, store.OutcomeFailed, err.Error()
		comp.Cause = store.DeadPermanent
		if Retryable(err, retries) {
			comp.Cause = store.DeadAttemptsSpent
		}
	}
	return comp
}

// Retryable reports whether durable work that failed with err is worth another try: always
// when err holds a refusal (the work met a breaker, a rate limit or a full bulkhead, maybe after
// attempts that reached the dependency and failed: a refusal says when to come back, never that
// the work is lost, whatever it says of retrying the call it refused in process), else what
// the policy's classification says.
func Retryable(err error, policy func(error) bool) bool {
	if _, refused := errors.AsType[behaviors.Refusal](err); refused {
		return true
	}
	return policy(err)
}

// Unhandled reports whether err is the sender's answer that it has nothing to run req with: no
// handler for req's type (a mediator.NoHandlerError naming that type, not a request the
// handler sent), or a mediator that was not built. The handler did not run.
func Unhandled(err error, req any) bool {
	if e, ok := errors.AsType[*mediator.NoHandlerError](err); ok && e.Type == reflect.TypeOf(req) {
		return true
	}
	// Compared, not matched in the chain: an unbuilt sender answers ErrNotBuilt itself, before
	// any handler runs, whereas a handler that met an unbuilt mediator of its own did run.
	return err == mediator.ErrNotBuilt
}

// Expired reports whether deadline (zero: none) has passed at now.
func Expired(deadline, now time.Time) bool { return !deadline.IsZero() && !now.Before(deadline) }

// DeadlineError is the error of an item its deadline ended, after last.
func DeadlineError(deadline time.Time, last string) string {
	// To the second, as every time an operator reads: the fraction is noise in a message.
	at := deadline.UTC().Truncate(time.Second).Format(time.RFC3339)
	if last == "" {
		return fmt.Sprintf("deadline passed (%s)", at)
	}
	return fmt.Sprintf("deadline passed (%s); last error: %s", at, last)
}

// CapAt returns t, or deadline when that is earlier: an item is due at its deadline at the
// latest, so that it dies then, not when it would have been tried next.
func CapAt(t, deadline time.Time) time.Time {
	if !deadline.IsZero() && deadline.Before(t) {
		return deadline
	}
	return t
}

// refusalOf returns the key of the breaker that refused (empty for another refusing behavior,
// whose key means nothing to the breakers) and the time it says to wait.
func refusalOf(err error) (key string, remaining time.Duration) {
	if r, ok := errors.AsType[behaviors.Refusal](err); ok && r.Refusal().By == "breaker" {
		key = r.Refusal().Key
	}
	return key, behaviors.RetryAfter(err)
}

// park undoes the claim of an item a breaker (key, when known) or another refusing behavior
// turned away: no attempt. An item waiting on an open breaker is due when the breaker may let a
// probe through, spread over a tenth of the remaining time after it so that the items parked
// together do not all come back in one claim; one whose breaker's probes are out waits for their
// verdict (the breaker's closing frees it, its opening again moves it to the next probe, the
// end of a probe of this gate's own without one frees it), for the time the breaker gives them
// at most (recheck, spread as above: then it gives up on them, and another probe may go, the
// holder of a claim that ran out having perhaps died), and for Recheck at most should none of
// that reach this instance; one refused by something else (a full bulkhead) is due again about
// a poll interval later. The waits count from the time the refusal was answered. Never later
// than its deadline.
func (g *Gate) park(comp store.Completion, c *store.Claimed, key string, remaining, recheck time.Duration, from time.Time) store.Completion {
	comp.State, comp.Outcome, comp.ParkedKey, comp.StartedAt = store.StatePending, "", key, time.Time{}
	var wait time.Duration
	switch {
	case remaining > 0:
		wait = remaining + time.Duration(g.cfg.Rand()*float64(remaining)/10)
	case key != "":
		wait, comp.Verdict = g.cfg.Recheck, true
		if recheck > 0 {
			wait = min(wait, recheck+time.Duration(g.cfg.Rand()*float64(recheck)/10))
		}
	default:
		wait = time.Duration(float64(g.cfg.PollInterval) * (0.5 + g.cfg.Rand()))
	}
	comp.NextAt = CapAt(later(from, comp.EndedAt).Add(wait), c.Deadline)
	comp.Refused = true
	return comp
}

// guardOf returns the registry and key of the breaker that guards c: its registration's own,
// or Config.Default; the key its enqueue named, or the registry's key function's. A key
// function that panics (one written for another request type) is logged and the item is
// dispatched as if no breaker guarded it, rather than crashing the worker.
func (g *Gate) guardOf(c *store.Claimed, req any) (reg *breaker.Registry, key string) {
	if len(g.cfg.Breakers) == 0 {
		return nil, "" // no breaker guards any item: nothing to look up
	}
	defer func() {
		if p := recover(); p != nil {
			g.cfg.Logger.Error("durable: breaker key function panicked; dispatching without its breaker", zap.String("instance", g.cfg.Instance),
				zap.Int64("item", int64(c.ID)), zap.String("name", c.Name), zap.String("panic", fmt.Sprint(p)))
			reg, key = nil, ""
		}
	}()
	var keyOf func(any) string
	if g.cfg.Guard != nil {
		reg, keyOf = g.cfg.Guard(c.Name)
	}
	switch {
	case reg != nil:
	case g.cfg.Default != nil:
		reg = g.cfg.Default
	default:
		return nil, ""
	}
	if c.GuardKey != "" {
		return reg, c.GuardKey
	}
	if keyOf != nil {
		return reg, keyOf(req)
	}
	return reg, reg.KeyOf(req)
}

// storeCall runs one store call under the store's deadline and notes its outcome as op.
func (g *Gate) storeCall(op string, call func(ctx context.Context) error) error {
	ctx, cancel := g.cfg.StoreContext()
	err := call(ctx)
	cancel()
	g.cfg.Health.Note(op, err)
	return err
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
