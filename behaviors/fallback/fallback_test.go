package fallback_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/fallback"
	"github.com/switchboard-go/switchboard/mediator"
)

type ListItems struct {
	mediator.Returns[[]string]
}

func TestFallbackTyped(t *testing.T) {
	var gotErr error
	m := build(t, func(context.Context, *Call) (*Reply, error) { return nil, errBoom },
		fallback.NewFor(func(_ context.Context, q *Call, err error) (*Reply, error) {
			gotErr = err
			return &Reply{Text: "cached " + q.Endpoint}, nil
		}, fallback.Config{}))
	r, err := mediator.Send(context.Background(), m, &Call{Endpoint: "e"})
	if err != nil || r.Text != "cached e" || gotErr != errBoom {
		t.Fatal(r, err, gotErr)
	}
}

// A generic fallback applies to every request type whose response accepts its result; Build
// fails for one that does not.
func TestFallbackGenericCheckedAtBuild(t *testing.T) {
	empty := fallback.New(func(context.Context, any, error) ([]string, error) { return []string{}, nil }, fallback.Config{})
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *ListItems) ([]string, error) { return nil, errBoom })
	mediator.HandleFunc(m, (&script{}).Handle)
	m.Use(empty)
	err := m.Build()
	var be *mediator.BehaviorError
	if !errors.As(err, &be) || be.Behavior != "fallback" || !strings.Contains(err.Error(), "fallback returns []string, but *testkit.Call responds with *testkit.Reply") {
		t.Fatalf("Build: %v", err)
	}

	m = mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *ListItems) ([]string, error) { return nil, errBoom })
	mediator.HandleFunc(m, (&script{}).Handle)
	m.Use(empty, mediator.ForRequest[*ListItems]())
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	items, err := mediator.Send(context.Background(), m, &ListItems{})
	if err != nil || items == nil || len(items) != 0 {
		t.Fatal(items, err)
	}
}

func TestFallbackNeverCatchesCallerCancellation(t *testing.T) {
	called := false
	m := build(t, func(ctx context.Context, _ *Call) (*Reply, error) { return nil, ctx.Err() },
		fallback.NewFor(func(context.Context, *Call, error) (*Reply, error) { called = true; return &Reply{}, nil }, fallback.Config{}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := mediator.Send(ctx, m, &Call{})
	if err != context.Canceled || called {
		t.Fatal(err, called)
	}
}

func TestFallbackCatching(t *testing.T) {
	fb := fallback.NewFor(func(context.Context, *Call, error) (*Reply, error) { return &Reply{Text: "fb"}, nil },
		fallback.Config{Classifier: func(err error) bool { return errors.Is(err, breaker.ErrOpen) }})
	m := build(t, func(context.Context, *Call) (*Reply, error) { return nil, errBoom }, fb)
	if _, err := mediator.Send(context.Background(), m, &Call{}); err != errBoom {
		t.Fatal(err)
	}
}

// OnFallback hears each failure the fallback answers, and only those: not a success, not an
// error its Classifier passes on.
func TestFallbackOnFallback(t *testing.T) {
	var heard []error
	cfg := fallback.Config{
		Classifier: func(err error) bool { return err != errBoom },
		OnFallback: []func(context.Context, fallback.Fallback){func(_ context.Context, f fallback.Fallback) { heard = append(heard, f.Err) }},
	}
	results := []error{errOther, errBoom, nil}
	s := &script{Results: results}
	m := build(t, s.Handle,
		fallback.NewFor(func(context.Context, *Call, error) (*Reply, error) { return &Reply{Text: "fb"}, nil }, cfg))
	for range results {
		_, _ = mediator.Send(context.Background(), m, &Call{})
	}
	if len(heard) != 1 || heard[0] != errOther {
		t.Fatal(heard)
	}
}

var errOther = errors.New("other")

// A client that reports the caller's cancellation in its own error type (not wrapping
// context.Canceled) does not get a degraded response either: the caller gave up, and the error
// passes on unchanged.
func TestFallbackNeverCatchesCancellationInClientError(t *testing.T) {
	called := false
	ctx, cancel := context.WithCancel(context.Background())
	m := build(t, func(ctx context.Context, _ *Call) (*Reply, error) {
		cancel() // the caller gives up while the call runs
		return nil, &rpcStatus{"context canceled"}
	},
		fallback.NewFor(func(context.Context, *Call, error) (*Reply, error) { called = true; return &Reply{}, nil }, fallback.Config{}))
	_, err := mediator.Send(ctx, m, &Call{})
	var rs *rpcStatus
	if !errors.As(err, &rs) || called {
		t.Fatal(err, called)
	}
}

// Quoted is implemented by the request types that share one fallback.
type Quoted interface {
	mediator.Request[*Reply]
	Symbol() string
}

type QuoteA struct {
	mediator.Returns[*Reply]
}

func (*QuoteA) Symbol() string { return "A" }

// A typed fallback for an interface applies to every request type implementing it, instead of
// silently to none.
func TestFallbackForInterface(t *testing.T) {
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *QuoteA) (*Reply, error) { return nil, errBoom })
	mediator.HandleFunc(m, (&script{Results: []error{errBoom}}).Handle)
	m.Use(fallback.NewFor(func(_ context.Context, q Quoted, err error) (*Reply, error) {
		return &Reply{Text: "cached " + q.Symbol()}, nil
	}, fallback.Config{}))
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	r, err := mediator.Send(context.Background(), m, &QuoteA{})
	if err != nil || r.Text != "cached A" {
		t.Fatal(r, err)
	}
	if _, err := mediator.Send(context.Background(), m, &Call{}); err != errBoom { // *Call is not Quoted
		t.Fatal(err)
	}
}

// deferredErr stands for a request accepted for later (the durable package's *DeferredError).
type deferredErr struct{ id int }

func (e *deferredErr) Error() string  { return "deferred" }
func (e *deferredErr) Deferred() bool { return true }

// Work accepted for later is not a failure: the fallback passes it on, so the caller learns
// the work was taken instead of getting a degraded answer.
func TestFallbackPassesDeferredWorkOn(t *testing.T) {
	called := false
	deferred := &deferredErr{id: 7}
	m := build(t, func(context.Context, *Call) (*Reply, error) { return nil, deferred },
		fallback.NewFor(func(context.Context, *Call, error) (*Reply, error) { called = true; return &Reply{}, nil }, fallback.Config{}))
	_, err := mediator.Send(context.Background(), m, &Call{})
	if err != deferred || called {
		t.Fatalf("err %v, fallback called %v", err, called)
	}
}

// A fallback does not answer for the handler of an unattended dispatch (a scheduler's): the
// scheduler must record the handler's own failure, not a degraded "success".
func TestFallbackStepsAsideWhenUnattended(t *testing.T) {
	m := build(t, func(context.Context, *Call) (*Reply, error) { return nil, &statusErr{Code: 503} },
		fallback.NewFor(func(context.Context, *Call, error) (*Reply, error) { return &Reply{Text: "degraded"}, nil }, fallback.Config{}))
	r, err := mediator.Send(context.Background(), m, &Call{})
	if err != nil || r.Text != "degraded" {
		t.Fatal(r, err)
	}
	req := &Call{}
	_, err = mediator.Send(mediator.WithMarks(context.Background(), req, mediator.Unattended), m, req)
	var se *statusErr
	if !errors.As(err, &se) || se.Code != 503 {
		t.Fatalf("unattended dispatch answered by the fallback: %v", err)
	}
}

// rpcStatus is an RPC client's error for a cancelled call: like a gRPC status with code
// Canceled, it does not wrap context.Canceled.
type rpcStatus struct{ msg string }

func (e *rpcStatus) Error() string { return "rpc error: code = Canceled desc = " + e.msg }
