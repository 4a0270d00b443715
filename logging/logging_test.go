package logging_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/fallback"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/logging"
	"github.com/switchboard-go/switchboard/mediator"
)

// Reply is the response of the test requests.
type Reply struct{ Text string }

// Call is a test request keyed by an endpoint.
type Call struct {
	mediator.Returns[*Reply]
	Endpoint string
}

// transient declares itself retryable.
type transient struct{ msg string }

func (e *transient) Error() string   { return e.msg }
func (e *transient) Retryable() bool { return true }

// build registers h for *Call and the behaviors, and builds.
func build(t testing.TB, h func(context.Context, *Call) (*Reply, error), uses ...func(m *mediator.Mediator)) *mediator.Mediator {
	t.Helper()
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, h)
	for _, use := range uses {
		use(m)
	}
	require.NoError(t, m.Build())
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func use(b mediator.Behavior, opts ...mediator.Option) func(*mediator.Mediator) {
	return func(m *mediator.Mediator) { m.Use(b, opts...) }
}

// entry is what a test expects of one log entry.
type entry struct {
	level  zapcore.Level
	msg    string
	fields map[string]any
}

func entries(logs *observer.ObservedLogs) []entry {
	var got []entry
	for _, e := range logs.AllUntimed() {
		got = append(got, entry{level: e.Level, msg: e.Message, fields: e.ContextMap()})
	}
	return got
}

func TestFields(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zapcore.DebugLevel)
		boom := errors.New("boom")
		m := build(t, func(ctx context.Context, c *Call) (*Reply, error) {
			time.Sleep(30 * time.Millisecond)
			if c.Endpoint == "bad" {
				return nil, boom
			}
			return &Reply{Text: "ok"}, nil
		}, use(logging.New(logging.Config{Logger: zap.New(core)})))

		_, err := mediator.Send(context.Background(), m, &Call{Endpoint: "good"})
		require.NoError(t, err)
		_, err = mediator.Send(context.Background(), m, &Call{Endpoint: "bad"})
		require.ErrorIs(t, err, boom)

		assert.Equal(t, []entry{
			{zapcore.DebugLevel, "switchboard: request handled", map[string]any{
				"request": "logging_test.Call", "attempt": int64(1), "duration": 30 * time.Millisecond, "outcome": "succeeded"}},
			{zapcore.ErrorLevel, "switchboard: request failed", map[string]any{
				"request": "logging_test.Call", "attempt": int64(1), "duration": 30 * time.Millisecond, "outcome": "failed",
				"error": "boom"}},
		}, entries(logs))
	})
}

// Outside retry (its default place) the behavior logs the final outcome once, with the number
// of the last attempt; inside retry it logs every attempt with its number.
func TestPlacementAroundRetry(t *testing.T) {
	for _, tc := range []struct {
		name  string
		order int
		want  []entry
	}{
		{"outside retry", logging.Order, []entry{
			{zapcore.ErrorLevel, "switchboard: request failed", map[string]any{
				"request": "logging_test.Call", "attempt": int64(3), "duration": 20 * time.Millisecond, "outcome": "failed",
				"error": "retry: gave up after 3 attempts: down"}},
		}},
		{"inside retry", behaviors.RetryOrder + 5, []entry{
			{zapcore.WarnLevel, "switchboard: request failed", map[string]any{
				"request": "logging_test.Call", "attempt": int64(1), "duration": time.Duration(0), "outcome": "failed", "error": "down"}},
			{zapcore.WarnLevel, "switchboard: request failed", map[string]any{
				"request": "logging_test.Call", "attempt": int64(2), "duration": time.Duration(0), "outcome": "failed", "error": "down"}},
			{zapcore.WarnLevel, "switchboard: request failed", map[string]any{
				"request": "logging_test.Call", "attempt": int64(3), "duration": time.Duration(0), "outcome": "failed", "error": "down"}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				core, logs := observer.New(zapcore.DebugLevel)
				cfg := logging.Config{Logger: zap.New(core)}
				if tc.order != logging.Order {
					cfg.Failure = zap.NewAtomicLevelAt(zapcore.WarnLevel)
				}
				m := build(t, func(context.Context, *Call) (*Reply, error) { return nil, &transient{"down"} },
					use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3, Strategy: retry.Fixed, BaseDelay: 10 * time.Millisecond}})),
					use(logging.New(cfg), mediator.WithOrder(tc.order)))
				_, err := mediator.Send(context.Background(), m, &Call{})
				require.Error(t, err)
				got := entries(logs)
				if tc.order == logging.Order && len(got) == 1 {
					// the exhausted error's text is retry's; the test pins the fields, not it
					tc.want[0].fields["error"] = err.Error()
				}
				assert.Equal(t, tc.want, got)
			})
		})
	}
}

func TestBreakerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zapcore.DebugLevel)
		reg := breaker.NewRegistry(breaker.Config{FailureThreshold: 1, Key: func(req any) string { return req.(*Call).Endpoint }})
		boom := errors.New("boom")
		m := build(t, func(ctx context.Context, c *Call) (*Reply, error) {
			if c.Endpoint == "https://down.example" {
				return nil, boom
			}
			return &Reply{}, nil
		}, use(breaker.New(reg)), use(logging.New(logging.Config{Logger: zap.New(core)})))

		ctx := context.Background()
		_, err := mediator.Send(ctx, m, &Call{Endpoint: "https://up.example"})
		require.NoError(t, err)
		_, err = mediator.Send(ctx, m, &Call{Endpoint: "https://down.example"}) // trips
		require.ErrorIs(t, err, breaker.ErrTripped)
		_, err = mediator.Send(ctx, m, &Call{Endpoint: "https://down.example"}) // refused
		require.ErrorIs(t, err, breaker.ErrOpen)

		got := logs.AllUntimed()
		require.Len(t, got, 3)
		_, has := got[0].ContextMap()["breaker"]
		assert.False(t, has, "a success names no breaker without Config.Breakers")
		assert.Equal(t, "https://down.example", got[1].ContextMap()["breaker"])
		assert.Equal(t, "https://down.example", got[2].ContextMap()["breaker"])

		// With Config.Breakers every entry names its key.
		core2, logs2 := observer.New(zapcore.DebugLevel)
		m2 := build(t, func(context.Context, *Call) (*Reply, error) { return &Reply{}, nil },
			use(breaker.New(reg)), use(logging.New(logging.Config{Logger: zap.New(core2), Breakers: reg})))
		_, err = mediator.Send(ctx, m2, &Call{Endpoint: "https://up.example"})
		require.NoError(t, err)
		require.Equal(t, 1, logs2.Len())
		assert.Equal(t, map[string]any{"request": "logging_test.Call", "attempt": int64(1), "duration": time.Duration(0),
			"outcome": "succeeded", "breaker": "https://up.example"}, logs2.AllUntimed()[0].ContextMap())
	})
}

func TestCallerCancellationIsNotAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zapcore.DebugLevel)
		m := build(t, func(ctx context.Context, _ *Call) (*Reply, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, use(logging.New(logging.Config{Logger: zap.New(core)})))
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := mediator.Send(ctx, m, &Call{})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, []entry{
			{zapcore.DebugLevel, "switchboard: request cancelled", map[string]any{
				"request": "logging_test.Call", "attempt": int64(1), "duration": 50 * time.Millisecond, "outcome": "cancelled",
				"error": "context deadline exceeded"}},
		}, entries(logs))
	})
}

func TestLevelsAreConfigurable(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	success := zap.NewAtomicLevelAt(zapcore.InfoLevel)
	m := build(t, func(context.Context, *Call) (*Reply, error) { return &Reply{}, nil },
		use(logging.New(logging.Config{Logger: zap.New(core), Success: success})))
	_, err := mediator.Send(context.Background(), m, &Call{})
	require.NoError(t, err)
	success.SetLevel(zapcore.DebugLevel) // changed while the mediator runs
	_, err = mediator.Send(context.Background(), m, &Call{})
	require.NoError(t, err)
	got := logs.AllUntimed()
	require.Len(t, got, 2)
	assert.Equal(t, zapcore.InfoLevel, got[0].Level)
	assert.Equal(t, zapcore.DebugLevel, got[1].Level)
}

func TestExplain(t *testing.T) {
	m := build(t, func(context.Context, *Call) (*Reply, error) { return &Reply{}, nil },
		use(logging.New(logging.Config{})), use(retry.New(retry.Config{})))
	chain, err := mediator.Explain[*Call](m)
	require.NoError(t, err)
	require.Len(t, chain, 3) // logging, retry, handler
	assert.Equal(t, "logging", chain[0].Name)
	assert.Equal(t, mediator.StageDefault, chain[0].Stage)
	assert.Equal(t, logging.Order, chain[0].Order)
}

// A success whose level is disabled allocates one thing in the behavior: the outer request's
// scope, the context in which its inner requests find it.
func TestSuccessAllocatesOnlyItsScopeWhenDisabled(t *testing.T) {
	lb, next := disabledBehavior(t)
	ctx, req := context.Background(), &Call{}
	allocs := testing.AllocsPerRun(1000, func() { _, _ = lb.Handle(ctx, req, next) })
	assert.Equal(t, 1.0, allocs)
}

// The ready hooks write their step entries at Config.Steps, and build nothing when it is
// disabled.
func TestStepHooks(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	lg := logging.New(logging.Config{Logger: zap.New(core)})
	ctx, req := context.Background(), &Call{}
	lg.OnRetry(ctx, retry.Event{Request: req, Attempt: 1, Delay: time.Second, Err: errors.New("down")})
	lg.OnFallback(ctx, fallback.Fallback{Request: req, Err: errors.New("down"), Verdict: fallback.Failed, FallbackErr: errors.New("no cache")})
	entries := logs.AllUntimed()
	require.Len(t, entries, 2)
	assert.Equal(t, "switchboard: retrying", entries[0].Message)
	assert.Equal(t, zapcore.DebugLevel, entries[0].Level)
	assert.Equal(t, map[string]any{"request": "logging_test.Call", "attempt": int64(1), "delay": time.Second, "error": "down"}, entries[0].ContextMap())
	assert.Equal(t, "switchboard: fallback", entries[1].Message)
	assert.Equal(t, map[string]any{"request": "logging_test.Call", "fallback": "failed", "error": "down", "fallback_error": "no cache"}, entries[1].ContextMap())

	quiet := logging.New(logging.Config{Logger: zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(discard{}), zapcore.WarnLevel))})
	e, f := retry.Event{Request: req, Attempt: 1, Err: errors.New("down")}, fallback.Fallback{Request: req, Verdict: fallback.Answered}
	assert.Equal(t, 0.0, testing.AllocsPerRun(1000, func() { quiet.OnRetry(ctx, e); quiet.OnFallback(ctx, f) }))
}

// disabledBehavior returns the behavior bound for *Call over a logger at warn, and a next that
// succeeds without allocating.
func disabledBehavior(t testing.TB) (mediator.Behavior, mediator.Next) {
	logger := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(discard{}), zapcore.WarnLevel))
	lb, err := logging.New(logging.Config{Logger: logger}).Bind(mediator.RequestInfo{Request: reflectTypeOfCall})
	require.NoError(t, err)
	reply := &Reply{}
	return lb, func(context.Context, any) (any, error) { return reply, nil }
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// deferredErr is an error that says the work was stored for later, as the durable deferral's is.
type deferredErr struct{}

func (deferredErr) Error() string  { return "deferred as item 7" }
func (deferredErr) Deferred() bool { return true }

// A call the durable deferral stored for later is logged at info with outcome "deferred", not
// as a failure at error: the same outcome the metrics and the span report for it. It used to
// be logged as a failure.
func TestDeferredIsNotAFailure(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	m := build(t, func(context.Context, *Call) (*Reply, error) { return nil, deferredErr{} },
		use(logging.New(logging.Config{Logger: zap.New(core)})))
	_, err := mediator.Send(context.Background(), m, &Call{})
	require.Error(t, err)
	require.Equal(t, 1, logs.Len())
	e := logs.AllUntimed()[0]
	assert.Equal(t, zapcore.InfoLevel, e.Level)
	assert.Equal(t, "switchboard: request deferred", e.Message)
	assert.Equal(t, "deferred", e.ContextMap()["outcome"])
}

// An error a request's handler met sending another request names that request's breaker and
// attempts, not this one's: a request type whose pipeline has no breaker or retry gets no
// breaker field and attempt 1, even with Config.Breakers set. Such entries used to name a
// breaker the request does not have and the other request's attempt count.
func TestInnerErrorsDoNotNameTheOuterBreaker(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	reg := breaker.NewRegistry(breaker.Config{})
	inner := &retry.ExhaustedError{Attempts: 3, Err: &breaker.OpenError{Key: "https://other.example"}}
	m := build(t, func(context.Context, *Call) (*Reply, error) { return nil, inner },
		use(logging.New(logging.Config{Logger: zap.New(core), Breakers: reg})))
	_, err := mediator.Send(context.Background(), m, &Call{})
	require.Error(t, err)
	require.Equal(t, 1, logs.Len())
	fields := logs.AllUntimed()[0].ContextMap()
	assert.NotContains(t, fields, "breaker")
	assert.Equal(t, int64(1), fields["attempt"])
}

// Used directly, without a mediator's Build binding it to a request type, the behavior names
// the request from the value it is given.
func TestUnboundNamesTheRequest(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	b := logging.New(logging.Config{Logger: zap.New(core)})
	_, err := b.Handle(context.Background(), &Call{}, func(context.Context, any) (any, error) { return &Reply{}, nil })
	require.NoError(t, err)
	require.Equal(t, 1, logs.Len())
	assert.Equal(t, "logging_test.Call", logs.AllUntimed()[0].ContextMap()["request"])
}
