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

	"github.com/switchboard-go/switchboard/behaviors/budget"
	"github.com/switchboard-go/switchboard/behaviors/hedge"
	"github.com/switchboard-go/switchboard/logging"
)

// OnHedge writes a step entry per hedge notice; OnBudgetSpend writes a refusal entry for a
// refused retry only, at most one per budget key per RefusalEvery, and nothing for one allowed.
func TestHedgeAndBudgetHooks(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	clock := &stoppedClock{now: time.Unix(0, 0)}
	lg := logging.New(logging.Config{Logger: zap.New(core), Clock: clock})
	ctx, req := context.Background(), &Call{}
	lg.OnHedge(ctx, hedge.Notice{Phase: hedge.Sent, Request: req, Key: "api", Attempt: 1, Delay: 20 * time.Millisecond})
	lg.OnHedge(ctx, hedge.Notice{Phase: hedge.Won, Request: req, Key: "api", Attempt: 1})
	lg.OnBudgetSpend(ctx, budget.Spend{Key: "api", Request: req, Calls: 10, Retries: 2})
	for range 3 {
		lg.OnBudgetSpend(ctx, budget.Spend{Key: "api", Request: req, Refused: true, Calls: 10, Retries: 2})
	}
	clock.now = clock.now.Add(11 * time.Second)
	lg.OnBudgetSpend(ctx, budget.Spend{Key: "api", Request: req, Refused: true, Calls: 10, Retries: 2})

	entries := logs.AllUntimed()
	require.Len(t, entries, 4)
	assert.Equal(t, "switchboard: hedge", entries[0].Message)
	assert.Equal(t, zapcore.DebugLevel, entries[0].Level)
	assert.Equal(t, map[string]any{"request": "logging_test.Call", "key": "api", "hedge": "sent", "attempt": int64(1), "delay": 20 * time.Millisecond}, entries[0].ContextMap())
	assert.Equal(t, map[string]any{"request": "logging_test.Call", "key": "api", "hedge": "won", "attempt": int64(1)}, entries[1].ContextMap())
	assert.Equal(t, "switchboard: retry budget refused a retry", entries[2].Message)
	assert.Equal(t, zapcore.WarnLevel, entries[2].Level)
	assert.Equal(t, map[string]any{"request": "logging_test.Call", "budget": "api", "calls": int64(10), "retries": int64(2)}, entries[2].ContextMap())
	assert.Equal(t, int64(2), entries[3].ContextMap()["suppressed"], "the refusals between two entries are counted")

	quiet := logging.New(logging.Config{Logger: zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(discard{}), zapcore.ErrorLevel))})
	n, s := hedge.Notice{Phase: hedge.Refused, Request: req, Key: "api", Err: errors.New("spent")}, budget.Spend{Key: "api", Request: req, Refused: true}
	assert.Equal(t, 0.0, testing.AllocsPerRun(1000, func() { quiet.OnHedge(ctx, n); quiet.OnBudgetSpend(ctx, s) }))
}
