package breaker_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/mediator"
)

// OnRefusal hears every refused call, through the behavior and through Gate, with the key, and
// no call that was let through: not a closed breaker's, not a half-open probe's.
func TestOnRefusal(t *testing.T) {
	var mu sync.Mutex
	var heard []string
	c := fixedClock{t: time.Unix(1000, 0)}
	reg := breaker.NewRegistry(breaker.Config{Key: quoteEndpoint, FailureThreshold: 1, Clock: c,
		OnRefusal: []func(string){func(key string) { mu.Lock(); heard = append(heard, key); mu.Unlock() }}})
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *GetQuote) (*Quote, error) { return nil, &httpError{503} })
	m.Use(breaker.New(reg))
	mustBuild(m)
	ctx := context.Background()
	if _, err := mediator.Send(ctx, m, &GetQuote{Endpoint: "a"}); !errors.Is(err, breaker.ErrTripped) || len(heard) != 0 {
		t.Fatal(err, heard)
	}
	if _, err := mediator.Send(ctx, m, &GetQuote{Endpoint: "a"}); !errors.Is(err, breaker.ErrOpen) {
		t.Fatal(err)
	}
	if _, err := reg.Gate("a"); !errors.Is(err, breaker.ErrOpen) {
		t.Fatal(err)
	}
	if p, err := reg.Gate("b"); err != nil {
		t.Fatal(err)
	} else {
		p.Success()
	}
	if !slices.Equal(heard, []string{"a", "a"}) {
		t.Fatal(heard)
	}
}

// An open breaker's error reads as a person would say the wait: a wall clock's remaining time
// (299.783922ms, 9.999811827s) was printed to the nanosecond.
func TestOpenErrorRoundsRemaining(t *testing.T) {
	for remaining, want := range map[time.Duration]string{
		299783922 * time.Nanosecond:  "probe in 300ms",
		9999811827 * time.Nanosecond: "probe in 10s",
		1549 * time.Millisecond:      "probe in 1.5s",
		30 * time.Second:             "probe in 30s",
		0:                            "probe in 0s",
		400 * time.Microsecond:       "probe in 400µs",
	} {
		err := &breaker.OpenError{Key: "k", Remaining: remaining}
		if got := err.Error(); !strings.Contains(got, "("+want+")") {
			t.Errorf("Remaining %v: %q, want (%s)", remaining, got, want)
		}
		if err.RetryAfter() != remaining {
			t.Errorf("RetryAfter %v, want the exact %v", err.RetryAfter(), remaining)
		}
	}
}
