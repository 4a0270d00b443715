package mediator_test

import (
	"context"
	"strings"
	"testing"

	"github.com/switchboard-go/switchboard/mediator"
)

type countingObserver struct{ n int }

// Observe keeps each observer once, in the order attached, ignores nil ones, hands them to
// the behaviors' Bind, and panics after Build as Use does.
func TestObserveKeepsEachObserverOnce(t *testing.T) {
	a, b := &countingObserver{}, &countingObserver{}
	var nilObserver *countingObserver
	m := mediator.New(nil, mediator.Config{})
	m.Observe(a, nil, nilObserver, b, a, "tag", "tag")
	var seen []any
	m.Use(bindSpy{seen: &seen})
	mediator.HandleFunc(m, func(context.Context, *Ping) (string, error) { return "pong", nil })
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	got := m.Observers()
	if len(got) != 3 || got[0] != any(a) || got[1] != any(b) || got[2] != "tag" {
		t.Fatalf("Observers() = %v, want [a b tag]", got)
	}
	if len(seen) != 3 {
		t.Fatalf("Bind saw observers %v, want the mediator's three", seen)
	}
	if n := len(mediator.ObserversOf[*countingObserver](got)); n != 2 {
		t.Fatalf("ObserversOf found %d *countingObserver, want 2", n)
	}
	defer func() {
		if p := recover(); p == nil || !strings.Contains(p.(string), "Observe after Build") {
			t.Fatalf("Observe after Build: recovered %v", p)
		}
	}()
	m.Observe(&countingObserver{})
}

// bindSpy notes the observers Bind is given.
type bindSpy struct{ seen *[]any }

func (s bindSpy) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	return next(ctx, req)
}

func (s bindSpy) Bind(info mediator.RequestInfo) (mediator.Behavior, error) {
	*s.seen = info.Observers
	return s, nil
}

// SameObserver compares pointers and comparable values, and never panics on values that
// cannot be compared.
func TestSameObserver(t *testing.T) {
	a := &countingObserver{}
	type funcs struct{ f func() }
	for _, c := range []struct {
		x, y any
		want bool
	}{
		{a, a, true}, {a, &countingObserver{}, false}, {"x", "x", true}, {1, "1", false},
		{funcs{}, funcs{}, false}, {[]int{1}, []int{1}, false}, {any(nil), any(nil), false},
		{struct{ v any }{[]int{}}, struct{ v any }{[]int{}}, false},
	} {
		if got := mediator.SameObserver(c.x, c.y); got != c.want {
			t.Errorf("SameObserver(%#v, %#v) = %v, want %v", c.x, c.y, got, c.want)
		}
	}
}
