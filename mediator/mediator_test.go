package mediator_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/samber/do/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchboard-go/switchboard/mediator"
)

type Echo struct {
	mediator.Returns[*string]
	Text string
}

type Orphan struct {
	mediator.Returns[int]
}

type Twice struct {
	mediator.Returns[int]
}

func echoHandler(_ context.Context, q *Echo) (*string, error) { s := q.Text; return &s, nil }

func built(t *testing.T, setup func(m *mediator.Mediator)) *mediator.Mediator {
	t.Helper()
	m := mediator.New(nil, mediator.Config{})
	setup(m)
	require.NoError(t, m.Build())
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func TestNextCalledTwice(t *testing.T) {
	calls := 0
	m := built(t, func(m *mediator.Mediator) {
		mediator.HandleFunc(m, func(context.Context, *Twice) (int, error) {
			calls++
			if calls == 1 {
				return 0, errors.New("first call fails")
			}
			return calls, nil
		})
		m.Use(mediator.BehaviorFunc(func(ctx context.Context, req any, next mediator.Next) (any, error) {
			if _, err := next(ctx, req); err == nil {
				t.Error("first call should fail")
			}
			return next(ctx, req)
		}))
	})
	got, err := mediator.Send(context.Background(), m, &Twice{})
	require.NoError(t, err)
	assert.Equal(t, 2, got)
	assert.Equal(t, 2, calls)
}

func TestBuildReportsEveryProblem(t *testing.T) {
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *Twice) (int, error) { return 1, nil })
	mediator.HandleFunc(m, func(context.Context, *Twice) (int, error) { return 2, nil })
	mediator.Declare[*Orphan](m)
	mediator.Handle[*Echo, *string](m, func(do.Injector) (mediator.Handler[*Echo, *string], error) {
		return nil, errors.New("database unreachable")
	})
	m.Use(mediator.BehaviorFunc(func(ctx context.Context, req any, next mediator.Next) (any, error) { return next(ctx, req) }),
		mediator.WithStage(mediator.Stage(9)), mediator.WithName("misplaced"))

	err := m.Build()
	require.Error(t, err)
	assert.ErrorIs(t, err, mediator.ErrNoHandler)
	assert.ErrorIs(t, err, mediator.ErrDuplicateHandler)
	assert.ErrorIs(t, err, mediator.ErrInvalidBehavior)
	var noHandler *mediator.NoHandlerError
	require.ErrorAs(t, err, &noHandler)
	assert.Equal(t, reflect.TypeFor[*Orphan](), noHandler.Type)
	var dup *mediator.DuplicateHandlerError
	require.ErrorAs(t, err, &dup)
	assert.Equal(t, 2, dup.Count)
	var hErr *mediator.HandlerError
	require.ErrorAs(t, err, &hErr)
	assert.Contains(t, err.Error(), "database unreachable")
	assert.Contains(t, err.Error(), "*mediator_test.Orphan")
	assert.Contains(t, err.Error(), `"misplaced"`)
	assert.Len(t, strings.Split(err.Error(), "\n"), 4, "one line per problem:\n%v", err)

	// A failed Build leaves registration open.
	_, sendErr := mediator.Send(context.Background(), m, &Twice{})
	assert.ErrorIs(t, sendErr, mediator.ErrNotBuilt)
}

type greeter struct{ greeting string }

type Greet struct {
	mediator.Returns[string]
	Name string
}

type greetHandler struct{ g *greeter }

func (h *greetHandler) Handle(_ context.Context, q *Greet) (string, error) {
	return h.g.greeting + ", " + q.Name, nil
}

func TestHandlersResolvedOnceWithDependencies(t *testing.T) {
	i := do.New()
	do.ProvideValue(i, &greeter{greeting: "hello"})
	constructed := 0
	m := mediator.New(i, mediator.Config{})
	mediator.Handle[*Greet, string](m, func(i do.Injector) (*greetHandler, error) {
		constructed++
		return &greetHandler{g: do.MustInvoke[*greeter](i)}, nil
	})
	require.NoError(t, m.Build())
	for range 3 {
		got, err := mediator.Send(context.Background(), m, &Greet{Name: "Ada"})
		require.NoError(t, err)
		assert.Equal(t, "hello, Ada", got)
	}
	assert.Equal(t, 1, constructed)
	assert.ErrorIs(t, m.Build(), mediator.ErrRegistrationClosed)
}

// Registering after Build is a programming error: it panics with a message naming the call,
// for every registration function, and leaves the built pipelines as they were.
func TestRegistrationAfterBuildPanics(t *testing.T) {
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, echoHandler)
	require.NoError(t, m.Build())
	for name, register := range map[string]func(){
		"HandleFunc[*mediator_test.Echo]": func() { mediator.HandleFunc(m, echoHandler) },
		"Handle[*mediator_test.Greet]": func() {
			mediator.Handle[*Greet, string](m, func(do.Injector) (*greetHandler, error) { return nil, nil })
		},
		"SubscribeFunc[*mediator_test.Ping]": func() {
			mediator.SubscribeFunc(m, func(context.Context, *Ping) error { return nil })
		},
		"Declare[*mediator_test.Greet]": func() { mediator.Declare[*Greet](m) },
		"Use(": func() {
			m.Use(mediator.BehaviorFunc(func(ctx context.Context, req any, next mediator.Next) (any, error) { return next(ctx, req) }))
		},
		"Use(exception-handler[error])": func() {
			mediator.HandleException(m, func(context.Context, *Echo, error) (*string, bool) { return nil, false })
		},
	} {
		func() {
			defer func() {
				r := recover()
				require.NotNil(t, r, name)
				msg := fmt.Sprint(r)
				assert.Contains(t, msg, name)
				assert.Contains(t, msg, "after Build")
			}()
			register()
		}()
	}
	got, err := mediator.Send(context.Background(), m, &Echo{Text: "still"})
	require.NoError(t, err)
	assert.Equal(t, "still", *got)
}

// Two mediators may share one injector (one per module of an application, or several in a
// test), each with its own handler for the same request type.
func TestMediatorsShareAnInjector(t *testing.T) {
	i := do.New()
	do.ProvideValue(i, &greeter{greeting: "hello"})
	ctor := func(greeting string) do.Provider[*greetHandler] {
		return func(i do.Injector) (*greetHandler, error) {
			return &greetHandler{g: &greeter{greeting: do.MustInvoke[*greeter](i).greeting + " from " + greeting}}, nil
		}
	}
	a, b := mediator.New(i, mediator.Config{}), mediator.New(i, mediator.Config{})
	mediator.Handle[*Greet, string](a, ctor("a"))
	mediator.Subscribe[*Greet](a, func(do.Injector) (mediator.NotificationHandlerFunc[*Greet], error) {
		return func(context.Context, *Greet) error { return nil }, nil
	})
	mediator.Handle[*Greet, string](b, ctor("b"))
	mediator.Subscribe[*Greet](b, func(do.Injector) (mediator.NotificationHandlerFunc[*Greet], error) {
		return func(context.Context, *Greet) error { return nil }, nil
	})
	require.NoError(t, a.Build())
	require.NoError(t, b.Build())
	got, err := mediator.Send(context.Background(), a, &Greet{Name: "Ada"})
	require.NoError(t, err)
	assert.Equal(t, "hello from a, Ada", got)
	got, err = mediator.Send(context.Background(), b, &Greet{Name: "Ada"})
	require.NoError(t, err)
	assert.Equal(t, "hello from b, Ada", got)
}

func TestSendErrors(t *testing.T) {
	m := mediator.New(nil, mediator.Config{})
	_, err := mediator.Send(context.Background(), m, &Echo{})
	assert.ErrorIs(t, err, mediator.ErrNotBuilt)
	mediator.HandleFunc(m, echoHandler)
	require.NoError(t, m.Build())

	_, err = mediator.Send(context.Background(), m, &Twice{})
	var nh *mediator.NoHandlerError
	require.ErrorAs(t, err, &nh)
	assert.Equal(t, reflect.TypeFor[*Twice](), nh.Type)
	assert.EqualError(t, err, "mediator: no handler for request *mediator_test.Twice")

	_, err = m.SendAny(context.Background(), nil)
	assert.ErrorIs(t, err, mediator.ErrNilRequest)

	// A value where a pointer was registered is a different type.
	_, err = m.SendAny(context.Background(), Echo{})
	assert.ErrorIs(t, err, mediator.ErrNoHandler)
}

func TestCallerCancellationPassesThroughUnchanged(t *testing.T) {
	m := built(t, func(m *mediator.Mediator) {
		mediator.HandleFunc(m, func(ctx context.Context, _ *Twice) (int, error) {
			<-ctx.Done()
			return 0, ctx.Err()
		})
		m.Use(mediator.BehaviorFunc(func(ctx context.Context, req any, next mediator.Next) (any, error) {
			return next(ctx, req)
		}))
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := mediator.Send(ctx, m, &Twice{})
	assert.Same(t, context.Canceled, err)
}

// A context cancelled with a cause (context.WithCancelCause) is the caller's cancellation
// also when the handler reports the cause rather than context.Canceled: exception handlers are
// not offered it.
func TestCallerCancellationWithCause(t *testing.T) {
	errShutdown := errors.New("shutting down")
	offered := false
	ctx, cancel := context.WithCancelCause(context.Background())
	m := built(t, func(m *mediator.Mediator) {
		mediator.HandleFunc(m, func(ctx context.Context, _ *Twice) (int, error) {
			cancel(errShutdown)
			<-ctx.Done()
			return 0, fmt.Errorf("handler: %w", context.Cause(ctx))
		})
		mediator.HandleException(m, func(context.Context, *Twice, error) (int, bool) {
			offered = true
			return 7, true
		})
	})
	_, err := mediator.Send(ctx, m, &Twice{})
	assert.ErrorIs(t, err, errShutdown)
	assert.False(t, offered)
	assert.True(t, mediator.IsCallerCancellation(ctx, err))
	assert.False(t, mediator.IsCallerCancellation(context.Background(), errShutdown))
	assert.False(t, mediator.IsCallerCancellation(ctx, errors.New("unrelated")))
}

// rpcCanceled is an RPC client's error for a cancelled call; like a gRPC status it does not
// wrap context.Canceled.
type rpcCanceled struct{}

func (rpcCanceled) Error() string { return "rpc error: code = Canceled" }

// A catch-all exception handler does not turn the caller's cancellation into a response when
// the client reports it in its own error type.
func TestExceptionHandlerNotOfferedCancellationInClientError(t *testing.T) {
	offered := false
	ctx, cancel := context.WithCancel(context.Background())
	m := built(t, func(m *mediator.Mediator) {
		mediator.HandleFunc(m, func(ctx context.Context, _ *Twice) (int, error) {
			cancel()
			<-ctx.Done()
			return 0, rpcCanceled{}
		})
		mediator.HandleException(m, func(context.Context, *Twice, error) (int, bool) {
			offered = true
			return 7, true
		})
	})
	_, err := mediator.Send(ctx, m, &Twice{})
	assert.Equal(t, rpcCanceled{}, err)
	assert.False(t, offered)
}

type Boom struct {
	mediator.Returns[*string]
	Value any
}

func TestHandlerPanicBecomesTypedError(t *testing.T) {
	var seen error
	m := built(t, func(m *mediator.Mediator) {
		mediator.HandleFunc(m, func(_ context.Context, q *Boom) (*string, error) {
			panic(q.Value)
		})
		m.Use(mediator.BehaviorFunc(func(ctx context.Context, req any, next mediator.Next) (any, error) {
			resp, err := next(ctx, req)
			seen = err
			return resp, err
		}))
	})
	resp, err := mediator.Send(context.Background(), m, &Boom{Value: "kaboom"})
	assert.Nil(t, resp)
	var pe *mediator.PanicError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "kaboom", pe.Value)
	assert.Contains(t, string(pe.Stack), "mediator_test.TestHandlerPanicBecomesTypedError")
	assert.ErrorIs(t, err, mediator.ErrPanic)
	assert.Same(t, err, seen, "behaviors see the panic as an error")

	cause := errors.New("wrapped cause")
	_, err = mediator.Send(context.Background(), m, &Boom{Value: cause})
	assert.ErrorIs(t, err, cause)

	s, err := mediator.SenderFor[*Boom, *string](m)
	require.NoError(t, err)
	_, err = s.Send(context.Background(), &Boom{Value: 1})
	assert.ErrorIs(t, err, mediator.ErrPanic)
}

func TestTypedSenderWithoutBehaviors(t *testing.T) {
	m := built(t, func(m *mediator.Mediator) {
		mediator.HandleFunc(m, echoHandler)
		mediator.HandleFunc(m, func(_ context.Context, q *Boom) (*string, error) { panic(q.Value) })
	})
	s, err := mediator.SenderFor[*Echo, *string](m)
	require.NoError(t, err)
	got, err := s.Send(context.Background(), &Echo{Text: "hi"})
	require.NoError(t, err)
	assert.Equal(t, "hi", *got)
	b, err := mediator.SenderFor[*Boom, *string](m)
	require.NoError(t, err)
	_, err = b.Send(context.Background(), &Boom{Value: "x"})
	assert.ErrorIs(t, err, mediator.ErrPanic)
	_, err = mediator.SenderFor[*Twice, int](m)
	assert.ErrorIs(t, err, mediator.ErrNoHandler)
	_, err = mediator.SenderFor[*Twice, int](mediator.New(nil, mediator.Config{}))
	assert.ErrorIs(t, err, mediator.ErrNotBuilt)
}

var tenantKey = mediator.NewContextKey[string]("tenant")

func TestRequestContextCarriesTypedValues(t *testing.T) {
	m := built(t, func(m *mediator.Mediator) {
		mediator.HandleFunc(m, func(ctx context.Context, q *Greet) (string, error) {
			tenant, ok := tenantKey.Get(ctx)
			if !ok {
				return "", errors.New("no tenant")
			}
			return tenant + "/" + q.Name, nil
		})
		m.Use(mediator.BehaviorFunc(func(ctx context.Context, req any, next mediator.Next) (any, error) {
			return next(tenantKey.With(ctx, "acme"), req)
		}), mediator.WithStage(mediator.StagePre))
	})
	got, err := mediator.Send(context.Background(), m, &Greet{Name: "ada"})
	require.NoError(t, err)
	assert.Equal(t, "acme/ada", got)
	assert.Equal(t, "none", tenantKey.GetOr(context.Background(), "none"))
	assert.Equal(t, "tenant", tenantKey.String())
}

type validatingBehavior struct{ err error }

func (v validatingBehavior) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	return next(ctx, req)
}
func (v validatingBehavior) Validate() error { return v.err }

type bindingBehavior struct{ want reflect.Type }

func (b bindingBehavior) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	return next(ctx, req)
}

func (b bindingBehavior) Bind(info mediator.RequestInfo) (mediator.Behavior, error) {
	if info.Response != b.want {
		return nil, fmt.Errorf("result type %s does not match response type %s", b.want, info.Response)
	}
	return b, nil
}

func TestBehaviorConfigurationErrors(t *testing.T) {
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, echoHandler)
	mediator.HandleFunc(m, func(context.Context, *Twice) (int, error) { return 0, nil })
	m.Use(validatingBehavior{err: errors.New("max attempts must be >= 1")})
	m.Use(bindingBehavior{want: reflect.TypeFor[int]()}, mediator.WithName("fallback"))
	m.Use(nil)
	m.Use(mediator.BehaviorFunc(nil))
	m.Use(validatingBehavior{}, mediator.ForInterface[*Echo](), mediator.WithName("typo"))
	err := m.Build()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "max attempts must be >= 1")
	assert.Contains(t, err.Error(), `behavior "fallback" for request *mediator_test.Echo: result type int does not match response type *string`)
	assert.NotContains(t, err.Error(), "Twice", "the binding fits *Twice")
	assert.Equal(t, 2, strings.Count(err.Error(), "behavior is nil"))
	assert.Contains(t, err.Error(), `behavior "typo": ForInterface[*mediator_test.Echo]: not an interface type`)
}

func TestPredicateAndExplain(t *testing.T) {
	var hits []string
	m := built(t, func(m *mediator.Mediator) {
		mediator.HandleFunc(m, func(context.Context, *Greet) (string, error) { return "", nil })
		mediator.HandleFunc(m, echoHandler)
		m.Use(mediator.BehaviorFunc(func(ctx context.Context, req any, next mediator.Next) (any, error) {
			hits = append(hits, req.(*Greet).Name)
			return next(ctx, req)
		}), mediator.WithName("vip-only"), mediator.ForRequest[*Greet](), mediator.When(func(req any) bool {
			return req.(*Greet).Name == "vip"
		}), mediator.WithOrder(5))
	})
	for _, n := range []string{"a", "vip", "b"} {
		_, err := mediator.Send(context.Background(), m, &Greet{Name: n})
		require.NoError(t, err)
	}
	assert.Equal(t, []string{"vip"}, hits)
	chain, err := mediator.Explain[*Greet](m)
	require.NoError(t, err)
	assert.Equal(t, "vip-only (default, 5) [conditional]\n  handler\n", chain.String())
	chain, err = mediator.Explain[*Echo](m)
	require.NoError(t, err)
	assert.Equal(t, mediator.Chain{{Name: "handler"}}, chain)
	_, err = mediator.Explain[*Twice](m)
	assert.ErrorIs(t, err, mediator.ErrNoHandler)
	infos := m.Requests()
	require.Len(t, infos, 2)
	assert.Equal(t, reflect.TypeFor[*mediator_test_Echo](), infos[0].Request)
}

type mediator_test_Echo = Echo

type NotFound struct{ ID int }

func (e *NotFound) Error() string { return fmt.Sprintf("%d not found", e.ID) }

func TestExceptionHandlersAndActions(t *testing.T) {
	var actions []string
	m := built(t, func(m *mediator.Mediator) {
		mediator.HandleFunc(m, func(ctx context.Context, q *Greet) (string, error) {
			switch q.Name {
			case "missing":
				return "", fmt.Errorf("lookup: %w", &NotFound{ID: 3})
			case "cancel":
				return "", ctx.Err()
			}
			return "", errors.New("other")
		})
		mediator.HandleException(m, func(_ context.Context, q *Greet, nf *NotFound) (string, bool) {
			return fmt.Sprintf("guest (%d missing)", nf.ID), true
		})
		mediator.OnException(m, func(_ context.Context, q *Greet, err error) {
			actions = append(actions, q.Name+": "+err.Error())
		})
	})
	got, err := mediator.Send(context.Background(), m, &Greet{Name: "missing"})
	require.NoError(t, err)
	assert.Equal(t, "guest (3 missing)", got)
	_, err = mediator.Send(context.Background(), m, &Greet{Name: "x"})
	assert.EqualError(t, err, "other")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = mediator.Send(ctx, m, &Greet{Name: "cancel"})
	assert.Same(t, context.Canceled, err)
	assert.Equal(t, []string{"missing: lookup: 3 not found", "x: other"}, actions)
	chain, _ := mediator.Explain[*Greet](m)
	assert.Equal(t, "exception-handler[*mediator_test.NotFound] (default, 10)\n  exception-action[error] (default, 20)\n    handler\n", chain.String())
}

func TestDeclareRejectsNonRequests(t *testing.T) {
	m := mediator.New(nil, mediator.Config{})
	mediator.Declare[*NotFound](m)
	err := m.Build()
	assert.ErrorContains(t, err, "*mediator_test.NotFound is neither a request")
}

func TestSendAllocatesNothing(t *testing.T) {
	for _, n := range []int{0, 3} {
		m := newBenchMediator(t, n)
		ctx := context.Background()
		req := &benchReq{}
		allocs := testing.AllocsPerRun(1000, func() { sinkResp, _ = mediator.Send(ctx, m, req) })
		assert.Zero(t, allocs, "Send with %d behaviors", n)
		s, err := mediator.SenderFor[*benchReq, *benchResp](m)
		require.NoError(t, err)
		allocs = testing.AllocsPerRun(1000, func() { sinkResp, _ = s.Send(ctx, req) })
		assert.Zero(t, allocs, "typed Send with %d behaviors", n)
		ev := &benchEvent{}
		allocs = testing.AllocsPerRun(1000, func() { _ = mediator.Publish(ctx, m, ev) })
		assert.Zero(t, allocs, "Publish")
	}
}

// A behavior that answers with a value of another type than the response type fails the call
// instead of handing the caller a zero value with a nil error.
func TestWrongResponseTypeIsAnError(t *testing.T) {
	wrong := mediator.BehaviorFunc(func(ctx context.Context, req any, next mediator.Next) (any, error) {
		return "cached", nil // a string where *string is due
	})
	m := built(t, func(m *mediator.Mediator) {
		mediator.HandleFunc(m, echoHandler)
		m.Use(wrong)
	})
	got, err := mediator.Send(context.Background(), m, &Echo{Text: "hi"})
	assert.Nil(t, got)
	assert.ErrorIs(t, err, mediator.ErrInvalidBehavior)
	assert.ErrorContains(t, err, "response of type string is not a *string")

	s, err := mediator.SenderFor[*Echo](m)
	require.NoError(t, err)
	_, err = s.Send(context.Background(), &Echo{})
	assert.ErrorIs(t, err, mediator.ErrInvalidBehavior)

	// A nil response with a nil error stays the zero value, as before.
	nilResp := built(t, func(m *mediator.Mediator) {
		mediator.HandleFunc(m, echoHandler)
		m.Use(mediator.BehaviorFunc(func(context.Context, any, mediator.Next) (any, error) { return nil, nil }))
	})
	got, err = mediator.Send(context.Background(), nilResp, &Echo{})
	assert.Nil(t, got)
	assert.NoError(t, err)
}
