package budget_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/budget"
)

type GetUser struct{ ID int }

type GetOrder struct{ ID int }

// TestRatio: over the window, retries are at most Ratio × calls plus the floor's allowance.
func TestRatio(t *testing.T) {
	ctx, clk := context.Background(), newClock()
	b := budget.New(budget.Config{Ratio: 0.2, Floor: budget.NoFloor, Window: 10 * time.Second, Clock: clk})
	req := &GetUser{}
	for range 100 {
		b.Count(ctx, req)
	}
	allowed := 0
	for range 50 {
		if b.Retry(ctx, req) == nil {
			allowed++
		}
	}
	if allowed != 20 {
		t.Fatalf("allowed %d retries of 100 calls at 20%%, want 20", allowed)
	}
	err := b.Retry(ctx, req)
	var se *budget.SpentError
	if !errors.As(err, &se) || !errors.Is(err, budget.ErrSpent) {
		t.Fatalf("over budget: %v, want a *SpentError matching ErrSpent", err)
	}
	if !behaviors.Refused(err, req) {
		t.Fatalf("the refusal is not req's refusal: %v", err)
	}
	if info := se.Refusal(); info.By != "retry-budget" || info.Key != "*budget_test.GetUser" {
		t.Fatalf("refusal info %+v", info)
	}
	if se.Calls != 100 || se.Retries != 20 {
		t.Fatalf("counts in the error: %d calls, %d retries", se.Calls, se.Retries)
	}
	// Nothing new: the window has room once the oldest slot's retries leave, which with all
	// counted in one slot is after the whole window.
	if w := behaviors.RetryAfter(err); w != 10*time.Second {
		t.Fatalf("RetryAfter %s, want 10s", w)
	}
	// Another key has its own budget.
	if err := b.Retry(ctx, &GetOrder{}); err == nil {
		t.Fatal("a key without calls and no floor was allowed a retry")
	}
	// The window slides: after it, the calls and retries are gone.
	clk.Advance(10 * time.Second)
	if u := b.Snapshot(); len(u) != 2 || u[0].Calls != 0 || u[0].Retries != 0 {
		t.Fatalf("snapshot after the window: %+v", u)
	}
}

// TestFloor: a key with few calls may still make Floor retries per second of the window.
func TestFloor(t *testing.T) {
	ctx, clk := context.Background(), newClock()
	b := budget.New(budget.Config{Floor: 0.5, Window: 10 * time.Second, Clock: clk})
	req := &GetUser{}
	allowed := 0
	for range 20 {
		if b.Retry(ctx, req) == nil {
			allowed++
		}
	}
	if allowed != 5 {
		t.Fatalf("allowed %d retries with no calls and a floor of 0.5/s over 10 s, want 5", allowed)
	}
	u := b.Snapshot()
	if len(u) != 1 || u[0].Retries != 5 || u[0].Refused != 15 || u[0].Allowed != 5 {
		t.Fatalf("snapshot %+v", u)
	}
}

// TestSliding: counts leave the window slot by slot, and RetryAfter says when the first
// retry fits again.
func TestSliding(t *testing.T) {
	ctx, clk := context.Background(), newClock()
	b := budget.New(budget.Config{Ratio: 0.5, Floor: budget.NoFloor, Window: 10 * time.Second, Clock: clk})
	req := &GetUser{}
	for range 10 {
		b.Count(ctx, req) // 10 calls at 0 s
	}
	clk.Advance(3 * time.Second)
	for range 10 {
		b.Count(ctx, req) // 10 more at 3 s
	}
	for range 10 {
		if err := b.Retry(ctx, req); err != nil {
			t.Fatal(err) // 10 retries of 20 calls at 50 %
		}
	}
	err := b.Retry(ctx, req)
	if err == nil {
		t.Fatal("the 11th retry of 20 calls at 50% was allowed")
	}
	// At 10 s the first calls leave: 10 calls allow 5 retries, 10 are counted; the retries
	// at 3 s leave at 13 s, so the window has room then (10 s from now).
	if w := behaviors.RetryAfter(err); w != 10*time.Second {
		t.Fatalf("RetryAfter %s, want 10s", w)
	}
	clk.Advance(7 * time.Second) // 10 s: the first calls left
	if err := b.Retry(ctx, req); err == nil {
		t.Fatal("allowed with 10 calls and 10 retries in the window")
	}
	clk.Advance(3 * time.Second) // 13 s: everything left
	if err := b.Retry(ctx, req); err == nil {
		t.Fatal("allowed with no calls and no floor")
	}
	b.Count(ctx, req)
	b.Count(ctx, req)
	if err := b.Retry(ctx, req); err != nil {
		t.Fatalf("2 calls at 50%% allow 1 retry: %v", err)
	}
}

// TestCallMarks: Call counts once per dispatch and marks the context, so a second Call or
// Count for the same request on it counts nothing; another request is counted.
func TestCallMarks(t *testing.T) {
	ctx := context.Background()
	b := budget.New(budget.Config{Clock: newClock()})
	other := budget.New(budget.Config{Clock: newClock()})
	req := &GetUser{ID: 1}
	c1 := b.Call(ctx, req)
	c2 := b.Call(c1, req)
	b.Count(c2, req)
	c3 := other.Call(c2, req) // another budget counts its own
	b.Count(c3, req)          // still marked for b beneath other's mark
	b.Count(c3, &GetUser{ID: 2})
	if u := b.Snapshot(); len(u) != 1 || u[0].Calls != 2 {
		t.Fatalf("b counted %+v, want 2 calls (one per request)", u)
	}
	if u := other.Snapshot(); len(u) != 1 || u[0].Calls != 1 {
		t.Fatalf("other counted %+v, want 1 call", u)
	}
	m := b.MarkCounted(ctx, req)
	b.Count(m, req)
	if u := b.Snapshot(); u[0].Calls != 2 {
		t.Fatalf("a dispatch marked counted was counted: %+v", u)
	}
}

// TestKey: Config.Key keys the budget; nil keys by request type.
func TestKey(t *testing.T) {
	b := budget.New(budget.Config{Key: func(any) string { return "users-api" }})
	if k := b.KeyOf(&GetUser{}); k != "users-api" {
		t.Fatalf("KeyOf %q", k)
	}
	if k := budget.New(budget.Config{}).KeyOf(&GetOrder{}); k != "*budget_test.GetOrder" {
		t.Fatalf("KeyOf by type %q", k)
	}
}

// TestValidate: every invalid field is reported, each by name.
func TestValidate(t *testing.T) {
	if err := (budget.Config{}).Validate(); err != nil {
		t.Fatalf("zero Config: %v", err)
	}
	err := budget.Config{Ratio: -1, Floor: -2, Window: time.Millisecond}.Validate()
	if err == nil {
		t.Fatal("invalid Config accepted")
	}
	for _, f := range []string{"Ratio", "Floor", "Window"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("%v does not name %s", err, f)
		}
	}
	b := budget.New(budget.Config{})
	if b.Ratio() != budget.DefaultRatio || b.Window() != budget.DefaultWindow || b.Floor() != budget.DefaultFloor {
		t.Fatalf("defaults: %v %v %v", b.Ratio(), b.Window(), b.Floor())
	}
}

// TestSuccessPathAllocs: counting a call allocates nothing.
func TestSuccessPathAllocs(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range []budget.Config{{}, {Key: func(any) string { return "users-api" }}} {
		b := budget.New(cfg)
		req := &GetUser{}
		b.Count(ctx, req)
		if n := testing.AllocsPerRun(1000, func() { b.Count(ctx, req) }); n != 0 {
			t.Fatalf("Count allocates %v times per call", n)
		}
		// Two request types in turn, each a miss of the last type looked up.
		other := &GetOrder{}
		b.Count(ctx, other)
		if n := testing.AllocsPerRun(1000, func() { b.Count(ctx, req); b.Count(ctx, other) }); n != 0 {
			t.Fatalf("Count of two types in turn allocates %v times per pair", n)
		}
	}
}

// TestOnSpend: the observers see every retry asked, allowed or refused.
func TestOnSpend(t *testing.T) {
	var got []budget.Spend
	b := budget.New(budget.Config{Floor: 0.1, Window: 10 * time.Second, Clock: newClock(),
		OnSpend: []func(context.Context, budget.Spend){func(_ context.Context, s budget.Spend) { got = append(got, s) }}})
	req := &GetUser{}
	_ = b.Retry(context.Background(), req)
	_ = b.Retry(context.Background(), req)
	if len(got) != 2 || got[0].Refused || !got[1].Refused || got[1].Retries != 1 || got[0].Request != req {
		t.Fatalf("spends %+v", got)
	}
}

// TestRefund: a refunded retry no longer counts, so the allowance has room for it again; a
// refund finds the slot the retry was charged in while the window holds it, never takes a
// count below zero, and is observed as a refund.
func TestRefund(t *testing.T) {
	ctx, clk := context.Background(), newClock()
	var spends []budget.Spend
	b := budget.New(budget.Config{Ratio: 1, Floor: budget.NoFloor, Window: 10 * time.Second, Clock: clk,
		OnSpend: []func(context.Context, budget.Spend){func(_ context.Context, s budget.Spend) { spends = append(spends, s) }}})
	req := &GetUser{}
	b.Count(ctx, req)
	b.Count(ctx, req)
	if b.Retry(ctx, req) != nil {
		t.Fatal("the first retry was refused")
	}
	clk.Advance(3 * time.Second) // the charge stays in its slot, three slots back
	if b.Retry(ctx, req) != nil || b.Retry(ctx, req) == nil {
		t.Fatal("want a second retry allowed and a third refused")
	}
	b.Refund(ctx, req)
	if u := b.Snapshot(); u[0].Retries != 1 || u[0].Refused != 1 {
		t.Fatalf("after a refund: %+v, want 1 retry", u[0])
	}
	if b.Retry(ctx, req) != nil {
		t.Fatal("the refunded retry's room was not given back")
	}
	b.Refund(ctx, req)
	b.Refund(ctx, req) // the retry charged 3 s ago
	b.Refund(ctx, req) // nothing left to give back
	if u := b.Snapshot(); u[0].Retries != 0 || u[0].Calls != 2 {
		t.Fatalf("after refunds beyond the charges: %+v, want 0 retries, 2 calls", u[0])
	}
	if last := spends[len(spends)-1]; !last.Refund || last.Refused || last.Key != "*budget_test.GetUser" {
		t.Fatalf("the refund was observed as %+v", last)
	}
	// A retry charged in a slot the window has left is gone already: a late refund has
	// nothing to give back, and leaves no negative count behind.
	if b.Retry(ctx, req) != nil {
		t.Fatal("refused")
	}
	clk.Advance(10 * time.Second)
	b.Refund(ctx, req)
	b.Count(ctx, req)
	if b.Retry(ctx, req) != nil || b.Retry(ctx, req) == nil {
		t.Fatal("want one retry of one call allowed, and no more")
	}
}
