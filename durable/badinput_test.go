package durable_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/mediator"
)

// A policy Open refuses is refused by Register's WithPolicy the same way: an error naming the
// field, never a panic. The error is kept: Start refuses to run the queue and a Build with its
// deferral fails, so a registration whose error went unchecked is not silently missing. A
// BaseDelay beyond the MaxDelay of the layer below (the durable default, an hour) is refused by
// both too: every delay would have been cut to MaxDelay without a word.
func TestInvalidPolicyIsAnErrorEverywhere(t *testing.T) {
	for _, c := range []struct {
		name string
		p    retry.Policy
		want string
	}{
		{"negative attempts", retry.Policy{MaxAttempts: -1}, "MaxAttempts -1 is negative"},
		{"max delay below base delay", retry.Policy{BaseDelay: time.Minute, MaxDelay: time.Second}, "MaxDelay 1s is shorter than BaseDelay 1m0s"},
		{"base delay beyond the default max delay", retry.Policy{BaseDelay: 2 * time.Hour}, "MaxDelay 1h0m0s is shorter than BaseDelay 2h0m0s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := sqliteBackend(t)
			if _, err := durable.Open(context.Background(), b.driver(), durable.Config{Policy: c.p}); !errors.Is(err, retry.ErrInvalidPolicy) ||
				!strings.Contains(err.Error(), c.want) {
				t.Fatalf("Open: %v, want %q", err, c.want)
			}
			q := b.bare(t, durable.Config{})
			err := registerErr(t, func() error { return durable.Register[*Work](q, "test.work", durable.WithPolicy(c.p)) })
			if !errors.Is(err, retry.ErrInvalidPolicy) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "WithPolicy") {
				t.Fatalf("Register: %v, want %q", err, c.want)
			}
			m := mediator.New(nil, mediator.Config{})
			mediator.HandleFunc(m, func(context.Context, *Work) (mediator.Void, error) { return mediator.Void{}, nil })
			m.Use(durable.NewDeferral(q, durable.DeferralConfig{}))
			if err := m.Build(); !errors.Is(err, retry.ErrInvalidPolicy) {
				t.Fatalf("Build with the deferral: %v", err)
			}
			m2 := mediatorFor(t, handlers{})
			if err := durable.StartWith(q, m2, durable.SchedulerConfig{}); !errors.Is(err, retry.ErrInvalidPolicy) || !strings.Contains(err.Error(), c.want) {
				_ = q.Shutdown(context.Background())
				t.Fatalf("Start: %v", err)
			}
		})
	}
}

// NewDeferral's bad arguments are Build's errors, not panics.
func TestNewDeferralBadArgumentsFailBuild(t *testing.T) {
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *Work) (mediator.Void, error) { return mediator.Void{}, nil })
	noPanic(t, "NewDeferral(nil)", func() { m.Use(durable.NewDeferral(nil, durable.DeferralConfig{})) })
	if err := m.Build(); err == nil || !strings.Contains(err.Error(), "nil queue") {
		t.Fatalf("Build: %v", err)
	}
}

// Every refusal of what an enqueue was given matches ErrInvalidEnqueue, keeps the check's own
// message, and stores nothing; a request that is not registered is not such a refusal (it is
// ErrUnknownRequest), so a service can answer the first as the caller's mistake.
func TestEnqueueRefusalsMatchErrInvalidEnqueue(t *testing.T) {
	e := newEnv(t, sqliteBackend(t))
	ctx := context.Background()
	for _, c := range []struct {
		opt  durable.EnqueueOption
		want string
	}{
		{durable.WithToken(""), "token is empty"},
		{durable.WithToken("a\x00b"), "NUL"},
		{durable.WithReference(" r"), "reference"},
		{durable.WithReference("a\x00b"), "the reference"},
		{durable.WithDedupeKey(strings.Repeat("k", 1025)), "dedupe key"},
		{durable.WithOrderingKey("\xff"), "ordering key"},
		{durable.WithBreakerKey("a\x00b"), "breaker key"},
		{durable.WithFairnessKey("\xff"), "fairness key"},
		{durable.WithPriority(10), "WithPriority 10"},
		{durable.WithDeadline(time.Unix(1, 0)), "deadline"},
		{durable.WithDebounce("", time.Second, time.Minute), "WithDebounce"},
	} {
		_, err := e.q.Enqueue(ctx, &Work{N: 1}, c.opt)
		if !errors.Is(err, durable.ErrInvalidEnqueue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want ErrInvalidEnqueue naming %q, got %v", c.want, err)
		}
	}
	// Two options that each say when the item is due: the first used to win, silently.
	if _, err := e.q.Enqueue(ctx, &Work{N: 1}, durable.WithRunAt(time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)), durable.WithDelay(time.Hour)); !errors.Is(err, durable.ErrInvalidEnqueue) ||
		!strings.Contains(err.Error(), "WithRunAt(2031-01-01T00:00:00Z) and WithDelay(1h0m0s) both say when the item is due") {
		t.Errorf("WithRunAt and WithDelay: %v; want ErrInvalidEnqueue naming both", err)
	}
	if page := must[durable.ItemPage](t)(e.q.Items(ctx, durable.ItemFilter{})); len(page.Items) != 0 {
		t.Errorf("%d items stored", len(page.Items))
	}
	// A request passed by value, whose pointer type is registered: the error says so.
	if _, err := e.q.Enqueue(ctx, Work{N: 1}); !errors.Is(err, durable.ErrUnknownRequest) ||
		!strings.Contains(err.Error(), "request type durable_test.Work is not registered (*durable_test.Work is: pass a pointer)") {
		t.Errorf("a request by value: %v; want ErrUnknownRequest naming the pointer type", err)
	}
	// A delay computed to a moment that has passed: due now, not refused.
	if en, err := e.q.Enqueue(ctx, &Work{N: 2}, durable.WithDelay(-time.Minute)); err != nil {
		t.Errorf("a negative delay: %v", err)
	} else if it := item(t, e.q, en.ID); it.NextAt.After(e.clock.Now()) {
		t.Errorf("a negative delay: due at %v, after now (%v)", it.NextAt, e.clock.Now())
	}
	type unregistered struct{ mediator.Command }
	if _, err := e.q.Enqueue(ctx, &unregistered{}); errors.Is(err, durable.ErrInvalidEnqueue) || !errors.Is(err, durable.ErrUnknownRequest) {
		t.Errorf("an unregistered request: %v; want ErrUnknownRequest only", err)
	}
}

// An Enqueue whose context is cancelled before it has a connection says so, not that the
// database gave it none (it used to read "no connection: context canceled"), and nothing is
// stored.
func TestEnqueueWithACancelledContextSaysSo(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := e.q.Enqueue(ctx, &Work{N: 1})
		if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "no connection") ||
			!strings.Contains(err.Error(), "before anything was sent") {
			t.Errorf("a cancelled enqueue: %v", err)
		}
		if page := must[durable.ItemPage](t)(e.q.Items(context.Background(), durable.ItemFilter{})); len(page.Items) != 0 {
			t.Errorf("%d items stored", len(page.Items))
		}
	})
}
