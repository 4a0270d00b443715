package gate

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-go/switchboard/durable/internal/store"
)

// Pauses is an instance's view of the paused breaker keys: read from the store every
// PollInterval, at most every LookInterval (Watch), and changed at once by the instance's own
// Pause and Resume.
type Pauses struct {
	mu   sync.Mutex
	keys map[string]time.Time // key → until (zero: until resumed)
	gen  uint64
	// n is len(keys), read without the lock by Any: the gate asks it for every item it
	// claims, and no key is paused nearly always.
	n atomic.Int32
}

// Set pauses key until until (zero: until resumed).
func (p *Pauses) Set(key string, until time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.keys == nil {
		p.keys = map[string]time.Time{}
	}
	p.keys[key] = until
	p.gen++
	p.n.Store(int32(len(p.keys)))
}

// Drop ends the pause of key.
func (p *Pauses) Drop(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.keys, key)
	p.gen++
	p.n.Store(int32(len(p.keys)))
}

// Paused reports whether key is paused at now, and until when (zero: until resumed).
func (p *Pauses) Paused(key string, now time.Time) (time.Time, bool) {
	if key == "" {
		return time.Time{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	until, ok := p.keys[key]
	if !ok || !until.IsZero() && !until.After(now) {
		return time.Time{}, false
	}
	return until, true
}

// Any reports whether any key is paused (expired ones included): the gate looks at an item's
// keys only then.
func (p *Pauses) Any() bool { return p.n.Load() > 0 }

// replace sets the paused keys to those of rows that hold at now, read when the view was at
// generation gen, and returns the keys that were paused at the last look and no longer are
// (resumed elsewhere, or ended by their time). A view changed by this instance since the read
// began is kept as it is: the read may predate the change, and the next look brings both.
func (p *Pauses) replace(rows []store.PauseRow, now time.Time, gen uint64) []string {
	next := make(map[string]time.Time, len(rows))
	for _, r := range rows {
		if r.Until.IsZero() || r.Until.After(now) {
			next[r.Target] = r.Until
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gen != gen {
		return nil
	}
	var ended []string
	for k := range p.keys {
		if _, ok := next[k]; !ok {
			ended = append(ended, k)
		}
	}
	p.keys = next
	p.n.Store(int32(len(next)))
	return ended
}

// generation returns the view's generation: every Set and Drop changes it.
func (p *Pauses) generation() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gen
}

// pausedKeyOf returns the paused breaker key that holds c back at now, if one does (its guard
// key, the key its breaker's key function gives, or the key it is parked on), and until when
// (zero: until resumed). Without paused keys it looks at nothing.
func (g *Gate) pausedKeyOf(c *store.Claimed, req any, now time.Time) (key string, until time.Time, paused bool) {
	if !g.pauses.Any() {
		return "", time.Time{}, false
	}
	_, guard := g.guardOf(c, req)
	for _, k := range []string{guard, c.GuardKey, c.ParkedKey} {
		if until, paused = g.pauses.Paused(k, now); paused {
			return k, until, true
		}
	}
	return "", time.Time{}, false
}

// parkPaused undoes the claim of an item held back by a pause of key: no attempt. It is parked
// on the key, due when the pause ends or Recheck later, whichever is sooner (a resume frees the
// items parked on the key at once; the recheck bounds the wait should a pause be replaced by a
// shorter one); never later than its deadline.
func (g *Gate) parkPaused(comp store.Completion, c *store.Claimed, key string, until time.Time) store.Completion {
	// No error: the item keeps its last attempt's (a pause is no attempt, and a deadline passing
	// under it ends the item with that error); its parked key and the pause say why it waits.
	comp.State, comp.Outcome, comp.ParkedKey, comp.StartedAt, comp.Paused = store.StatePending, "", key, time.Time{}, true
	next := comp.EndedAt.Add(g.cfg.Recheck)
	if !until.IsZero() && until.Before(next) {
		next = until
	}
	comp.NextAt = CapAt(next, c.Deadline)
	return comp
}

// LookInterval is the shortest interval between two looks at the paused and limited breaker
// keys: with a short PollInterval, looking on every poll would add statements per poll to every
// idle instance, while a key's pause or limit reaching the other instances a second later
// costs little.
const LookInterval = time.Second

// Watch looks at the paused and limited keys every PollInterval, and at most every
// LookInterval, until stop is closed.
func (g *Gate) Watch(stop <-chan struct{}) {
	t := time.NewTicker(max(g.cfg.PollInterval, LookInterval))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			g.Look()
		}
	}
}

// Look reads the paused and limited keys now. The items parked on a key that was paused and no
// longer is (resumed on another instance, or ended by its time) are freed as the items of a
// breaker that closed are; the keys with free slots are noted, and their items woken.
func (g *Gate) Look() {
	g.lookAtPauses()
	g.lookAtLimits()
}

func (g *Gate) lookAtPauses() {
	gen := g.pauses.generation()
	var rows []store.PauseRow
	err := g.storeCall("read the paused keys", func(ctx context.Context) (err error) {
		rows, err = g.cfg.Store.Pauses(ctx, store.PauseBreakerKey)
		return err
	})
	if err != nil {
		return
	}
	g.unparkEnded(g.pauses.replace(rows, g.cfg.Clock.Now(), gen))
}
