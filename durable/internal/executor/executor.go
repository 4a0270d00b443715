package executor

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable/internal/gate"
	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/mediator"
)

// Items is what the executor needs of the queue's registrations.
type Items interface {
	// Policy returns the retry policy of the items of name.
	Policy(name string) retry.Policy
	// Decode decodes payload into a new request of the type registered as name. known is false
	// when this instance has no registration of name (err then says so).
	Decode(name string, payload []byte) (req any, known bool, err error)
	// Context returns parent made the context of the dispatch of c's request req by instance:
	// its metadata, its marks and its dispatch.
	Context(parent context.Context, c *store.Claimed, req any, instance string) context.Context
	// Retries is the policy's classification of a dispatch of req, registered as name, that
	// failed with err (see gate.Retryable).
	Retries(ctx context.Context, name string, req any, err error) bool
}

// Config configures an Executor; every field is required.
type Config struct {
	Items    Items
	Gate     *gate.Gate
	Sender   mediator.Sender
	Clock    behaviors.Clock
	Logger   *zap.Logger
	Instance string
	Recheck  time.Duration // how long an item this instance cannot run waits (for the warning)
	// SuccessRows asks for a row of its own for each succeeded attempt (store.Completion's
	// SuccessRow): durable.Config.SuccessAttemptRows. Optional.
	SuccessRows bool
}

// Executor runs claimed items, each as one attempt.
type Executor struct {
	cfg Config
	// life is the parent of every dispatch context: a shutdown cancels it.
	life context.Context

	mu        sync.Mutex
	unknown   map[string]bool // request names found and not registered, already warned about
	unhandled map[string]bool // request names the sender has no handler for, already warned about
}

// New returns an executor whose dispatches run under life.
func New(cfg Config, life context.Context) *Executor {
	return &Executor{cfg: cfg, life: life, unknown: map[string]bool{}, unhandled: map[string]bool{}}
}

// Release undoes a claim of c that was not attempted (a shutdown before it started).
func (e *Executor) Release(c store.Claimed) store.Completion {
	return store.Completion{Fence: c.Fence(), State: store.StatePending, NextAt: c.NextAt, EndedAt: e.cfg.Clock.Now(), ParkedKey: c.ParkedKey, Name: c.Name}
}

// Process dispatches c as one attempt and returns its outcome. It drops c's payload once it is
// decoded, so a large payload is not held twice while the handler runs, and keeps no reference
// to c once it returns (the claim loop reuses it).
func (e *Executor) Process(c *store.Claimed) store.Completion {
	g := e.cfg.Gate
	pol := e.cfg.Items.Policy(c.Name)
	comp := store.Completion{Fence: c.Fence(), EndedAt: e.cfg.Clock.Now(), Name: c.Name, ParkedKey: c.ParkedKey, SuccessRow: e.cfg.SuccessRows}
	if done, ok := g.Check(c, pol, comp); !ok {
		return done
	}
	req, known, err := e.cfg.Items.Decode(c.Name, c.Payload)
	c.Payload = nil // the decoded request is all that is needed from here on
	if !known {
		// An instance on another version (a rolling deploy) may know the name: not attempted,
		// looked at again later, by whichever instance claims it.
		e.warnOnce(e.unknown, c.Name, "durable: request name not registered in this instance; its items wait for an instance that knows it")
		return g.Unknown(c, comp, err)
	}
	if err != nil {
		comp.State, comp.Error, comp.ParkedKey, comp.Cause = store.StateDead, err.Error(), "", store.DeadUndecodable
		return comp
	}
	t, held, ok := g.Admit(c, req, &comp, func() context.Context {
		ctx := e.cfg.Items.Context(e.life, c, req, e.cfg.Instance)
		c.Metadata = nil
		return ctx
	})
	if !ok {
		return held
	}
	defer t.Release()
	if e.life.Err() != nil {
		t.Refund()
		r := e.Release(*c) // shutting down: not started
		r.Held = comp.Held // the slot it took is freed with the release: wake the items parked on it
		return r
	}
	t.Started()
	comp.StartedAt = e.cfg.Clock.Now()
	err = Send(t.Context, e.cfg.Sender, req)
	comp.EndedAt = e.cfg.Clock.Now()
	done := g.Judge(c, req, &t, comp, err, e.life.Err() != nil, pol, func(err error) bool {
		return e.cfg.Items.Retries(t.Context, c.Name, req, err)
	})
	if err != nil && gate.Unhandled(err, req) {
		// The sender has no handler for it (one Start could not ask): looked at again later, by
		// whichever instance claims it, as an unknown name is.
		e.warnOnce(e.unhandled, c.Name, "durable: no handler for the request in this instance; its items wait for an instance that has one")
	}
	return done
}

// Send sends req through sender, turning a panic into an error: the dispatch of an item, a
// replay, a batch item.
func Send(ctx context.Context, sender mediator.Sender, req any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = mediator.NewPanicError(p)
		}
	}()
	_, err = sender.SendAny(ctx, req)
	return err
}

// warnOnce logs msg once per request name in seen (unknown or unhandled): this instance cannot
// run the items of name, which wait.
func (e *Executor) warnOnce(seen map[string]bool, name, msg string) {
	e.mu.Lock()
	warned := seen[name]
	seen[name] = true
	e.mu.Unlock()
	if !warned {
		e.cfg.Logger.Warn(msg, zap.String("instance", e.cfg.Instance), zap.String("name", name), zap.Duration("recheck", e.cfg.Recheck))
	}
}
