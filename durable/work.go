package durable

import (
	"context"
	"reflect"

	"github.com/switchboard-go/switchboard/durable/internal/exec"
	"github.com/switchboard-go/switchboard/durable/internal/executor"
	"github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/mediator"
)

func init() {
	exec.Register(func(v any) (exec.Queue, bool) {
		q, ok := v.(*Queue)
		if !ok || q == nil {
			return nil, false
		}
		return internal{q}, true
	})
}

// internal is a Queue as package exec sees it.
type internal struct{ q *Queue }

func (i internal) NameOf(t reflect.Type) (string, bool) {
	reg := i.q.reg.lookupType(t)
	if reg == nil {
		return "", false
	}
	return reg.name, true
}

func (i internal) Decode(name string, payload []byte) (any, error) {
	return i.q.reg.decode(name, payload)
}

// Executor returns a scheduler that is never started, as an exec.Executor: its items are
// claimed one at a time, as a scheduler with one worker claims them, and run through the
// scheduler's own executor and completion.
func (i internal) Executor(ctx context.Context, sender mediator.Sender, instance string) (exec.Executor, error) {
	cfg := i.q.schedCfg
	switch {
	case instance != "":
		cfg.InstanceID = instance
	case cfg.InstanceID == "":
		cfg.InstanceID = "durabletest"
	}
	s, err := newScheduler(i.q, sender, cfg)
	if err != nil {
		return nil, err
	}
	// Dispatches run under the caller's context.
	s.exec = executor.New(executor.Config{Items: s.items, Gate: s.gate, Sender: sender, Clock: i.q.clock, Logger: s.cfg.Logger,
		Instance: s.cfg.InstanceID, Recheck: i.q.recheck, SuccessRows: i.q.successRows}, ctx)
	return workExecutor{s}, nil
}

// workExecutor is a scheduler driven by exec.Work in the caller's goroutine.
type workExecutor struct{ s *scheduler }

func (e workExecutor) Claim(ctx context.Context) (*store.Claimed, error) {
	s := e.s
	now := s.q.clock.Now()
	items, err := s.q.store.ClaimIsolated(ctx, s.cfg.InstanceID, now, s.cfg.Lease)
	if err == nil && len(items) == 0 {
		items, err = s.q.store.ClaimAlone(ctx, s.cfg.InstanceID, now, s.cfg.Lease, 1)
	}
	if err != nil || len(items) == 0 {
		return nil, err
	}
	return &items[0], nil
}

func (e workExecutor) Process(c *store.Claimed) store.Completion { return e.s.exec.Process(c) }

func (e workExecutor) Complete(ctx context.Context, comp store.Completion) error {
	batch := []store.Completion{comp}
	results, err := e.s.q.store.Complete(ctx, batch)
	if err != nil {
		return err
	}
	if results[0] != nil {
		return results[0]
	}
	e.s.notifyDead(batch, results)
	return nil
}

func (e workExecutor) Close() {
	e.s.endLife()
	e.s.endBase()
}
