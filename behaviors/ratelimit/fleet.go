package ratelimit

import (
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// fleetLimit is the local side of a key's fleet limit: the permits leased for it, handed out at
// their times, and the share of the limit the instance keeps to while the store is away.
type fleetLimit struct {
	l *limiter

	mu        sync.Mutex
	runs      []run // leased permits not yet taken
	fallback  bool
	shareTat  int64   // the theoretical arrival time of the share's GCRA, while falling back
	instances int     // as the store last said; 0: never said
	lastAsk   int64   // when a call last asked for a permit (local nanoseconds)
	asks      int64   // the calls that asked for a permit since sampled
	sampled   int64   // when demand was last updated
	demand    float64 // the moving average of the calls a second that ask for a permit
	short     bool    // a call found no permit since the last lease
	refill    chan struct{}
	leased    int64
	nextTry   int64       // while falling back: when to try the store again
	skipUntil int64       // leased permits before it are not used (see granted)
	late      int64       // how much later than expiry's base a leased permit may still be used
	leasing   atomic.Bool // a lease of the key is under way (the leaser's pass, or leaseNow)
}

// run is a batch of leased permits: left permits, from next on, interval apart (local time).
type run struct {
	next, interval int64
	left           int
}

// newFleetLimit returns the fleet side of l, whose leaser ticks every tick.
func newFleetLimit(l *limiter, now, tick int64) *fleetLimit {
	return &fleetLimit{l: l, lastAsk: now, sampled: now, late: tick}
}

// expiry is how long after its time a leased permit may still be used: the burst's tolerance,
// one interval and one tick of the leaser, so that a call that comes late still finds the
// permit of its slot. A parked item comes back at its promised slot plus the latency of its
// queue's claim, which at a fleet's rate is many intervals: a permit that expired at one
// interval went unused, and the fleet's backlog drained at a third of its rate. Used late, a
// permit is still one permit: the rate over time is the fleet's, the calls of one tick may
// come together.
func (f *fleetLimit) expiry() int64 { return f.l.tol + f.l.interval + f.late }

// take reserves the next leased permit (see limiter.take); -1 and false when it knows of none
// and the store answers (a lease is to come).
func (f *fleetLimit) take(now, maxWait int64) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastAsk = now
	f.asks++
	if i := f.first(now); i >= 0 {
		r := &f.runs[i]
		wait := max(r.next-now, 0)
		if wait > maxWait {
			return wait, false
		}
		r.next += r.interval
		if r.left--; r.left == 0 {
			f.runs = append(f.runs[:i], f.runs[i+1:]...)
		}
		return wait, true
	}
	if f.fallback {
		n := int64(max(f.instances, 1))
		interval := spanOf(n, f.l.interval)
		tol := spanOf(int64(max(f.l.burst/int(n), 1)-1), interval)
		base := max(f.shareTat, now)
		wait := max(base-tol-now, 0)
		if wait > maxWait {
			return wait, false
		}
		f.shareTat = base + interval
		return wait, true
	}
	f.short = true
	return -1, false
}

// first drops the permits too late to use and returns the run of the earliest permit left,
// or -1.
func (f *fleetLimit) first(now int64) int {
	oldest := now - f.expiry()
	best := -1
	for i := 0; i < len(f.runs); {
		r := &f.runs[i]
		if r.next < oldest {
			skip := (oldest-r.next)/r.interval + 1
			if skip >= int64(r.left) {
				f.runs = append(f.runs[:i], f.runs[i+1:]...)
				continue
			}
			r.next += skip * r.interval
			r.left -= int(skip)
		}
		if best < 0 || r.next < f.runs[best].next {
			best = i
		}
		i++
	}
	return best
}

// giveBack returns a permit taken but not used: while falling back, to the share; else the
// permit's slot has gone by the time anyone else could take it, and the lease it was part of
// ends the sooner.
func (f *fleetLimit) giveBack() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fallback && len(f.runs) == 0 {
		f.shareTat -= f.l.interval * int64(max(f.instances, 1))
	}
}

// refilled returns a channel closed at the next lease (or fallback) of the key.
func (f *fleetLimit) refilled() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.short = true
	if f.refill == nil {
		f.refill = make(chan struct{})
	}
	return f.refill
}

// shareInterval is the interval between the permits of the instance's share of the key's
// rate: the key's interval times the instances the store last said.
func (f *fleetLimit) shareInterval() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return spanOf(int64(max(f.instances, 1)), f.l.interval)
}

// retryAfter is the wait a call refused for want of a lease is told: one permit's interval at
// the fleet's rate, about when the lease under way has come, or the last lease's round trip
// when that took longer (a slow store), so that a parked item does not come back, and be
// refused again, before its key's lease.
func (f *fleetLimit) retryAfter(trip int64) int64 { return max(f.l.interval, trip) }

func (f *fleetLimit) rateNow() float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fallback {
		return f.l.rate / float64(max(f.instances, 1))
	}
	return f.l.rate
}

func (f *fleetLimit) snapshot(now int64, s *KeySnapshot) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s.Fleet, s.Fallback, s.Instances, s.Leased = true, f.fallback, max(f.instances, 1), f.leased
	oldest := now - f.expiry()
	for _, r := range f.runs {
		for i, t := 0, r.next; i < r.left && t <= now; i, t = i+1, t+r.interval {
			if t >= oldest {
				s.Available++
			}
		}
	}
}

// wants returns how many permits to lease now, for the instance's own demand (the moving
// average of its calls a second): none while the key holds the permits its demand takes over
// three quarters of a lease period (and never more than that period's permits: the store leases
// none further than a period ahead), when its demand is under one call in that lead (its calls
// then lease on demand: see Behavior.awaitLease), or when it has not been asked for lately.
// A call that found no permit makes it lease at once.
func (f *fleetLimit) wants(now, period int64) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if dt := now - f.sampled; dt > 0 {
		w := 1 - math.Exp(-float64(dt)/float64(demandOver))
		f.demand += w * (float64(f.asks)*1e9/float64(dt) - f.demand)
		f.asks, f.sampled = 0, now
	}
	if now < f.nextTry {
		return 0 // falling back, or the store said when its next permits are free
	}
	n := max(min(int(math.Round(f.demand*float64(period)/4e9)), batch(f.l.rate, period)), 1)
	if f.short {
		return n
	}
	if now-f.lastAsk > idleAfter(period) {
		return 0 // quiet: the permits it would lease would go unused
	}
	lead := period * 3 / 4
	need := f.demand * float64(lead) / 1e9
	if need < 1 {
		return 0 // leased ahead, its permits would mostly pass unused
	}
	end, held := now, 0
	oldest := now - f.expiry()
	for _, r := range f.runs {
		end = max(end, r.next+int64(r.left-1)*r.interval)
		skip := max((oldest-r.next+r.interval-1)/r.interval, 0)
		held += max(r.left-int(skip), 0)
	}
	if end-now >= lead || float64(held) >= need {
		return 0
	}
	return n
}

// demandOver is the time constant of the moving average of a key's demand: a second, so that
// a key's leases follow its calls within a few seconds, and a key called now and then (its
// average under one call in three quarters of a period) does not lease ahead.
const demandOver = time.Second

// idleAfter is how long after its last call a key stops leasing: four lease periods, and at
// least a second, so that a key asked for now and then keeps its permits coming.
func idleAfter(period int64) int64 { return max(4*period, int64(time.Second)) }

// batch is the most permits of one lease: a quarter of a lease period's worth at the fleet's
// rate, so that an instance holds at most about a period's permits, and at least 1.
func batch(rate float64, period int64) int {
	return max(int(math.Round(rate*float64(period)/4e9)), 1)
}

// granted records a lease: n permits from first on (local time).
func (f *fleetLimit) granted(now, period, first int64, n, instances int, retry int64) (wasFallback bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextTry = retry
	if f.fallback {
		// Back from the share, whose permits calls may hold up to shareTat, while the other
		// instances keep to theirs until they too find the store back (within a period): the
		// leased permits before then would be taken twice over.
		f.skipUntil = max(f.shareTat, now+period)
	}
	if n > 0 && first < f.skipUntil {
		skip := min((f.skipUntil-first+f.l.interval-1)/f.l.interval, int64(n))
		first, n = first+skip*f.l.interval, n-int(skip)
	}
	if n > 0 {
		f.runs = append(f.runs, run{next: first, interval: f.l.interval, left: n})
		f.leased += int64(n)
		f.short = false
	}
	f.instances = max(instances, 1)
	wasFallback, f.fallback = f.fallback, false
	f.wake()
	return wasFallback
}

// failed records a store that did not answer: the key keeps to its share until it does.
func (f *fleetLimit) failed(now, period int64) (wasFallback bool, instances int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	wasFallback = f.fallback
	if !f.fallback {
		// The share's permits follow the leased ones the key still holds, and the ones the
		// other instances may hold: the store leased none further than a period ahead of the
		// last lease anyone made.
		f.fallback, f.shareTat = true, now+period
		for _, r := range f.runs {
			f.shareTat = max(f.shareTat, r.next+int64(r.left)*r.interval)
		}
	}
	f.nextTry = now + period/2 // the instances find the store back within half a period of each other
	f.wake()
	return wasFallback, max(f.instances, 1)
}

// busy reports whether the key holds leased permits not yet expired, a caller awaiting a lease,
// or falls back to its share; f.mu is held.
func (f *fleetLimit) busy(now int64, _ *leaser) bool {
	if f.fallback || f.refill != nil || f.shareTat > now {
		return true
	}
	oldest := now - f.expiry()
	for _, r := range f.runs {
		if r.next+int64(r.left-1)*r.interval >= oldest {
			return true
		}
	}
	return false
}

func (f *fleetLimit) wake() {
	if f.refill != nil {
		close(f.refill)
		f.refill = nil
	}
}

// leaser leases the permits of a Behavior's fleet keys, in the background.
type leaser struct {
	b      *Behavior
	store  PermitStore
	period int64
	tick   int64

	mu      sync.Mutex
	keys    []*limiter
	started bool
	closed  bool
	wake    chan struct{}
	inline  sync.WaitGroup // the leases of leaseNow under way
	// The clock offset estimate (see offset), shared by the leases of the pass and leaseNow.
	offsetMu                      sync.Mutex
	offsetSet                     bool
	offsetRTT, offsetAt, offsetNs int64
	ctx                           context.Context
	cancel                        context.CancelFunc
	done                          chan struct{}
	lastTrip                      atomic.Int64 // how long the last lease took, to its answer
}

func newLeaser(b *Behavior) *leaser {
	period := int64(b.cfg.Store.LeasePeriod())
	if period <= 0 {
		period = int64(250 * time.Millisecond)
	}
	l := &leaser{b: b, store: b.cfg.Store, period: period, tick: max(period/8, int64(time.Millisecond)),
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l
}

// add starts leasing for a key, and the leasing goroutine with the first.
func (l *leaser) add(lim *limiter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.keys = append(l.keys, lim)
	if !l.started {
		l.started = true
		go l.loop()
	}
	l.poke()
}

// remove stops leasing for a key dropped (see Behavior.drop). The keys slice is copied, not
// changed in place: the leasing goroutine may be going through the old one.
func (l *leaser) remove(lim *limiter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys = slices.DeleteFunc(slices.Clone(l.keys), func(k *limiter) bool { return k == lim })
}

// poke wakes the leasing goroutine.
func (l *leaser) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *leaser) close() {
	l.mu.Lock()
	started := l.started
	l.closed = true
	l.mu.Unlock()
	l.cancel()
	if started {
		<-l.done
	}
	l.inline.Wait()
}

// leaseNow leases key k at once, in a goroutine of its own, unless a lease of it is under way:
// a call that finds no permit of its key waits for one round trip to the store, not for the
// leaser's pass over every key, which takes a round trip per key wanting a lease (seconds,
// with a thousand keys called now and then).
func (l *leaser) leaseNow(k *limiter) {
	if !k.fleet.leasing.CompareAndSwap(false, true) {
		return
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		k.fleet.leasing.Store(false)
		return
	}
	l.inline.Add(1)
	l.mu.Unlock()
	go func() {
		defer l.inline.Done()
		defer k.fleet.leasing.Store(false)
		l.lease(k)
	}()
}

func (l *leaser) loop() {
	defer close(l.done)
	for {
		l.mu.Lock()
		keys := l.keys
		l.mu.Unlock()
		for _, k := range keys {
			if l.ctx.Err() != nil {
				return
			}
			if k.fleet.leasing.CompareAndSwap(false, true) { // else leaseNow is leasing it
				l.lease(k)
				k.fleet.leasing.Store(false)
			}
		}
		ch, stop := l.b.clock.After(time.Duration(l.tick))
		select {
		case <-l.ctx.Done():
			stop()
			return
		case <-ch:
		case <-l.wake:
			stop()
		}
	}
}

// lease leases the permits key wants, if any; the caller holds the key's leasing flag.
func (l *leaser) lease(k *limiter) {
	f := k.fleet
	sent := l.b.nanos()
	n := f.wants(sent, l.period)
	if n == 0 {
		return
	}
	lease, err := l.store.Lease(l.ctx, LeaseRequest{Key: k.key, Interval: time.Duration(k.interval), Burst: k.burst, Permits: n})
	got := l.b.nanos()
	l.lastTrip.Store(got - sent)
	if err != nil {
		if l.ctx.Err() != nil {
			return
		}
		was, instances := f.failed(got, l.period)
		if !was {
			l.fallback(FallbackEvent{Key: k.key, Active: true, Share: k.rate / float64(instances), Instances: instances, Err: err})
		}
		return
	}
	offset := l.offset(lease.Now.UnixNano(), sent, got)
	first := lease.First.UnixNano() - offset
	var retry int64
	if lease.Permits == 0 && !lease.Next.IsZero() {
		// Its next free permit is too far ahead: try once a lease would be granted.
		retry = lease.Next.UnixNano() - offset - l.period + int64(n-1)*k.interval
	}
	if f.granted(got, l.period, first, lease.Permits, lease.Instances, retry) {
		l.fallback(FallbackEvent{Key: k.key, Share: k.rate, Instances: max(lease.Instances, 1)})
	}
}

// offset returns the store's clock less the local one, from a lease whose store now was read
// between sent and got (local): about halfway, within half the round trip. The estimate of the
// lease with the shortest round trip of the last offsetFor is kept, as NTP does, so that a slow
// lease does not shift the permits it leases against those the others lease.
func (l *leaser) offset(storeNow, sent, got int64) int64 {
	l.offsetMu.Lock()
	defer l.offsetMu.Unlock()
	rtt, est := got-sent, storeNow-(sent+got)/2
	if !l.offsetSet || rtt <= l.offsetRTT || got-l.offsetAt > int64(offsetFor) {
		l.offsetSet, l.offsetRTT, l.offsetAt, l.offsetNs = true, rtt, got, est
	}
	return l.offsetNs
}

// offsetFor is how long the clock offset of the best lease is kept (see leaser.offset).
const offsetFor = 10 * time.Second

func (l *leaser) fallback(e FallbackEvent) {
	for _, fn := range l.b.cfg.OnFallback {
		fn(l.ctx, e)
	}
}
