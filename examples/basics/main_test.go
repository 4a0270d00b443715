package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"GetPrice{tea} = 450 cents",
		// Both handlers of ItemAdded ran, in registration order.
		"  [stock]     reserved 2 tea, 8 left\n  [analytics] ada wants 2 tea\n  AddToCart{ada, 2 tea} done",
		// ContinueOnError: the failing first handler did not stop the second one, and its error
		// is the command's.
		"  [analytics] bob wants 2 mug\n  AddToCart{bob, 2 mug} failed: stock: only 1 mug left, 2 wanted\n",
		// The caller's break ended the stream after two of the three products under 10.00.
		"  1: tea (green tea) 450 cents\n  2: mug (blue mug) 900 cents\n\n5.",
		"*validation.Error for *main.AddToCart: qty must be at least 1, got 0 (errors.Is ErrInvalid: true; handler calls: 2 before, 2 after)",
		"RemoveFromCart: *mediator.NoHandlerError for *main.RemoveFromCart (errors.Is ErrNoHandler: true)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "cup") {
		t.Errorf("the stream went on after the caller's break:\n%s", got)
	}
}

// A caller whose context is already done gets its error before anything runs.
func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out strings.Builder
	if err := run(ctx, &out); !errors.Is(err, context.Canceled) {
		t.Fatalf("run = %v, want context.Canceled", err)
	}
}
