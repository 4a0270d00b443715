package logging_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/switchboard-go/switchboard/behaviors/ratelimit"
	"github.com/switchboard-go/switchboard/behaviors/validation"
	"github.com/switchboard-go/switchboard/logging"
	"github.com/switchboard-go/switchboard/mediator"
)

// A rate limit that sheds load refuses the inner request a handler sends, and the handler
// passes the refusal on: the caller gets a refusal, and the outer request is logged as one
// ("switchboard: request refused", at Config.Refusal, rate-limited per request type and key),
// never at error. Each such call used to write a "switchboard: request failed" line at error.
func TestPassedOnRefusalIsNotAnError(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *Lookup) (*Reply, error) { return &Reply{}, nil })
	mediator.HandleFunc(m, func(ctx context.Context, _ *Call) (*Reply, error) {
		return mediator.Send(ctx, m, &Lookup{})
	})
	// One permit a day: the first lookup takes it, the others are refused.
	m.Use(ratelimit.New(ratelimit.Config{Rate: 1.0 / 86400}), mediator.ForRequest[*Lookup]())
	m.Use(logging.New(logging.Config{Logger: zap.New(core), Clock: clock, RefusalEvery: time.Minute}))
	require.NoError(t, m.Build())
	t.Cleanup(func() { _ = m.Close() })

	for i := range 5 {
		_, err := mediator.Send(context.Background(), m, &Call{})
		if i > 0 {
			require.ErrorIs(t, err, ratelimit.ErrLimited)
		}
	}
	assert.Empty(t, logs.FilterLevelExact(zapcore.ErrorLevel).All(), "a refusal written at error")
	assert.Equal(t, []string{
		"logging_test.Lookup succeeded debug",
		"logging_test.Call succeeded debug",
		"logging_test.Lookup refused warn refused", // the inner refusal, with its outer outcome
		"logging_test.Call refused warn",           // then the 3 others of each held back
	}, levels(logs))
	refused := logs.FilterMessage("switchboard: request refused").FilterField(zap.String("request", "logging_test.Call")).All()
	require.Len(t, refused, 1)

	clock.advance(time.Minute)
	_, _ = mediator.Send(context.Background(), m, &Call{})
	last := logs.All()[logs.Len()-1]
	assert.Equal(t, "switchboard: request refused", last.Message)
	assert.Equal(t, int64(3), last.ContextMap()["suppressed"], "the outer refusals held back are counted")
}

// notFound is a callee's 404.
type notFound struct{}

func (notFound) Error() string   { return "404 Not Found" }
func (notFound) StatusCode() int { return 404 }

// A call whose error says the request itself is wrong (a callee's 4xx, a validation error) is
// logged with the outcome client_error at Config.ClientError (warn), apart from failures; it
// used to be a failure at error.
func TestClientErrorIsLoggedApart(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	var answer error
	m := build(t, func(context.Context, *Call) (*Reply, error) { return nil, answer },
		use(logging.New(logging.Config{Logger: zap.New(core)})))
	for _, err := range []error{notFound{}, &validation.Error{Err: errors.New("no id")}, errors.New("down")} {
		answer = err
		_, _ = mediator.Send(context.Background(), m, &Call{})
	}
	var got []string
	for _, e := range logs.AllUntimed() {
		got = append(got, e.Level.String()+" "+e.Message+" "+e.ContextMap()["outcome"].(string))
	}
	assert.Equal(t, []string{
		"warn switchboard: request invalid client_error",
		"warn switchboard: request invalid client_error",
		"error switchboard: request failed failed",
	}, got)
}
