package fallback_test

import (
	"context"
	"errors"
	"testing"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/fallback"
	"github.com/switchboard-go/switchboard/mediator"
)

// OnFallback hears each failure the fallback answers, with its request and error, and nothing
// else: not a success, not an error the Classifier passes on.
func TestFallbackOnFallbackHearsRequest(t *testing.T) {
	var heard []error
	var reqs []any
	fb := fallback.NewFor(func(context.Context, *Call, error) (*Reply, error) { return &Reply{Text: "fb"}, nil },
		fallback.Config{
			Classifier: func(err error) bool { return !errors.Is(err, breaker.ErrOpen) },
			OnFallback: []func(context.Context, fallback.Fallback){func(_ context.Context, f fallback.Fallback) {
				reqs, heard = append(reqs, f.Request), append(heard, f.Err)
			}},
		})
	var fail error
	m := build(t, func(context.Context, *Call) (*Reply, error) { return &Reply{}, fail }, fb)
	ctx := context.Background()
	if _, err := mediator.Send(ctx, m, &Call{}); err != nil || len(heard) != 0 {
		t.Fatal(err, heard)
	}
	fail = errBoom
	req := &Call{Endpoint: "e"}
	if r, err := mediator.Send(ctx, m, req); err != nil || r.Text != "fb" || len(heard) != 1 || heard[0] != errBoom || reqs[0] != req {
		t.Fatal(r, err, heard, reqs)
	}
	fail = &breaker.OpenError{Key: "k"}
	if _, err := mediator.Send(ctx, m, &Call{}); !errors.Is(err, breaker.ErrOpen) || len(heard) != 1 {
		t.Fatal(err, heard)
	}
}
