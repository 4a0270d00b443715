package hedge

import (
	"cmp"
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/budget"
	"github.com/switchboard-go/switchboard/mediator"
)

// Tally is what Behavior.Snapshot reports of one key.
type Tally struct {
	// Key is the key (Config.Key), or OverflowKey for the keys beyond Config.MaxKeys.
	Key string `json:"key"`
	// Calls counts the calls that ran under the behavior (not those stepping aside).
	Calls uint64 `json:"calls"`
	// Sent counts the hedges sent, each once it returned (or was cancelled), except those the
	// pipeline refused at once, which Refused counts.
	Sent uint64 `json:"hedges_sent"`
	// Won counts the calls a hedge won (the primary attempt lost).
	Won uint64 `json:"hedges_won"`
	// Refused counts the hedges refused: by the retry budget (they were not sent), or at once
	// by the pipeline inside (behaviors.Refused: an open breaker, a rate limit, a full
	// bulkhead; they reached no dependency, and their budget charge is given back).
	Refused uint64 `json:"hedges_refused"`
	// Delay is the delay the key's next call would wait before its first hedge.
	Delay time.Duration `json:"delay_ns"`
	// Samples is the number of successful attempts the latency sketch weighs (0 with a fixed
	// delay).
	Samples int `json:"samples"`
}

// keyState is the statistics and the latency sketch of one key.
type keyState struct {
	key                       string
	calls, sent, won, refused atomic.Uint64
	sketch                    *sketch // nil with a fixed delay
	fixed                     time.Duration
}

func (s *keyState) delay() time.Duration {
	if s.sketch != nil {
		if d := s.sketch.current(); d > 0 {
			return d
		}
	}
	return s.fixed
}

// Behavior is the hedging behavior: when a call has not succeeded after a delay, it sends
// another attempt through the rest of the pipeline alongside the first, and the first attempt
// to succeed wins. It is in mediator.StageDefault at behaviors.HedgeOrder: inside retry and
// outside the circuit breaker, so each attempt is gated and counted by the breaker, takes its
// own rate-limit permit and runs under its own per-attempt timeout.
//
// Hedging requires idempotent requests: a hedged command runs twice, at once. Register the
// behavior for such requests only (mediator.ForInterface, mediator.ForRequest or
// mediator.When). The attempts of one call share the request pointer: the handler must not
// modify the request.
type Behavior struct {
	cfg       Config
	maxHedges int
	maxKeys   int
	clock     behaviors.Clock // nil: the time package
	fixed     *keyState       // the request type's state, bound at Build when Key is nil
	tab       *table          // shared by the copies Bind makes
}

// table holds the states of the keys.
type table struct {
	mu     sync.Mutex // creating keys
	keys   sync.Map   // string → *keyState
	nkeys  int
	byType sync.Map  // reflect.Type → *keyState, when Handle runs unbound without a Key
	pool   sync.Pool // *call, with a stopped timer: the calls that sent no hedge
}

// New returns a hedging behavior configured by cfg. It does not validate cfg: Validate does,
// and mediator's Build calls it, so that Build reports every invalid behavior at once.
func New(cfg Config) *Behavior {
	cfg.OnHedge = slices.Clone(cfg.OnHedge)
	b := &Behavior{cfg: cfg, maxHedges: cmp.Or(cfg.MaxHedges, DefaultMaxHedges), maxKeys: cmp.Or(cfg.MaxKeys, DefaultMaxKeys),
		tab: &table{}}
	if cfg.Clock != nil && cfg.Clock != behaviors.SystemClock {
		b.clock = cfg.Clock
	}
	if b.cfg.Percentile > 0 {
		b.cfg.MinSamples = cmp.Or(cfg.MinSamples, DefaultMinSamples)
	}
	return b
}

// Placement implements mediator.PlacedBehavior: Explain shows it as "hedge", in
// mediator.StageDefault, at behaviors.HedgeOrder (see the table of orders in package behaviors).
func (b *Behavior) Placement() mediator.Placement {
	return mediator.Placement{Name: "hedge", Stage: mediator.StageDefault, Order: behaviors.HedgeOrder}
}

// Validate reports what Config.Validate reports, and the budget's configuration.
func (b *Behavior) Validate() error {
	err := b.cfg.Validate()
	if b.cfg.Budget != nil {
		err = errors.Join(err, b.cfg.Budget.Validate())
	}
	return err
}

// RetryBudget returns Config.Budget (see budget.Holder): a retry behavior outside that shares
// it marks each call counted, so that the call is counted once.
func (b *Behavior) RetryBudget() *budget.Budget { return b.cfg.Budget }

// Bind resolves the state of a request type once, when Config.Key is nil, and attaches the
// mediator's observers (RequestInfo.Observers): its Observers hear the request type's hedged
// calls, and the budget's observers (budget.Observer) its spending.
func (b *Behavior) Bind(info mediator.RequestInfo) (mediator.Behavior, error) {
	if b.cfg.Budget != nil {
		b.cfg.Budget.Observe(info.Observers)
	}
	obs := mediator.ObserversOf[Observer](info.Observers)
	keyed := b.cfg.Key != nil || b.fixed != nil
	if keyed && len(obs) == 0 {
		return b, nil
	}
	nb := *b // shares the table, so that Snapshot of either reports every key
	if !keyed {
		nb.fixed = b.state(behaviors.TypeKey(info.Request))
	}
	nb.cfg.OnHedge = slices.Clip(nb.cfg.OnHedge)
	for _, o := range obs {
		nb.cfg.OnHedge = append(nb.cfg.OnHedge, o.OnHedge)
	}
	return &nb, nil
}

// state returns the state of key, creating it while the bound allows.
func (b *Behavior) state(key string) *keyState {
	t := b.tab
	if v, ok := t.keys.Load(key); ok {
		return v.(*keyState)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.keys.Load(key); ok {
		return v.(*keyState)
	}
	if t.nkeys >= b.maxKeys && key != OverflowKey {
		key = OverflowKey
		if v, ok := t.keys.Load(key); ok {
			return v.(*keyState)
		}
	}
	s := &keyState{key: key, fixed: b.cfg.Delay}
	if b.cfg.Percentile > 0 {
		s.sketch = newSketch(b.cfg.Percentile, b.cfg.MinSamples)
	}
	t.keys.Store(key, s)
	if key != OverflowKey {
		t.nkeys++
	}
	return s
}

// stateOf returns the state of req's key.
func (b *Behavior) stateOf(req any) *keyState {
	if b.cfg.Key != nil {
		return b.state(b.cfg.Key(req))
	}
	t := reflect.TypeOf(req)
	if v, ok := b.tab.byType.Load(t); ok {
		return v.(*keyState)
	}
	s := b.state(behaviors.TypeKey(t))
	b.tab.byType.Store(t, s)
	return s
}

// Snapshot reports the statistics of every key the behavior holds, sorted by key, for an
// operator (admin's /api/hedges) or a metrics collector.
func (b *Behavior) Snapshot() []Tally {
	var out []Tally
	b.tab.keys.Range(func(_, v any) bool {
		s := v.(*keyState)
		t := Tally{Key: s.key, Calls: s.calls.Load(), Sent: s.sent.Load(), Won: s.won.Load(),
			Refused: s.refused.Load(), Delay: s.delay()}
		if s.sketch != nil {
			t.Samples = int(s.sketch.samples.Load())
		}
		out = append(out, t)
		return true
	})
	slices.SortFunc(out, func(a, b Tally) int { return cmp.Compare(a.Key, b.Key) })
	return out
}

func (b *Behavior) now() time.Time {
	if b.clock != nil {
		return b.clock.Now()
	}
	return time.Now()
}

// Handle runs the call, hedging it after the key's delay. A dispatch marked
// mediator.SingleAttempt is one attempt: the behavior steps aside.
func (b *Behavior) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	if mediator.MarksOf(ctx, req).Has(mediator.SingleAttempt) {
		return next(ctx, req)
	}
	st := b.fixed
	if st == nil {
		st = b.stateOf(req)
	}
	st.calls.Add(1)
	pctx, pcancel := context.WithCancel(ctx)
	c := b.start(ctx, req, next, st, pcancel)
	var start time.Time
	if st.sketch != nil {
		start = b.now()
	}
	resp, err := c.primary(pctx)
	c.mu.Lock()
	if c.started == 1 {
		// No hedge was sent: the call is the primary's, and no other goroutine takes part.
		c.closed, c.settled = true, true
		count := !c.counted
		c.counted = true
		c.mu.Unlock()
		if count && b.cfg.Budget != nil && (err == nil || !behaviors.Refused(err, req)) {
			// Counted once the primary is known to have got past the refusing behaviors
			// inside (or by the first hedge, see fire): a refused call grows no allowance.
			b.cfg.Budget.Count(ctx, req)
		}
		stopped := c.timer.Stop()
		pcancel()
		if err == nil && st.sketch != nil {
			st.sketch.record(b.now().Sub(start))
		}
		if stopped {
			// The timer will not run fire for this call: the call and its timer may serve
			// another.
			c.mu.Lock()
			c.ctx, c.req, c.next, c.pcancel, c.st = nil, nil, nil, nil, nil
			c.mu.Unlock()
			b.tab.pool.Put(c)
		}
		return resp, err
	}
	c.mu.Unlock()
	c.finish(0, start, resp, err)
	return c.wait()
}

// start returns the state of a call, from the pool when one is there, with its timer armed.
// The fields are set under the call's lock, which fire takes, so that a timer firing at once
// sees them.
func (b *Behavior) start(ctx context.Context, req any, next mediator.Next, st *keyState, pcancel context.CancelFunc) *call {
	delay := st.delay()
	c, _ := b.tab.pool.Get().(*call)
	if c == nil {
		c = &call{}
	}
	c.mu.Lock()
	c.b, c.st, c.ctx, c.req, c.next, c.delay, c.pcancel = b, st, ctx, req, next, delay, pcancel
	c.closed, c.settled, c.counted, c.started, c.running = false, false, false, 1, 1
	if c.timer == nil {
		c.timer = b.afterFunc(delay, c.fire)
	} else {
		c.timer.Reset(delay)
	}
	c.mu.Unlock()
	return c
}

// call is one hedged call.
type call struct {
	b       *Behavior
	st      *keyState
	ctx     context.Context // the caller's
	req     any
	next    mediator.Next
	delay   time.Duration
	timer   timer
	pcancel context.CancelFunc // the primary's

	mu        sync.Mutex
	closed    bool                 // no more hedges are sent
	settled   bool                 // the outcome is known
	counted   bool                 // the call is counted by the budget, or will be
	started   int                  // attempts started, the primary included
	running   uint64               // a bit per attempt running
	cancelled uint64               // the attempts running when the call settled
	cancels   []context.CancelFunc // the hedges': cancels[i] is attempt i+1's
	winner    int                  // the attempt that succeeded; -1 none
	resp      any                  // the winner's
	presp     any                  // the primary's
	panicked  error                // a hedge's panic, as a *mediator.PanicError
	perr      error                // the primary's
	done      chan struct{}        // closed when settled; made with the first hedge
	wg        sync.WaitGroup       // the hedges
}

// fire sends a hedge, on the timer's goroutine, and runs it there. The budget (and its
// observers) is asked without the call's lock.
func (c *call) fire() {
	c.mu.Lock()
	b, st, ctx, req := c.b, c.st, c.ctx, c.req
	if c.closed || ctx.Err() != nil {
		c.mu.Unlock()
		return
	}
	count := !c.counted
	c.counted = true
	c.mu.Unlock()
	if bg := b.cfg.Budget; bg != nil {
		if count {
			bg.Count(ctx, req) // the primary still runs: it is a call the hedge is a retry of
		}
		if err := bg.Retry(ctx, req); err != nil {
			c.mu.Lock()
			attempt := c.started
			c.closed = true
			c.mu.Unlock()
			st.refused.Add(1)
			c.notify(Notice{Phase: Refused, Attempt: attempt, Delay: c.delay, Err: err})
			return
		}
	}
	c.mu.Lock()
	if c.closed || ctx.Err() != nil {
		// The call ended while the budget was asked: the hedge is not sent.
		c.mu.Unlock()
		if b.cfg.Budget != nil {
			b.cfg.Budget.Refund(ctx, req)
		}
		return
	}
	attempt := c.started
	c.started++
	hctx, cancel := context.WithCancel(ctx)
	c.cancels = append(c.cancels, cancel)
	c.running |= 1 << attempt
	if c.done == nil {
		c.done = make(chan struct{})
	}
	if c.started <= b.maxHedges {
		c.timer.Reset(c.delay)
	}
	c.wg.Add(1)
	c.mu.Unlock()
	defer c.wg.Done()
	c.notify(Notice{Phase: Sent, Attempt: attempt, Delay: c.delay})
	var start time.Time
	if st.sketch != nil {
		start = b.now()
	}
	resp, err := c.attempt(hctx)
	if err != nil && behaviors.Refused(err, req) {
		// Refused at once inside (an open breaker, a rate limit): the hedge reached no
		// dependency. It is counted refused, its charge given back, and no more follow.
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		if b.cfg.Budget != nil {
			b.cfg.Budget.Refund(ctx, req)
		}
		st.refused.Add(1)
		c.notify(Notice{Phase: Refused, Attempt: attempt, Delay: c.delay, Err: err})
	} else {
		st.sent.Add(1) // counted once it returns, so that a refused hedge never counts as sent
	}
	c.finish(attempt, start, resp, err)
}

// primary runs the primary attempt on the caller's goroutine. Should the rest of the pipeline
// panic (a handler's panic is an error already, a behavior's is not), the call ends before the
// panic goes on up to a recovery behavior: no hedge is sent after it, and those running are
// cancelled and waited for.
func (c *call) primary(ctx context.Context) (any, error) {
	ok := false
	defer func() {
		if !ok {
			c.mu.Lock()
			c.closed = true
			c.mu.Unlock()
			c.timer.Stop()
			c.pcancel()
			c.mu.Lock()
			cancels := c.cancels
			c.mu.Unlock()
			for _, cancel := range cancels {
				cancel()
			}
			c.wg.Wait()
		}
	}()
	resp, err := c.next(ctx, c.req)
	ok = true
	return resp, err
}

// attempt runs a hedge. A panic of the rest of the pipeline on the timer's goroutine, where
// no recovery behavior outside could catch it, becomes the attempt's error, a
// *mediator.PanicError with the stack, as a handler's panic does.
func (c *call) attempt(ctx context.Context) (resp any, err error) {
	defer func() {
		if v := recover(); v != nil {
			pe := mediator.NewPanicError(v)
			c.mu.Lock()
			c.panicked = pe
			c.mu.Unlock()
			resp, err = nil, pe
		}
	}()
	return c.next(ctx, c.req)
}

// finish takes the result of an attempt: the first success settles the call, and so does the
// failure of the last attempt running. The results of attempts that end after the call
// settled are discarded.
func (c *call) finish(attempt int, start time.Time, resp any, err error) {
	var took time.Duration
	if err == nil && c.st.sketch != nil {
		took = c.b.now().Sub(start)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running &^= 1 << attempt
	if c.settled {
		return
	}
	if attempt == 0 {
		c.presp, c.perr = resp, err
	}
	switch {
	case err == nil:
		c.winner, c.resp = attempt, resp
		if c.st.sketch != nil {
			c.st.sketch.record(took)
		}
		c.settleLocked()
	case c.running == 0:
		c.winner = -1
		c.settleLocked()
		c.cancelled = 0
	}
}

// settleLocked ends the call and cancels the attempts still running.
func (c *call) settleLocked() {
	c.settled, c.closed = true, true
	c.cancelled = c.running
	close(c.done)
	if c.cancelled&1 != 0 {
		c.pcancel()
	}
	for i, cancel := range c.cancels {
		if c.cancelled&(1<<(i+1)) != 0 {
			cancel()
		}
	}
}

// wait waits, on the caller's goroutine, for the call to settle or the caller to go away, and
// then for every hedge to return: no goroutine of the call outlives it.
func (c *call) wait() (any, error) {
	select {
	case <-c.done:
	case <-c.ctx.Done():
		c.mu.Lock()
		if !c.settled {
			// The caller cancelled the attempts (their contexts are its children): none of
			// them lost to another.
			c.winner = -1
			c.settleLocked()
			c.cancelled = 0
		}
		c.mu.Unlock()
	}
	c.timer.Stop()
	c.wg.Wait()
	c.pcancel()
	for _, cancel := range c.cancels {
		cancel()
	}
	st := c.st
	if c.winner > 0 {
		st.won.Add(1)
	}
	if c.winner >= 0 {
		c.notify(Notice{Phase: Won, Attempt: c.winner})
	}
	for a := 0; a < c.started; a++ {
		if c.cancelled&(1<<a) != 0 {
			c.notify(Notice{Phase: Cancelled, Attempt: a})
		}
	}
	switch {
	case c.winner >= 0:
		return c.resp, nil
	case c.ctx.Err() != nil:
		return nil, c.ctx.Err()
	case c.panicked != nil:
		return nil, c.panicked // a bug: not to be hidden behind the primary's error
	}
	return c.presp, c.perr
}

func (c *call) notify(n Notice) {
	if len(c.b.cfg.OnHedge) == 0 {
		return
	}
	n.Request, n.Key = c.req, c.st.key
	for _, on := range c.b.cfg.OnHedge {
		on(c.ctx, n)
	}
}

// timer is a *time.Timer made by time.AfterFunc, or its equivalent on a Clock.
type timer interface {
	Stop() bool
	Reset(d time.Duration) bool
}

func (b *Behavior) afterFunc(d time.Duration, f func()) timer {
	if b.clock == nil {
		return time.AfterFunc(d, f)
	}
	t := &clockTimer{clock: b.clock, f: f}
	t.Reset(d)
	return t
}

// clockTimer runs f on a goroutine of its own once the clock's timer fires.
type clockTimer struct {
	clock behaviors.Clock
	f     func()
	mu    sync.Mutex
	stop  func() bool
	quit  chan struct{}
}

func (t *clockTimer) Stop() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stopLocked()
}

func (t *clockTimer) stopLocked() bool {
	if t.quit == nil {
		return false
	}
	stopped := t.stop()
	close(t.quit)
	t.quit = nil
	return stopped
}

func (t *clockTimer) Reset(d time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	was := t.stopLocked()
	ch, stop := t.clock.After(d)
	quit := make(chan struct{})
	t.stop, t.quit = stop, quit
	go func() {
		select {
		case <-ch:
			t.f()
		case <-quit:
		}
	}()
	return was
}
