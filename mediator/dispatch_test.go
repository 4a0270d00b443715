package mediator_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"reflect"
	"strings"
	"testing"

	"github.com/samber/do/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-go/switchboard/mediator"
)

type Outer struct {
	mediator.Returns[int]
	N int
}

type Inner struct {
	mediator.Returns[int]
	N int
}

// Marks bind to the request they were set for: the handler of that request sees them, the
// requests it sends with the same context do not (a scheduler's "one attempt only" must not
// reach the handler's own outbound calls).
func TestMarksBindToOneRequest(t *testing.T) {
	var outerMarks, innerMarks mediator.Mark
	var m *mediator.Mediator
	m = built(t, func(m *mediator.Mediator) {
		mediator.HandleFunc(m, func(ctx context.Context, q *Outer) (int, error) {
			outerMarks = mediator.MarksOf(ctx, q)
			return mediator.Send(ctx, m, &Inner{N: q.N})
		})
		mediator.HandleFunc(m, func(ctx context.Context, q *Inner) (int, error) {
			innerMarks = mediator.MarksOf(ctx, q)
			return q.N, nil
		})
	})
	req := &Outer{N: 3}
	ctx := mediator.WithMarks(context.Background(), req, mediator.Unattended)
	ctx = mediator.WithMarks(ctx, req, mediator.SingleAttempt)
	got, err := mediator.Send(ctx, m, req)
	require.NoError(t, err)
	assert.Equal(t, 3, got)
	assert.Equal(t, mediator.Unattended|mediator.SingleAttempt, outerMarks)
	assert.True(t, outerMarks.Has(mediator.Unattended))
	assert.False(t, outerMarks.Has(mediator.Stored))
	assert.Equal(t, mediator.Mark(0), innerMarks, "marks leaked into a nested send")
	assert.Equal(t, "unattended|single-attempt", outerMarks.String())
	assert.Equal(t, "none", innerMarks.String())

	// Another value of the same type is another request.
	assert.Equal(t, mediator.Mark(0), mediator.MarksOf(ctx, &Outer{N: 3}))
}

func TestKeyWithForIsInvisibleToOtherRequests(t *testing.T) {
	k := mediator.NewContextKey[string]("tenant")
	a, b := &Outer{N: 1}, &Outer{N: 2}
	ctx := k.WithFor(context.Background(), a, "acme")
	v, ok := k.GetFor(ctx, a)
	assert.True(t, ok)
	assert.Equal(t, "acme", v)
	_, ok = k.GetFor(ctx, b)
	assert.False(t, ok)
	_, ok = k.Get(ctx) // a bound value is not a context-wide one
	assert.False(t, ok)
	ctx = k.With(ctx, "context-wide")
	_, ok = k.GetFor(ctx, a)
	assert.False(t, ok, "With shadows the bound value under the same key")

	// Requests sent by value compare by identity without panicking on incomparable types.
	type byValue struct {
		mediator.Returns[int]
		Tags []string
	}
	var req any = byValue{Tags: []string{"x"}}
	ctx = k.WithFor(context.Background(), req, "v")
	v, ok = k.GetFor(ctx, req)
	assert.True(t, ok)
	assert.Equal(t, "v", v)
	_, ok = k.GetFor(ctx, any(byValue{Tags: []string{"x"}}))
	assert.False(t, ok)
}

// A caller whose context is already done gets its context's error before any behavior or the
// handler runs; with a closed breaker its handler used to run once.
func TestDoneContextRunsNothing(t *testing.T) {
	ran := []string{}
	m := built(t, func(m *mediator.Mediator) {
		mediator.HandleFunc(m, func(context.Context, *Twice) (int, error) {
			ran = append(ran, "handler")
			return 1, nil
		})
		m.Use(mediator.BehaviorFunc(func(ctx context.Context, req any, next mediator.Next) (any, error) {
			ran = append(ran, "behavior")
			return next(ctx, req)
		}))
		mediator.HandleStreamFunc(m, func(context.Context, *Numbers) iter.Seq2[int, error] {
			ran = append(ran, "stream")
			return func(func(int, error) bool) {}
		})
		mediator.SubscribeFunc(m, func(context.Context, *Note) error {
			ran = append(ran, "notification")
			return nil
		})
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := mediator.Send(ctx, m, &Twice{})
	assert.ErrorIs(t, err, context.Canceled)
	_, err = m.SendAny(ctx, &Twice{})
	assert.ErrorIs(t, err, context.Canceled)
	ts, err := mediator.SenderFor[*Twice, int](m)
	require.NoError(t, err)
	_, err = ts.Send(ctx, &Twice{})
	assert.ErrorIs(t, err, context.Canceled)
	for _, err := range mediator.Stream(ctx, m, &Numbers{}) {
		assert.ErrorIs(t, err, context.Canceled)
	}
	assert.ErrorIs(t, mediator.Publish(ctx, m, &Note{}), context.Canceled)
	assert.Empty(t, ran)

	cause := errors.New("shutting down")
	cctx, ccancel := context.WithCancelCause(context.Background())
	ccancel(cause)
	_, err = mediator.Send(cctx, m, &Twice{})
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, cause)
	assert.True(t, mediator.IsCallerCancellation(cctx, err))
	assert.Empty(t, ran)
}

type Numbers struct {
	mediator.Yields[int]
}

type Note struct{ Text string }

func TestTypedNilRequestIsRefused(t *testing.T) {
	ran := false
	m := built(t, func(m *mediator.Mediator) {
		mediator.HandleFunc(m, func(context.Context, *Twice) (int, error) {
			ran = true
			return 1, nil
		})
	})
	_, err := mediator.Send(context.Background(), m, (*Twice)(nil))
	assert.ErrorIs(t, err, mediator.ErrNilRequest)
	assert.Contains(t, err.Error(), "*mediator_test.Twice")
	_, err = m.SendAny(context.Background(), (*Twice)(nil))
	assert.ErrorIs(t, err, mediator.ErrNilRequest)
	ts, err := mediator.SenderFor[*Twice, int](m)
	require.NoError(t, err)
	_, err = ts.Send(context.Background(), nil)
	assert.ErrorIs(t, err, mediator.ErrNilRequest)
	assert.False(t, ran)
}

// A request sent by value whose only field is a nil pointer is not a nil request: its interface
// data word is nil too, but it is not a pointer.
func TestPointerShapedValueRequestIsNotNil(t *testing.T) {
	type Lookup struct {
		mediator.Returns[int]
		Hint *string
	}
	m := built(t, func(m *mediator.Mediator) {
		mediator.HandleFunc(m, func(context.Context, Lookup) (int, error) { return 5, nil })
	})
	got, err := mediator.Send(context.Background(), m, Lookup{})
	require.NoError(t, err)
	assert.Equal(t, 5, got)
}

type publishingHandler struct{ p mediator.Publisher }

func (h *publishingHandler) Handle(ctx context.Context, q *Twice) (int, error) {
	return 2, mediator.Publish(ctx, h.p, &Note{Text: "handled"})
}

// The mediator is in its own injector, so a handler that publishes (or sends) depends on it in
// its constructor; Build used to fail with "could not find service mediator.Publisher".
func TestMediatorIsInItsInjector(t *testing.T) {
	var notes []string
	m := built(t, func(m *mediator.Mediator) {
		mediator.Handle[*Twice, int](m, func(i do.Injector) (*publishingHandler, error) {
			p, err := do.Invoke[mediator.Publisher](i)
			return &publishingHandler{p: p}, err
		})
		mediator.SubscribeFunc(m, func(_ context.Context, n *Note) error {
			notes = append(notes, n.Text)
			return nil
		})
	})
	got, err := mediator.Send(context.Background(), m, &Twice{})
	require.NoError(t, err)
	assert.Equal(t, 2, got)
	assert.Equal(t, []string{"handled"}, notes)
	for _, v := range []any{
		do.MustInvoke[mediator.Sender](m.Injector()),
		do.MustInvoke[mediator.Streamer](m.Injector()),
		do.MustInvoke[*mediator.Mediator](m.Injector()),
	} {
		assert.Same(t, m, v)
	}

	// A second mediator on the same injector does not collide with the first.
	m2 := mediator.New(m.Injector(), mediator.Config{})
	assert.Same(t, m, do.MustInvoke[mediator.Sender](m2.Injector()))
}

// Build reports notification handler errors in a stable order (sorted by type), so its message
// is the same from run to run.
func TestBuildReportsNotificationErrorsInOrder(t *testing.T) {
	type A struct{ X int }
	type B struct{ X int }
	type C struct{ X int }
	var first string
	for run := range 20 {
		m := mediator.New(nil, mediator.Config{})
		for _, typ := range []string{"C", "A", "B"} {
			switch typ {
			case "A":
				mediator.Subscribe[A](m, func(do.Injector) (mediator.NotificationHandlerFunc[A], error) {
					return nil, errors.New("A broken")
				})
			case "B":
				mediator.Subscribe[B](m, func(do.Injector) (mediator.NotificationHandlerFunc[B], error) {
					return nil, errors.New("B broken")
				})
			case "C":
				mediator.Subscribe[C](m, func(do.Injector) (mediator.NotificationHandlerFunc[C], error) {
					return nil, errors.New("C broken")
				})
			}
		}
		err := m.Build()
		require.Error(t, err)
		msg := err.Error()
		assert.Less(t, strings.Index(msg, "A broken"), strings.Index(msg, "B broken"))
		assert.Less(t, strings.Index(msg, "B broken"), strings.Index(msg, "C broken"))
		if run == 0 {
			first = msg
		}
		assert.Equal(t, first, msg)
	}
}

// rpcCancelled is how an RPC client reports a call cancelled by its caller: like a gRPC status
// it does not wrap context.Canceled.
type rpcCancelled struct{}

func (rpcCancelled) Error() string { return "rpc error: code = Canceled" }

// OnException is not offered any error once the caller's context is done, like every other
// exception path; it used to be offered a client's own cancellation error.
func TestExceptionActionNotOfferedErrorsAfterCancellation(t *testing.T) {
	offered := 0
	ctx, cancel := context.WithCancel(context.Background())
	m := built(t, func(m *mediator.Mediator) {
		mediator.HandleFunc(m, func(ctx context.Context, _ *Twice) (int, error) {
			cancel()
			return 0, rpcCancelled{}
		})
		mediator.OnException(m, func(context.Context, *Twice, error) { offered++ })
	})
	_, err := mediator.Send(ctx, m, &Twice{})
	assert.Equal(t, rpcCancelled{}, err)
	assert.Zero(t, offered)
}

// An exception handler does not answer for the handler of an unattended dispatch: its caller
// records what the handler did.
func TestExceptionHandlerStepsAsideWhenUnattended(t *testing.T) {
	errDown := errors.New("down")
	actions := 0
	m := built(t, func(m *mediator.Mediator) {
		mediator.HandleFunc(m, func(context.Context, *Twice) (int, error) { return 0, errDown })
		mediator.HandleException(m, func(context.Context, *Twice, error) (int, bool) { return 7, true })
		mediator.OnException(m, func(context.Context, *Twice, error) { actions++ })
	})
	got, err := mediator.Send(context.Background(), m, &Twice{})
	require.NoError(t, err)
	assert.Equal(t, 7, got)

	req := &Twice{}
	_, err = mediator.Send(mediator.WithMarks(context.Background(), req, mediator.Unattended), m, req)
	assert.ErrorIs(t, err, errDown)
	assert.Equal(t, 2, actions, "exception actions still observe unattended failures")
}

type peerBehavior struct {
	name  string
	peers *[]string
}

func (p *peerBehavior) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	return next(ctx, req)
}

func (p *peerBehavior) Placement() mediator.Placement { return mediator.Placement{Name: p.name} }

func (p *peerBehavior) Bind(info mediator.RequestInfo) (mediator.Behavior, error) {
	for _, b := range info.Behaviors {
		*p.peers = append(*p.peers, fmt.Sprintf("%s sees %s", p.name, b.(*peerBehavior).name))
	}
	return p, nil
}

// At Bind a behavior sees the behaviors that apply to the request type, and after Build the
// mediator lists a pipeline's bound behaviors, so cooperating behaviors can find each other.
func TestBindSeesPeersAndPipelineListsThem(t *testing.T) {
	var peers []string
	outer := &peerBehavior{name: "outer", peers: &peers}
	inner := &peerBehavior{name: "inner", peers: &peers}
	other := &peerBehavior{name: "other", peers: &peers}
	m := built(t, func(m *mediator.Mediator) {
		mediator.HandleFunc(m, func(context.Context, *Twice) (int, error) { return 1, nil })
		mediator.HandleFunc(m, echoHandler)
		m.Use(inner, mediator.WithOrder(2))
		m.Use(outer, mediator.WithOrder(1))
		m.Use(other, mediator.ForRequest[*Echo]())
	})
	assert.Equal(t, []string{
		// *Echo: every behavior applies, "other" (order 0) outermost.
		"other sees other", "other sees outer", "other sees inner",
		"outer sees other", "outer sees outer", "outer sees inner",
		"inner sees other", "inner sees outer", "inner sees inner",
		// *Twice: "other" is limited to *Echo.
		"outer sees outer", "outer sees inner", "inner sees outer", "inner sees inner",
	}, peers)
	bs, err := m.Pipeline(reflect.TypeFor[*Twice]())
	require.NoError(t, err)
	assert.Equal(t, []mediator.Behavior{outer, inner}, bs)
	_, err = m.Pipeline(reflect.TypeFor[*Orphan]())
	assert.ErrorIs(t, err, mediator.ErrNoHandler)
	_, err = mediator.New(nil, mediator.Config{}).Pipeline(reflect.TypeFor[*Twice]())
	assert.ErrorIs(t, err, mediator.ErrNotBuilt)
}

// A request type without behaviors is dispatched straight to its handler, past the untyped
// pipeline; that path keeps every check of Send: a done context and a nil request run nothing,
// a panic becomes a *PanicError, and requests sent by value work.
func TestSendWithoutBehaviorsKeepsItsChecks(t *testing.T) {
	ran := 0
	type ByValue struct {
		mediator.Returns[string]
		Text string
	}
	m := built(t, func(m *mediator.Mediator) {
		mediator.HandleFunc(m, func(context.Context, *Twice) (int, error) {
			ran++
			return 2, nil
		})
		mediator.HandleFunc(m, func(_ context.Context, q *Boom) (*string, error) { panic(q.Value) })
		mediator.HandleFunc(m, func(_ context.Context, q ByValue) (string, error) { return q.Text, nil })
	})
	got, err := mediator.Send(context.Background(), m, &Twice{})
	require.NoError(t, err)
	assert.Equal(t, 2, got)

	cause := errors.New("shutting down")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	_, err = mediator.Send(ctx, m, &Twice{})
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, err, cause)
	_, err = mediator.Send(context.Background(), m, (*Twice)(nil))
	assert.ErrorIs(t, err, mediator.ErrNilRequest)
	assert.Equal(t, 1, ran)

	resp, err := mediator.Send(context.Background(), m, &Boom{Value: "kaboom"})
	assert.Nil(t, resp)
	var pe *mediator.PanicError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "kaboom", pe.Value)
	assert.Contains(t, string(pe.Stack), "TestSendWithoutBehaviorsKeepsItsChecks")

	text, err := mediator.Send(context.Background(), m, ByValue{Text: "by value"})
	require.NoError(t, err)
	assert.Equal(t, "by value", text)
}
