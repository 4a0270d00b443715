package fallback_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/switchboard-go/switchboard/behaviors/fallback"
	"github.com/switchboard-go/switchboard/mediator"
)

// The hook hears what the fallback did, after its function ran: a function that fails is heard
// as Failed and one that declines as Declined, never as an answer; only a response is Answered.
// A declined failure reaches the caller unchanged; a failed fallback's error is the caller's.
func TestFallbackHookHearsOutcomeAfterFunction(t *testing.T) {
	var order []string
	var heard []fallback.Fallback
	errCache := errors.New("cache down")
	m := build(t, func(context.Context, *Call) (*Reply, error) { return nil, errBoom },
		fallback.NewFor(func(_ context.Context, c *Call, _ error) (*Reply, error) {
			order = append(order, "function")
			switch c.Endpoint {
			case "fails":
				return nil, errCache
			case "miss":
				return nil, fmt.Errorf("no cached reply for %s: %w", c.Endpoint, fallback.ErrDecline)
			}
			return &Reply{Text: "cached"}, nil
		}, fallback.Config{
			When: func(_ context.Context, req any, err error) bool { return req.(*Call).Endpoint != "never" },
			OnFallback: []func(context.Context, fallback.Fallback){func(_ context.Context, f fallback.Fallback) {
				order = append(order, "hook")
				heard = append(heard, f)
			}},
		}))
	for _, c := range []struct {
		endpoint string
		err      error
		verdict  fallback.Verdict
		calls    []string
	}{
		{"fails", errCache, fallback.Failed, []string{"function", "hook"}},
		{"miss", errBoom, fallback.Declined, []string{"function", "hook"}},
		{"never", errBoom, fallback.Declined, []string{"hook"}},
		{"ok", nil, fallback.Answered, []string{"function", "hook"}},
	} {
		order, heard = nil, nil
		req := &Call{Endpoint: c.endpoint}
		r, err := mediator.Send(context.Background(), m, req)
		if err != c.err || (err == nil) != (r != nil) {
			t.Errorf("%s: %v, %v; want error %v", c.endpoint, r, err, c.err)
		}
		if fmt.Sprint(order) != fmt.Sprint(c.calls) {
			t.Errorf("%s: calls %v, want %v: the hook hears the fallback after its function ran", c.endpoint, order, c.calls)
		}
		if len(heard) != 1 || heard[0].Verdict != c.verdict || heard[0].Err != errBoom || heard[0].Request != req {
			t.Errorf("%s: heard %+v, want one %v of %v", c.endpoint, heard, c.verdict, errBoom)
			continue
		}
		if want := map[bool]error{true: errCache}[c.verdict == fallback.Failed]; heard[0].FallbackErr != want {
			t.Errorf("%s: FallbackErr %v, want %v", c.endpoint, heard[0].FallbackErr, want)
		}
	}
}

// A caller that gives up while the fallback function runs is not a failure of the fallback:
// the hook hears Cancelled and the caller gets what the function returned.
func TestFallbackCancelledWhileFunctionRuns(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var heard []fallback.Verdict
	m := build(t, func(context.Context, *Call) (*Reply, error) { return nil, errBoom },
		fallback.NewFor(func(ctx context.Context, _ *Call, _ error) (*Reply, error) {
			cancel()
			return nil, ctx.Err()
		}, fallback.Config{OnFallback: []func(context.Context, fallback.Fallback){func(_ context.Context, f fallback.Fallback) { heard = append(heard, f.Verdict) }}}))
	if _, err := mediator.Send(ctx, m, &Call{}); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if len(heard) != 1 || heard[0] != fallback.Cancelled {
		t.Fatalf("heard %v, want [cancelled]", heard)
	}
}

// The caller's cancellation before the fallback is reached is never handled: neither When nor
// the function nor the hook hears it.
func TestFallbackCancellationNeverReachesWhenOrHook(t *testing.T) {
	var calls []string
	ctx, cancel := context.WithCancel(context.Background())
	m := build(t, func(ctx context.Context, _ *Call) (*Reply, error) { cancel(); return nil, errBoom },
		fallback.NewFor(func(context.Context, *Call, error) (*Reply, error) {
			calls = append(calls, "function")
			return &Reply{}, nil
		},
			fallback.Config{
				When:       func(context.Context, any, error) bool { calls = append(calls, "when"); return true },
				OnFallback: []func(context.Context, fallback.Fallback){func(context.Context, fallback.Fallback) { calls = append(calls, "hook") }},
			}))
	if _, err := mediator.Send(ctx, m, &Call{}); err != errBoom || len(calls) != 0 {
		t.Fatal(err, calls)
	}
}

func TestVerdictString(t *testing.T) {
	for v, want := range map[fallback.Verdict]string{0: "unknown", fallback.Answered: "answered", fallback.Declined: "declined",
		fallback.Failed: "failed", fallback.Cancelled: "cancelled", fallback.Cancelled + 1: "Verdict(5)", 9: "Verdict(9)"} {
		if got := v.String(); got != want {
			t.Errorf("%d: %q, want %q", v, got, want)
		}
	}
}
