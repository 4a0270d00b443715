package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/behaviors/timeout"
	"github.com/switchboard-go/switchboard/mediator"
)

// Quote asks the rates service for the exchange rate of a currency.
type Quote struct {
	mediator.Returns[float64]
	Currency string
}

// String names the request in the call log.
func (q *Quote) String() string { return "Quote{" + q.Currency + "}" }

// audit is the custom behavior: it reports every attempt that passes it, with the attempt's
// number, how long it took and how it ended.
type audit struct{ out io.Writer }

// Placement puts audit just inside retry (behaviors.RetryOrder is 50, the breaker's
// behaviors.BreakerOrder 60): it sees each attempt, and the breaker's refusals too. Use needs
// no options for a behavior that says where it belongs.
func (a *audit) Placement() mediator.Placement {
	return mediator.Placement{Name: "audit", Stage: mediator.StageDefault, Order: behaviors.RetryOrder + 1}
}

func (a *audit) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	n := retry.AttemptNumber(ctx) // set by the retry behavior outside
	start := time.Now()
	resp, err := next(ctx, req)
	took := time.Since(start).Round(time.Millisecond)
	var tripped *breaker.TrippedError
	switch {
	case err == nil:
		fmt.Fprintf(a.out, "    audit: attempt %d ok after %v\n", n, took)
	case behaviors.Refused(err, req):
		fmt.Fprintf(a.out, "    audit: attempt %d refused at once, the handler was not called: %v\n", n, err)
	case errors.As(err, &tripped):
		fmt.Fprintf(a.out, "    audit: attempt %d failed after %v and opened the breaker: %v\n", n, took, tripped.Err)
	default:
		fmt.Fprintf(a.out, "    audit: attempt %d failed after %v: %v\n", n, took, err)
	}
	return resp, err
}

// unavailable is the rates service's answer when it cannot serve: its status code 503 is one
// retry retries and the breaker counts, without configuration.
type unavailable struct{}

func (unavailable) Error() string   { return "rates service answered 503" }
func (unavailable) StatusCode() int { return 503 }

// rates is the service behind Quote. answers says how it answers each call for a currency:
// "slow" takes longer than the per-attempt timeout, "503" fails, anything else succeeds; past
// the end of the list the last answer repeats.
type rates struct {
	answers map[string][]string
	calls   map[string]int
}

func (r *rates) quote(ctx context.Context, currency string) (float64, error) {
	list := r.answers[currency]
	answer := list[min(r.calls[currency], len(list)-1)]
	r.calls[currency]++
	latency := 20 * time.Millisecond
	if answer == "slow" {
		latency = time.Second
	}
	t := time.NewTimer(latency)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-t.C:
	}
	if answer == "503" {
		return 0, unavailable{}
	}
	return 1.08, nil
}

func run(ctx context.Context, out io.Writer) error {
	svc := &rates{
		answers: map[string][]string{"EUR": {"slow", "503", "ok"}, "USD": {"503"}},
		calls:   map[string]int{},
	}
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, q *Quote) (float64, error) {
		return svc.quote(ctx, q.Currency)
	})

	// Registered in no particular order: stage and order decide the chain.
	m.Use(&audit{out})
	m.Use(timeout.New(timeout.Config{Duration: 100 * time.Millisecond})) // per attempt
	m.Use(breaker.New(breaker.NewRegistry(breaker.Config{FailureThreshold: 3, OpenDuration: 10 * time.Second})))
	// Options win over a behavior's own placement; a BehaviorFunc has none, so they give it one.
	m.Use(mediator.BehaviorFunc(func(ctx context.Context, req any, next mediator.Next) (any, error) {
		fmt.Fprintf(out, "  call %v\n", req)
		resp, err := next(ctx, req)
		if err != nil {
			fmt.Fprintf(out, "  => failed: %v\n", err)
		} else {
			fmt.Fprintf(out, "  => rate %v\n", resp)
		}
		return resp, err
	}), mediator.WithStage(mediator.StagePre), mediator.WithName("call-log"))
	m.Use(retry.New(retry.Config{Policy: retry.Policy{
		MaxAttempts: 4, BaseDelay: 50 * time.Millisecond, RetryOnTimeout: behaviors.On,
	}}))
	if err := m.Build(); err != nil {
		return err
	}
	defer m.Close()

	chain, err := mediator.Explain[*Quote](m)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "pipeline of *Quote, outermost first (stage, order):\n%s\n", chain)

	fmt.Fprintln(out, "EUR: the first attempt times out, the second fails, the third works:")
	if _, err := mediator.Send(ctx, m, &Quote{Currency: "EUR"}); err != nil {
		return err
	}
	fmt.Fprintln(out, "\nUSD: the service is down; the third failure in a row opens the breaker and ends the retries:")
	if _, err := mediator.Send(ctx, m, &Quote{Currency: "USD"}); err == nil {
		return errors.New("USD: the quote of a service that is down succeeded")
	}
	fmt.Fprintln(out, "\nUSD again: the open breaker refuses it; retry does not try a refused call again:")
	_, err = mediator.Send(ctx, m, &Quote{Currency: "USD"})
	if !errors.Is(err, breaker.ErrOpen) {
		return fmt.Errorf("USD again: got %v, want a refusal of the open breaker", err)
	}
	fmt.Fprintf(out, "\nthe handler ran %d times for EUR and %d for USD: the refused call never reached it\n",
		svc.calls["EUR"], svc.calls["USD"])
	return nil
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
