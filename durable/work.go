package durable

import (
	"context"
	"reflect"

	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/internal/testhooks"
	"github.com/switchboard-go/switchboard/mediator"
)

func init() {
	testhooks.Work = func(ctx context.Context, q any, sender mediator.Sender, cfg any) (testhooks.Counts, error) {
		return work(ctx, q.(*Queue), sender, cfg.(SchedulerConfig))
	}
	testhooks.NameOf = func(q any, t reflect.Type) (string, bool) {
		reg := q.(*Queue).reg.lookupType(t)
		if reg == nil {
			return "", false
		}
		return reg.name, true
	}
	testhooks.Decode = func(q any, name string, payload []byte) (any, error) {
		return q.(*Queue).reg.decode(name, payload)
	}
}

// work claims the items of q that are due, one at a time as a scheduler with one worker does,
// and runs each through the scheduler's own per-item code (process) and completion, in the
// calling goroutine, until none is due. Dispatches run under ctx; once ctx ends, work stops.
func work(ctx context.Context, q *Queue, sender mediator.Sender, cfg SchedulerConfig) (testhooks.Counts, error) {
	var n testhooks.Counts
	s, err := newScheduler(q, sender, cfg)
	if err != nil {
		return n, err
	}
	defer func() {
		s.endLife()
		s.endBase()
	}()
	s.life = ctx
	for ctx.Err() == nil {
		now := q.clock.Now()
		items, err := q.store.ClaimIsolated(ctx, s.cfg.InstanceID, now, s.cfg.Lease)
		if err == nil && len(items) == 0 {
			items, err = q.store.ClaimAlone(ctx, s.cfg.InstanceID, now, s.cfg.Lease, 1)
		}
		if err != nil {
			return n, err
		}
		if len(items) == 0 {
			return n, nil
		}
		comp := s.process(&items[0])
		results, err := q.store.Complete(context.WithoutCancel(ctx), []store.Completion{comp})
		if err != nil {
			return n, err
		}
		if results[0] != nil {
			return n, results[0]
		}
		s.notifyDead([]store.Completion{comp}, results)
		switch {
		case comp.Outcome == store.OutcomeSucceeded:
			n.Succeeded++
		case comp.State == store.StateDead:
			n.Dead++
		case comp.Outcome == "":
			n.Refused++
		default:
			n.Retried++
		}
	}
	return n, ctx.Err()
}
