package durable

import (
	"context"
	"errors"
	"reflect"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable/internal/maintenance"
	"github.com/switchboard-go/switchboard/durable/internal/notify"
	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// StoreOf returns q's store, for the tests of package durable_test that work below the queue
// (claims, completions, sweeps, leases).
func StoreOf(q *Queue) *store.Store { return q.store.(*store.Store) }

// EncodeFor encodes req as q's registry does for Enqueue.
func EncodeFor(q *Queue, req any) (name string, payload []byte, err error) { return q.reg.encode(req) }

// DecodeFor decodes a payload as q's scheduler does.
func DecodeFor(q *Queue, name string, payload []byte) (any, error) {
	return q.reg.decode(name, payload)
}

// Registered reports whether request type t is registered on q.
func Registered(q *Queue, t reflect.Type) bool { return q.reg.has(t) }

// DurablePolicy returns p over the durable defaults, as Open does with Config.Policy.
func DurablePolicy(p retry.Policy) retry.Policy { return defaultPolicy.Merge(p) }

// Scheduler is the scheduler Queue.Start runs, for the tests that run several on one queue or
// drive one directly (Sweep, Wake, InstanceID).
type Scheduler = scheduler

// SetPruneInterval makes schedulers started from now on prune every d, until the test ends.
func SetPruneInterval(t interface{ Cleanup(func()) }, d time.Duration) {
	prev := maintenance.PruneInterval
	maintenance.PruneInterval = d
	t.Cleanup(func() { maintenance.PruneInterval = prev })
}

// SchedulerConfig is the scheduler's part of Config, for the tests that run several
// schedulers on one queue, or one configured otherwise than the queue (NewScheduler,
// StartWith). Its zero fields are Config's defaults; its Logger is zap.L() when nil.
type SchedulerConfig = schedulerConfig

// StartWith runs q's scheduler as Start does, configured by cfg instead of q's Config.
func StartWith(q *Queue, sender mediator.Sender, cfg SchedulerConfig) error {
	return q.start(sender, cfg)
}

// ValidateScheduler reports what Open reports of the scheduler's part of a Config like cfg.
func ValidateScheduler(cfg SchedulerConfig) error {
	_, err := cfg.withDefaults()
	return err
}

// NewScheduler returns a scheduler that is not started, as Queue.Start makes one.
func NewScheduler(q *Queue, sender mediator.Sender, cfgs ...SchedulerConfig) (*Scheduler, error) {
	if q == nil {
		return nil, errors.New("durable: nil queue")
	}
	var cfg SchedulerConfig
	if len(cfgs) > 0 {
		cfg = cfgs[0]
	}
	return newScheduler(q, sender, cfg)
}

// BreakerStoreListening returns a channel closed once s's listening connection (PostgreSQL)
// first listens for notifications.
func BreakerStoreListening(s *BreakerStore) <-chan struct{} { return s.listened }

// BreakerStorePollFailures returns how many polls of s have failed in a row.
func BreakerStorePollFailures(s *BreakerStore) int { return s.health.Failures() }

// AuditFor records e in q's audit log, as the queue's own actions do.
func AuditFor(q *Queue, e record.AuditEntry) error { return q.audit(context.Background(), nil, e) }

// ListenHooks are called by a scheduler's listening connection (PostgreSQL): Listening once it
// listens, with its backend process id; Notified when a notification wakes the scheduler;
// Relisten after the connection failed, before the wait to listen again (it may block until
// ctx ends).
type ListenHooks struct {
	Listening func(pid int64)
	Notified  func()
	Relisten  func(ctx context.Context)
}

// SetListenHooks sets the hooks of s, before its Start.
func SetListenHooks(s *Scheduler, h ListenHooks) {
	s.hooks = notify.Hooks{Listening: h.Listening, Notified: h.Notified, Relisten: h.Relisten}
}

// NotifierIdle waits until q's notifier has sent what its enqueues asked for, so that a test
// knows which connections of the pool are busy.
func NotifierIdle(q *Queue) {
	if q.notifier != nil {
		q.notifier.Idle()
	}
}

// RateLimitStoreStatements returns how many statements s has sent to the database.
func RateLimitStoreStatements(s *RateLimitStore) int64 { return s.statements.Load() }

// Filter selects the items List returns: the tests' listing of items in id order (users page
// with Queue.Items).
type Filter struct {
	State   record.ItemState // when not empty, only items in that state
	Name    string           // when not empty, only items of that request name
	AfterID record.ItemID    // only items with a larger id, for paging
	Limit   int              // zero means 100
}

// List returns the items f selects, in id order, after Filter.AfterID.
func (q *Queue) List(ctx context.Context, f Filter) ([]record.Item, error) {
	items, err := q.store.List(ctx, store.Filter{State: store.State(f.State), Name: f.Name, AfterID: store.ItemID(f.AfterID), Limit: f.Limit})
	if err != nil {
		return nil, err
	}
	out := make([]record.Item, len(items))
	for i, it := range items {
		out[i] = itemOf(it)
	}
	return out, nil
}

// SetCountLimit makes q count each state's items exactly only up to n (ExactCountLimit).
func SetCountLimit(q *Queue, n int) { q.countLimit = n }
