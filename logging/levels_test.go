package logging_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/bulkhead"
	"github.com/switchboard-go/switchboard/behaviors/recovery"
	"github.com/switchboard-go/switchboard/logging"
	"github.com/switchboard-go/switchboard/mediator"
)

// Lookup is the inner request of the nesting tests: a *Call's handler sends it.
type Lookup struct {
	mediator.Returns[*Reply]
	Fail bool
}

// nested builds a mediator whose *Call handler runs outer with a function that sends a
// *Lookup (which fails when asked to), logged by one logging behavior configured by cfg.
func nested(t *testing.T, cfg logging.Config, outer func(ctx context.Context, lookup func(ctx context.Context, fail bool) error) error) *mediator.Mediator {
	t.Helper()
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(_ context.Context, l *Lookup) (*Reply, error) {
		if l.Fail {
			return nil, errors.New("lookup down")
		}
		return &Reply{}, nil
	})
	mediator.HandleFunc(m, func(ctx context.Context, _ *Call) (*Reply, error) {
		err := outer(ctx, func(ctx context.Context, fail bool) error {
			_, err := mediator.Send(ctx, m, &Lookup{Fail: fail})
			return err
		})
		return &Reply{}, err
	})
	m.Use(logging.New(cfg))
	require.NoError(t, m.Build())
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// levels returns "request outcome level [outer_outcome]" of every entry, in order.
func levels(logs *observer.ObservedLogs) []string {
	var got []string
	for _, e := range logs.AllUntimed() {
		f := e.ContextMap()
		s := f["request"].(string) + " " + f["outcome"].(string) + " " + e.Level.String()
		if o, ok := f["outer_outcome"]; ok {
			s += " " + o.(string)
		}
		got = append(got, s)
	}
	return got
}

// The inner requests' failures of an outer request that succeeded (its handler dealt with
// them, or a fallback answered) or was deferred are written at Config.Inner (debug), after the
// fact, naming the outer outcome; when the outer request failed or was cancelled they keep
// their level, since they explain it. Every inner failure used to be written at error.
func TestInnerLevelFollowsTheOuterOutcome(t *testing.T) {
	type lookupFunc = func(context.Context, bool) error
	for _, tc := range []struct {
		name  string
		outer func(ctx context.Context, lookup lookupFunc, cancel func()) error
		want  []string
	}{
		{"outer succeeds", func(ctx context.Context, lookup lookupFunc, _ func()) error {
			_ = lookup(ctx, true) // the handler copes with the failure (a cached answer)
			return nil
		}, []string{"logging_test.Lookup failed debug succeeded", "logging_test.Call succeeded debug"}},
		{"outer deferred", func(ctx context.Context, lookup lookupFunc, _ func()) error {
			_ = lookup(ctx, true)
			return deferredErr{}
		}, []string{"logging_test.Lookup failed debug deferred", "logging_test.Call deferred info"}},
		{"outer fails", func(ctx context.Context, lookup lookupFunc, _ func()) error {
			return lookup(ctx, true)
		}, []string{"logging_test.Lookup failed error failed", "logging_test.Call failed error"}},
		{"outer cancelled", func(ctx context.Context, lookup lookupFunc, cancel func()) error {
			_ = lookup(ctx, true)
			cancel() // the caller gives up while the handler works
			return ctx.Err()
		}, []string{"logging_test.Lookup failed error cancelled", "logging_test.Call cancelled debug"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.DebugLevel)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			m := nested(t, logging.Config{Logger: zap.New(core)}, func(c context.Context, lookup lookupFunc) error {
				return tc.outer(c, lookup, cancel)
			})
			_, _ = mediator.Send(ctx, m, &Call{})
			assert.Equal(t, tc.want, levels(logs))
		})
	}
}

// An inner entry at or below Config.Inner has nothing to wait for: it is written when the
// inner request ends, before the outer one does. A held entry keeps the time it ended.
func TestInnerEntriesAtInnerLevelAreWrittenAtOnce(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	var during int
	m := nested(t, logging.Config{Logger: zap.New(core)}, func(ctx context.Context, lookup func(context.Context, bool) error) error {
		require.NoError(t, lookup(ctx, false))
		during = logs.Len()
		_ = lookup(ctx, true)
		return errors.New("outer failed")
	})
	_, err := mediator.Send(context.Background(), m, &Call{})
	require.Error(t, err)
	assert.Equal(t, 1, during, "the inner success was written while the outer request ran")
	got := logs.All()
	require.Len(t, got, 3)
	assert.False(t, got[1].Time.After(got[2].Time), "a held entry keeps the time its request ended")
}

// At most Config.MaxInner inner entries are held for one outer request; the outer entry
// counts the rest.
func TestInnerEntriesAreBounded(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	m := nested(t, logging.Config{Logger: zap.New(core), MaxInner: 2}, func(ctx context.Context, lookup func(context.Context, bool) error) error {
		for range 5 {
			_ = lookup(ctx, true)
		}
		return errors.New("outer failed")
	})
	_, _ = mediator.Send(context.Background(), m, &Call{})
	got := logs.AllUntimed()
	require.Len(t, got, 3)
	assert.Equal(t, int64(3), got[2].ContextMap()["inner_dropped"])
}

// A request sent with the context of an outer request that has ended (by a goroutine its
// handler left behind) is logged at its own level at once: there is no outcome to wait for.
func TestInnerAfterTheOuterEnded(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	var wg sync.WaitGroup
	release := make(chan struct{})
	m := nested(t, logging.Config{Logger: zap.New(core)}, func(ctx context.Context, lookup func(context.Context, bool) error) error {
		wg.Go(func() {
			<-release
			_ = lookup(context.WithoutCancel(ctx), true)
		})
		return nil
	})
	_, err := mediator.Send(context.Background(), m, &Call{})
	require.NoError(t, err)
	close(release)
	wg.Wait()
	assert.Equal(t, []string{"logging_test.Call succeeded debug", "logging_test.Lookup failed error"}, levels(logs))
}

// fakeClock is a behaviors.Clock that moves when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(time.Duration) (<-chan time.Time, func() bool) {
	return make(chan time.Time), func() bool { return true }
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// A refusal by the request's own open breaker is written at Config.Refusal (warn), at most
// once per key every Config.RefusalEvery; the next entry of the key counts the refusals held
// back. Keys are limited apart. Refusals used to be written at the failure level, each one.
func TestRefusalsAreRateLimitedPerKey(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	reg := breaker.NewRegistry(breaker.Config{Key: func(req any) string { return req.(*Call).Endpoint },
		FailureThreshold: 1, OpenDuration: time.Hour})
	m := build(t, func(context.Context, *Call) (*Reply, error) { return nil, errors.New("down") },
		use(breaker.New(reg)), use(logging.New(logging.Config{Logger: zap.New(core), Clock: clock, RefusalEvery: time.Minute})))
	for _, key := range []string{"a", "b"} { // trip the breakers of a and b
		_, err := mediator.Send(context.Background(), m, &Call{Endpoint: key})
		require.ErrorIs(t, err, breaker.ErrTripped)
	}
	send := func(key string, n int) {
		for range n {
			_, err := mediator.Send(context.Background(), m, &Call{Endpoint: key})
			require.ErrorIs(t, err, breaker.ErrOpen)
		}
	}
	send("a", 5)
	send("b", 2)
	clock.advance(59 * time.Second)
	send("a", 1)
	clock.advance(time.Second)
	send("a", 3)

	type line struct {
		level      zapcore.Level
		key        any
		suppressed any
	}
	var got []line
	for _, e := range logs.AllUntimed()[2:] {
		assert.Equal(t, "switchboard: request refused", e.Message)
		got = append(got, line{e.Level, e.ContextMap()["breaker"], e.ContextMap()["suppressed"]})
	}
	assert.Equal(t, []line{
		{zapcore.WarnLevel, "a", nil},
		{zapcore.WarnLevel, "b", nil},
		{zapcore.WarnLevel, "a", int64(5)}, // 4 in the first minute, 1 at its end
	}, got)
}

// quotaError is the refusal of a user's own behavior, keyed by tenant.
type quotaError struct {
	tenant string
	req    any
}

func (e *quotaError) Error() string { return "quota spent" }
func (e *quotaError) Refusal() behaviors.RefusalInfo {
	return behaviors.RefusalInfo{By: "quota", Key: e.tenant, Request: e.req}
}

// A refusal of a user's own behavior is logged as a breaker's is: outcome refused, at
// Config.Refusal, rate-limited by the refusal's own key.
func TestUserRefusalIsLoggedAsARefusal(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	quota := mediator.BehaviorFunc(func(ctx context.Context, req any, next mediator.Next) (any, error) {
		return nil, &quotaError{tenant: req.(*Call).Endpoint, req: req}
	})
	m := build(t, func(context.Context, *Call) (*Reply, error) { return &Reply{}, nil },
		use(quota, mediator.WithOrder(behaviors.BulkheadOrder)),
		use(logging.New(logging.Config{Logger: zap.New(core), Clock: clock, RefusalEvery: time.Minute})))
	for _, tenant := range []string{"t1", "t1", "t2", "t1"} {
		_, _ = mediator.Send(context.Background(), m, &Call{Endpoint: tenant})
	}
	var got []string
	for _, e := range logs.AllUntimed() {
		got = append(got, e.Level.String()+" "+e.Message+" "+e.ContextMap()["outcome"].(string))
	}
	assert.Equal(t, []string{ // t1 once, t2 once: the others of t1 held back
		"warn switchboard: request refused refused",
		"warn switchboard: request refused refused",
	}, got)
}

// The rate limit remembers at most Config.RefusalKeys keys; the keys beyond share one window,
// so a flood of distinct keys writes a bounded number of lines and holds bounded memory.
func TestRefusalKeysAreBounded(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	bh := bulkhead.New(bulkhead.Config{Limit: 1, Key: func(req any) string { return req.(*Call).Endpoint }})
	hold, entered := make(chan struct{}), make(chan struct{}, 1)
	m := build(t, func(ctx context.Context, c *Call) (*Reply, error) {
		if c.Endpoint == "" {
			return &Reply{}, nil
		}
		entered <- struct{}{}
		<-hold
		return &Reply{}, nil
	}, use(bh), use(logging.New(logging.Config{Logger: zap.New(core), Clock: clock, RefusalKeys: 2})))
	// Fill the bulkhead of each key with one call that waits, then send 1 more per key.
	keys := []string{"k1", "k2", "k3", "k4", "k5"}
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Go(func() { _, _ = mediator.Send(context.Background(), m, &Call{Endpoint: k}) })
		<-entered
	}
	for _, k := range keys {
		_, err := mediator.Send(context.Background(), m, &Call{Endpoint: k})
		require.ErrorIs(t, err, bulkhead.ErrFull)
	}
	// k1 and k2 refuse once more, held back: their windows outlive the interval.
	for _, k := range keys[:2] {
		_, err := mediator.Send(context.Background(), m, &Call{Endpoint: k})
		require.ErrorIs(t, err, bulkhead.ErrFull)
	}
	close(hold)
	wg.Wait()
	var refused []string
	for _, e := range logs.AllUntimed() {
		if e.ContextMap()["outcome"] == "refused" {
			refused = append(refused, e.ContextMap()["error"].(string))
		}
	}
	// k1 and k2 have windows of their own; k3, k4 and k5 share the overflow window
	require.Len(t, refused, 3, "%v", refused)
	assert.Contains(t, refused[0], `"k1"`)
	assert.Contains(t, refused[1], `"k2"`)
	assert.Contains(t, refused[2], `"k3"`)

	// After the interval, the shared window's next entry counts the refusals of k4 and k5
	// as shared: they were not k3's, nor are they this entry's key's alone.
	clock.advance(time.Minute)
	hold, wg = make(chan struct{}), sync.WaitGroup{}
	wg.Go(func() { _, _ = mediator.Send(context.Background(), m, &Call{Endpoint: "k5"}) })
	<-entered
	_, err := mediator.Send(context.Background(), m, &Call{Endpoint: "k5"})
	require.ErrorIs(t, err, bulkhead.ErrFull)
	close(hold)
	wg.Wait()
	var last map[string]any
	for _, e := range logs.AllUntimed() {
		if e.ContextMap()["outcome"] == "refused" {
			last = e.ContextMap()
		}
	}
	assert.Contains(t, last["error"], `"k5"`)
	assert.Equal(t, int64(2), last["suppressed_shared"], "%v", last)
	assert.NotContains(t, last, "suppressed")
}

// With zap's production options (a stack from error up) a failure's entry carries no stack:
// only a panic's does, the stack of the panic. Config.KeepStacktraces restores zap's.
func TestStackTracesOnlyForPanics(t *testing.T) {
	for _, keep := range []bool{false, true} {
		core, logs := observer.New(zapcore.DebugLevel)
		logger := zap.New(core, zap.AddStacktrace(zapcore.ErrorLevel))
		m := build(t, func(_ context.Context, c *Call) (*Reply, error) {
			if c.Endpoint == "panic" {
				panic("nil map")
			}
			return nil, errors.New("down")
		}, use(logging.New(logging.Config{Logger: logger, KeepStacktraces: keep})))
		_, err := mediator.Send(context.Background(), m, &Call{})
		require.Error(t, err)
		_, err = mediator.Send(context.Background(), m, &Call{Endpoint: "panic"})
		var p *mediator.PanicError
		require.ErrorAs(t, err, &p)
		got := logs.AllUntimed()
		require.Len(t, got, 2)
		assert.Equal(t, keep, got[0].Stack != "", "a failure's stack with KeepStacktraces %v", keep)
		assert.Equal(t, string(p.Stack), got[1].Stack, "the panic's entry carries the panic's stack")
		assert.Contains(t, got[1].Stack, "TestStackTracesOnlyForPanics")
	}
}

// An entry of a call with an active span names its trace and span ids.
func TestTraceAndSpanIDs(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	m := build(t, func(context.Context, *Call) (*Reply, error) { return &Reply{}, nil },
		use(logging.New(logging.Config{Logger: zap.New(core)})))
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:  trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}, TraceFlags: trace.FlagsSampled,
	})
	_, err := mediator.Send(trace.ContextWithSpanContext(context.Background(), sc), m, &Call{})
	require.NoError(t, err)
	_, err = mediator.Send(context.Background(), m, &Call{})
	require.NoError(t, err)
	got := logs.AllUntimed()
	require.Len(t, got, 2)
	assert.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", got[0].ContextMap()["trace_id"])
	assert.Equal(t, "00f067aa0ba902b7", got[0].ContextMap()["span_id"])
	assert.NotContains(t, got[1].ContextMap(), "trace_id", "no span, no trace id")
}

// Every fields hook adds its fields to each entry written; none runs for an entry whose level
// is disabled.
func TestFieldsHooks(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	var calls int
	hooks := []func(context.Context, any) []zap.Field{
		func(context.Context, any) []zap.Field { calls++; return []zap.Field{zap.String("tenant", "acme")} },
		func(_ context.Context, req any) []zap.Field {
			return []zap.Field{zap.String("endpoint", req.(*Call).Endpoint)}
		},
	}
	m := build(t, func(_ context.Context, c *Call) (*Reply, error) {
		if c.Endpoint == "bad" {
			return nil, errors.New("down")
		}
		return &Reply{}, nil
	}, use(logging.New(logging.Config{Logger: zap.New(core), Fields: hooks})))
	_, _ = mediator.Send(context.Background(), m, &Call{Endpoint: "good"}) // success at debug: not written
	_, _ = mediator.Send(context.Background(), m, &Call{Endpoint: "bad"})
	require.Equal(t, 1, logs.Len())
	f := logs.AllUntimed()[0].ContextMap()
	assert.Equal(t, "acme", f["tenant"])
	assert.Equal(t, "bad", f["endpoint"])
	assert.Equal(t, 1, calls)
}

// Build reports every invalid field of the logging behavior's Config, by name.
func TestConfigValidate(t *testing.T) {
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *Call) (*Reply, error) { return &Reply{}, nil })
	m.Use(logging.New(logging.Config{RefusalEvery: -time.Second, RefusalKeys: -1, MaxInner: -2}))
	err := m.Build()
	require.Error(t, err)
	for _, field := range []string{"RefusalEvery", "RefusalKeys", "MaxInner"} {
		assert.True(t, strings.Contains(err.Error(), "Config."+field), "%s in %v", field, err)
	}
	assert.NoError(t, logging.Config{}.Validate())
}

// panicky is a behavior that panics after the rest of the pipeline ran.
type panicky struct{}

func (panicky) Handle(ctx context.Context, req any, next mediator.Next) (any, error) {
	_, _ = next(ctx, req)
	panic("behavior bug")
}

// When a panic passes through the behavior (a behavior inside it panicked; recovery, outside,
// makes an error of it), the inner entries it held are written at their own level, not lost.
func TestInnerEntriesSurviveAPanicPassingThrough(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *Lookup) (*Reply, error) { return nil, errors.New("lookup down") })
	mediator.HandleFunc(m, func(ctx context.Context, _ *Call) (*Reply, error) {
		_, _ = mediator.Send(ctx, m, &Lookup{})
		return &Reply{}, nil
	})
	m.Use(recovery.New())
	m.Use(logging.New(logging.Config{Logger: zap.New(core)}))
	m.Use(panicky{}, mediator.ForRequest[*Call](), mediator.WithOrder(logging.Order+1))
	require.NoError(t, m.Build())
	t.Cleanup(func() { _ = m.Close() })
	_, err := mediator.Send(context.Background(), m, &Call{})
	require.ErrorIs(t, err, mediator.ErrPanic)
	assert.Equal(t, []string{"logging_test.Lookup failed error"}, levels(logs))
}
