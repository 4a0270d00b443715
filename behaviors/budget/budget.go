package budget

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/mediator"
)

// NoFloor is the Config.Floor of a budget without a floor: no retry is allowed beyond Ratio of
// the calls.
const NoFloor = -1.0

// The defaults of Config's zero fields; the field docs give the reasons.
const (
	// DefaultRatio is the default Config.Ratio.
	DefaultRatio = 0.2
	// DefaultFloor is the default Config.Floor, in retries per second.
	DefaultFloor = 1.0
	// DefaultWindow is the default Config.Window.
	DefaultWindow = 10 * time.Second
)

// slotCount is the number of slots a window is counted in: the window slides by a tenth of
// itself, so a count leaves it at most a tenth of the window early.
const slotCount = 10

// minWindow is the shortest window Validate accepts: a slot of at least a millisecond.
const minWindow = slotCount * time.Millisecond

// Config configures New.
type Config struct {
	// Ratio is the share of the calls that may be retried: over the window, a key's retries
	// may be at most Ratio × its calls (plus the floor). Default 0.2 (DefaultRatio): a
	// dependency that fails every call receives at most 1.2 times the calls it would without
	// retries, a load most dependencies survive, while one failure in five can still be
	// retried when the dependency is healthy. Values above 1 allow more than one retry per call.
	Ratio float64
	// Floor is the number of retries per second a key may make whatever its calls: a key
	// may make Floor × Window.Seconds() retries over the window beyond Ratio × its calls, so a
	// dependency called a few times a minute can still retry its rare failures. Default 1
	// (DefaultFloor): enough for a rarely called dependency, too little to add a load that
	// matters to a failing one. NoFloor allows none.
	Floor float64
	// Window is how far back calls and retries are counted. Default 10 s (DefaultWindow):
	// long enough to smooth a burst of failures, short enough that the allowance follows
	// the traffic of the last seconds. At least 10 ms.
	Window time.Duration
	// Key maps a request to its budget's key: the dependency it calls. nil: one budget per
	// request type, keyed by behaviors.TypeKey, because a request type usually names one
	// dependency.
	Key behaviors.KeyFunc
	// Clock is the time source of the window. nil: behaviors.SystemClock.
	Clock behaviors.Clock
	// OnSpend are the observers called after every retry asked of the budget, allowed or
	// refused, and after every retry given back (Budget.Refund, Spend.Refund set)
	// of this budget alone. They run in the order listed, on the goroutine that asked,
	// before the mediators' observers (Observer; metrics.Recorder is one). Empty: nothing
	// is called. Calls are not observed: counting them costs no more than an atomic add.
	OnSpend []func(ctx context.Context, s Spend)
}

// Validate reports every field set to an invalid value, each naming its field, joined.
func (c Config) Validate() error {
	var errs []error
	if c.Ratio < 0 || math.IsNaN(c.Ratio) || math.IsInf(c.Ratio, 0) {
		errs = append(errs, fmt.Errorf("budget Ratio %v is not a finite number above 0 (0 means the default %v)", c.Ratio, DefaultRatio))
	}
	if (c.Floor < 0 && c.Floor != NoFloor) || math.IsNaN(c.Floor) || math.IsInf(c.Floor, 0) {
		errs = append(errs, fmt.Errorf("budget Floor %v is not a finite number of retries per second at least 0, or NoFloor", c.Floor))
	}
	if c.Window < 0 || (c.Window > 0 && c.Window < minWindow) {
		errs = append(errs, fmt.Errorf("budget Window %s is shorter than %s (0 means the default %s)", c.Window, minWindow, DefaultWindow))
	}
	return errors.Join(errs...)
}

// Spend describes one retry asked of a budget (see Config.OnSpend).
type Spend struct {
	// Key is the budget's key of the retry.
	Key string
	// Request is the request whose retry was asked.
	Request any
	// Refused is true when the budget refused the retry.
	Refused bool
	// Refund is true when the retry was not asked but given back (Budget.Refund): it was
	// allowed, and then did not reach the dependency.
	Refund bool
	// Calls and Retries are the key's counts in the window when it was asked, the retry not
	// included.
	Calls, Retries int
}

// Usage is one key's counts over the window (see Budget.Snapshot).
type Usage struct {
	// Key is the budget's key.
	Key string
	// Calls, Retries and Refused are the calls counted, the retries allowed and the retries
	// refused over the window.
	Calls, Retries, Refused int
	// Allowed is the number of retries the window allows at its calls: Ratio × Calls + Floor
	// × Window.Seconds().
	Allowed float64
}

// Budget is a retry budget: see the package doc. Its methods are safe for concurrent use. The
// zero Budget is not usable: make one with New.
type Budget struct {
	cfg     Config
	ratio   float64
	reserve float64 // the floor's retries per window
	window  time.Duration
	slot    time.Duration
	clock   behaviors.Clock
	start   time.Time

	keys   sync.Map              // string → *account
	types  sync.Map              // reflect.Type → *typed, when Key is nil: no key string to hash
	last   atomic.Pointer[typed] // the last type looked up, when Key is nil: most budgets see one or a few
	marked atomic.Bool           // a context was ever marked: before, no context needs looking at

	observers behaviors.ObserverSet[Observer] // the mediators' (Observe)

	mu      sync.Mutex
	n       int // keys stored, guarded by mu
	sweepAt int // the key count at which idle keys are swept, guarded by mu
}

// account counts one key's calls and retries.
type account struct {
	key string
	// pending counts the calls not yet placed in a slot: a call adds to it without reading
	// the clock, and every flushEvery-th call, every retry asked and every Snapshot places
	// them in the current slot.
	pending atomic.Uint64
	placed  atomic.Uint32 // the tick the account was made or last placed its pending calls
	gone    atomic.Bool   // swept: a new account takes its place
	mu      sync.Mutex    // serializes the retries' decisions, so none is allowed past the allowance
	ring    [slotCount]slot
}

// flushEvery is how many calls may wait in account.pending before one of them reads the clock
// and places them: on a busy key the clock is read once per flushEvery calls; on a quiet key
// the calls placed late are few (fewer than flushEvery), and a late call is only ever counted
// later than it happened, never twice.
const flushEvery = 64

// flush places a's pending calls in the slot of tick.
func (a *account) flush(tick uint32) {
	if n := a.pending.Swap(0); n > 0 {
		bump(&a.ring[tick%slotCount].calls, tick, n)
		a.placed.Store(tick)
	}
}

// slot counts one tick of the window. Each counter packs the tick it counts (high 32 bits)
// with the count (low 32 bits), so that moving a slot on to a new tick and counting in it are
// one atomic operation.
type slot struct {
	calls, retries, refused atomic.Uint64
}

// firstSweep is the key count at which idle keys are first swept.
const firstSweep = 1024

// New returns a budget configured by cfg. It does not validate cfg: call Config.Validate
// (the retry behavior's Validate does, for its Budget). Invalid fields mean their defaults.
func New(cfg Config) *Budget {
	cfg.OnSpend = slices.Clone(cfg.OnSpend)
	b := &Budget{cfg: cfg, ratio: cfg.Ratio, window: cfg.Window, clock: cfg.Clock, sweepAt: firstSweep}
	if !(b.ratio > 0) || math.IsInf(b.ratio, 0) {
		b.ratio = DefaultRatio
	}
	if b.window < minWindow {
		b.window = DefaultWindow
	}
	floor := cfg.Floor
	switch {
	case floor == NoFloor:
		floor = 0
	case !(floor > 0) || math.IsInf(floor, 0):
		floor = DefaultFloor
	}
	b.reserve = floor * b.window.Seconds()
	b.slot = b.window / slotCount
	if b.clock == nil {
		b.clock = behaviors.SystemClock
	}
	b.start = b.clock.Now()
	return b
}

// Ratio returns the budget's ratio, its default filled in.
func (b *Budget) Ratio() float64 { return b.ratio }

// Window returns the budget's window, its default filled in.
func (b *Budget) Window() time.Duration { return b.window }

// Floor returns the budget's floor in retries per second, its default filled in (0 for NoFloor).
func (b *Budget) Floor() float64 { return b.reserve / b.window.Seconds() }

// KeyOf returns the budget's key of req: Config.Key's, else req's type (behaviors.TypeKey).
func (b *Budget) KeyOf(req any) string {
	if b.cfg.Key != nil {
		return b.cfg.Key(req)
	}
	t := reflect.TypeOf(req)
	if t == nil {
		return "<nil>"
	}
	return behaviors.TypeKey(t)
}

// counted is what a context says of the budgets a dispatch is counted by.
type counted struct {
	b    *Budget
	next *counted
}

var countedKey = mediator.NewContextKey[*counted]("budget.counted")

// isCounted reports whether ctx says its dispatch of req is counted by b.
func (b *Budget) isCounted(ctx context.Context, req any) bool {
	if !b.marked.Load() {
		return false
	}
	c, _ := countedKey.GetFor(ctx, req)
	for ; c != nil; c = c.next {
		if c.b == b {
			return true
		}
	}
	return false
}

// MarkCounted returns a copy of ctx on which the dispatch of req is counted by b already, so
// Call and Count count nothing for it: for a caller that accounted for the dispatch itself,
// as the durable scheduler charges a re-dispatch as a retry (Retry) and not as a call. The
// mark binds to req (see mediator.ContextKey.WithFor): the requests req's handler sends are
// counted as calls of their own.
func (b *Budget) MarkCounted(ctx context.Context, req any) context.Context {
	if b.isCounted(ctx, req) {
		return ctx
	}
	b.marked.Store(true)
	prev, _ := countedKey.GetFor(ctx, req)
	return countedKey.WithFor(ctx, req, &counted{b: b, next: prev})
}

// Call counts one call of req (a first attempt) unless ctx counts it for b already, and
// returns a context that says it is counted (bound to req, see MarkCounted): a behavior that
// repeats calls (retry) passes it inward, so one inside it (hedging) that shares the budget
// does not count the same Send twice. Marking costs a context; a behavior that knows no
// behavior inside it shares the budget calls Count instead.
func (b *Budget) Call(ctx context.Context, req any) context.Context {
	if b.isCounted(ctx, req) {
		return ctx
	}
	b.count(req)
	return b.MarkCounted(ctx, req)
}

// Count counts one call of req, as Call does, unless ctx counts it for b already, and marks
// nothing: it allocates nothing and takes no lock.
func (b *Budget) Count(ctx context.Context, req any) {
	if !b.isCounted(ctx, req) {
		b.count(req)
	}
}

func (b *Budget) count(req any) {
	a := b.accountOf(req)
	if a.pending.Add(1)%flushEvery == 0 {
		a.flush(b.tick())
	}
}

// Retry asks for one retry (or hedge, or re-dispatch) of req: nil, and the retry is counted;
// or a *SpentError, a behaviors.Refusal, when the key's retries over the window already
// reach Ratio × its calls plus the floor. It does not count a call.
func (b *Budget) Retry(ctx context.Context, req any) error {
	a := b.accountOf(req)
	key := a.key
	tick := b.tick()
	a.mu.Lock()
	a.flush(tick)
	calls, retries, _ := a.sum(tick)
	allowed := b.allowed(calls)
	ok := float64(retries)+1 <= allowed
	var err *SpentError
	if ok {
		bump(&a.ring[tick%slotCount].retries, tick, 1)
	} else {
		bump(&a.ring[tick%slotCount].refused, tick, 1)
		err = &SpentError{Key: key, Calls: calls, Retries: retries, Allowed: allowed, Window: b.window,
			Wait: b.wait(a, tick), req: req}
	}
	a.mu.Unlock()
	b.tell(ctx, Spend{Key: key, Request: req, Refused: !ok, Calls: calls, Retries: retries})
	if ok {
		return nil
	}
	return err
}

// Refund gives back one retry of req's key that Retry allowed, when the retry then reached no
// dependency: the caller cancelled while waiting for it, or the pipeline refused it at once (a
// behaviors.Refusal of req: an open breaker, a rate limit, a full bulkhead). The retry behavior,
// hedging and the durable scheduler call it so; a retry that failed at the dependency keeps
// its charge.
//
// It takes the retry from the newest slot of the window that counts one of the key's: the
// slot it was charged in, or a later one when the key was charged a retry since, which leaves
// an older charge in the window that much shorter. It never takes a count below zero: a retry
// whose slot has left the window counts no more, and its refund gives nothing back. The
// OnSpend observers see it with Spend.Refund set. It counts nothing of calls.
func (b *Budget) Refund(ctx context.Context, req any) {
	a := b.accountOf(req)
	tick := b.tick()
	a.mu.Lock()
	calls, retries, _ := a.sum(tick)
	refunded := false
	for k := uint32(0); k < slotCount && !refunded; k++ {
		refunded = unbump(&a.ring[(tick-k)%slotCount].retries, tick-k)
	}
	a.mu.Unlock()
	if !refunded {
		return
	}
	b.tell(ctx, Spend{Key: a.key, Request: req, Refund: true, Calls: calls, Retries: retries - 1})
}

// unbump takes one from c, a counter of the slot of tick, if it counts tick and is above zero;
// it reports whether it did.
func unbump(c *atomic.Uint64, tick uint32) bool {
	for {
		old := c.Load()
		if uint32(old>>32) != tick || uint32(old) == 0 {
			return false
		}
		if c.CompareAndSwap(old, old-1) {
			return true
		}
	}
}

// allowed is the number of retries a window with calls allows.
func (b *Budget) allowed(calls int) float64 { return b.ratio*float64(calls) + b.reserve }

// wait is how long from now until the window of a, without new calls, has room for one more
// retry; a.mu is held.
func (b *Budget) wait(a *account, tick uint32) time.Duration {
	for k := uint32(1); k <= slotCount; k++ {
		calls, retries, _ := a.sum(tick + k)
		if float64(retries)+1 <= b.allowed(calls) {
			return b.untilTick(tick + k)
		}
	}
	return b.window // nothing but new calls makes room
}

// untilTick is how long from now until tick starts.
func (b *Budget) untilTick(tick uint32) time.Duration {
	elapsed := b.clock.Now().Sub(b.start)
	d := time.Duration(int64(tick))*b.slot - elapsed
	return max(d, time.Millisecond)
}

// tick is the number of the current slot since the budget was made.
func (b *Budget) tick() uint32 {
	return uint32(b.clock.Now().Sub(b.start) / b.slot)
}

// bump counts n in c, a counter of the slot of tick.
func bump(c *atomic.Uint64, tick uint32, n uint64) {
	for {
		old := c.Load()
		next := uint64(tick)<<32 | n // the slot still counts an older tick: move it on to this one
		if t := uint32(old >> 32); t == tick || int32(t-tick) > 0 {
			// It counts this tick (or a later one, as a slow caller may find): count in it.
			next = old + n
		}
		if c.CompareAndSwap(old, next) {
			return
		}
	}
}

// read returns the count of c if it counts a tick within the window that ends at tick.
func read(c *atomic.Uint64, tick uint32) int {
	v := c.Load()
	if tick-uint32(v>>32) >= slotCount {
		return 0
	}
	return int(uint32(v))
}

// sum returns a's counts over the window that ends at tick.
func (a *account) sum(tick uint32) (calls, retries, refused int) {
	for i := range a.ring {
		s := &a.ring[i]
		calls += read(&s.calls, tick)
		retries += read(&s.retries, tick)
		refused += read(&s.refused, tick)
	}
	return calls, retries, refused
}

// typed is a request type's account.
type typed struct {
	t reflect.Type
	a *account
}

// accountOf returns the account of req's key, made when missing.
func (b *Budget) accountOf(req any) *account {
	if b.cfg.Key != nil {
		return b.account(b.cfg.Key(req))
	}
	t := reflect.TypeOf(req)
	if l := b.last.Load(); l != nil && l.t == t && !l.a.gone.Load() {
		return l.a
	}
	if v, ok := b.types.Load(t); ok {
		if e := v.(*typed); !e.a.gone.Load() {
			b.last.Store(e)
			return e.a
		}
	}
	e := &typed{t: t, a: b.account(b.KeyOf(req))}
	b.types.Store(t, e)
	b.last.Store(e)
	return e.a
}

// account returns the account of key, made when missing.
func (b *Budget) account(key string) *account {
	if a, ok := b.keys.Load(key); ok {
		return a.(*account)
	}
	return b.addAccount(key)
}

func (b *Budget) addAccount(key string) *account {
	b.mu.Lock()
	defer b.mu.Unlock()
	if a, ok := b.keys.Load(key); ok {
		return a.(*account)
	}
	if b.n >= b.sweepAt {
		b.sweep()
	}
	a := &account{key: key}
	a.placed.Store(b.tick())
	b.keys.Store(key, a)
	b.n++
	return a
}

// sweep drops the accounts that counted nothing over the window and placed no calls in it, so
// the keys a budget holds are bounded by the keys active within a window; b.mu is held. (An
// account dropped with calls still waiting, fewer than flushEvery, loses them.)
func (b *Budget) sweep() {
	tick := b.tick()
	b.keys.Range(func(k, v any) bool {
		a := v.(*account)
		if c, r, f := a.sum(tick); c+r+f == 0 && tick-a.placed.Load() >= slotCount {
			a.gone.Store(true)
			b.keys.Delete(k)
			b.n--
		}
		return true
	})
	b.sweepAt = max(firstSweep, 2*b.n)
}

// Snapshot returns the counts of every key the budget holds over the window, sorted by key.
func (b *Budget) Snapshot() []Usage {
	tick := b.tick()
	var out []Usage
	b.keys.Range(func(k, v any) bool {
		a := v.(*account)
		a.mu.Lock()
		a.flush(tick)
		c, r, f := a.sum(tick)
		a.mu.Unlock()
		out = append(out, Usage{Key: k.(string), Calls: c, Retries: r, Refused: f, Allowed: b.allowed(c)})
		return true
	})
	slices.SortFunc(out, func(x, y Usage) int { return strings.Compare(x.Key, y.Key) })
	return out
}

// Validate reports what Config.Validate reports of the budget's configuration: the retry
// behavior's Validate calls it for its Config.Budget, so that Build reports it.
func (b *Budget) Validate() error {
	if b.clock == nil {
		return errors.New("budget: a Budget not made by New (its zero value has no window); use budget.New")
	}
	return b.cfg.Validate()
}

// Holder is implemented by the behaviors that count calls against a budget and ask it for
// retries: the retry behavior (*retry.Behavior), hedging. RetryBudget returns the budget, or nil.
type Holder interface {
	RetryBudget() *Budget
}

// SharedBy reports whether a behavior among bs other than self holds b (a Holder whose
// RetryBudget is b). A Holder's Bind asks it of mediator.RequestInfo.Behaviors: when another
// behavior of the pipeline shares its budget, it counts calls with Call, which marks the
// context so the other does not count the same Send again; else with Count, which allocates
// nothing.
func SharedBy(b *Budget, self any, bs []mediator.Behavior) bool {
	if b == nil {
		return false
	}
	for _, x := range bs {
		if any(x) == self {
			continue
		}
		if h, ok := x.(Holder); ok && h.RetryBudget() == b {
			return true
		}
	}
	return false
}
