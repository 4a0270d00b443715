package logging_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/fallback"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/behaviors/timeout"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/httpcall"
	"github.com/switchboard-go/switchboard/logging"
	"github.com/switchboard-go/switchboard/mediator"
)

// Deliver is a webhook delivery: one inbound event posted to one receiver.
type Deliver struct {
	mediator.Returns[mediator.Void]
	EventID    string
	URL        string
	BestEffort bool // a receiver that may miss events: a fallback answers for it
	Panic      bool // the handler has a bug
}

// eventKey carries the id of the inbound event a dispatch works for.
var eventKey = mediator.NewContextKey[string]("event")

// webhookFields are the fields hooks of the dispatcher: the event id of every entry (from the
// context, so the inner HTTP calls have it too) and the receiver of a delivery's entry.
var webhookFields = []func(ctx context.Context, req any) []zap.Field{
	func(ctx context.Context, _ any) []zap.Field {
		if id, ok := eventKey.Get(ctx); ok {
			return []zap.Field{zap.String("event_id", id)}
		}
		return nil
	},
	func(_ context.Context, req any) []zap.Field {
		if d, ok := req.(*Deliver); ok {
			return []zap.Field{zap.String("receiver", d.URL)}
		}
		return nil
	},
}

// countingWriter counts what is written to it.
type countingWriter struct {
	mu           sync.Mutex
	lines, bytes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines += bytes.Count(p, []byte("\n"))
	w.bytes += len(p)
	return len(p), nil
}

// webhookScenario is what the webhook dispatcher replay produced.
type webhookScenario struct {
	logs    *observer.ObservedLogs
	events  []*Deliver
	traceOf map[string]string // event id -> trace id of the span it was sent under
}

// replayWebhooks runs a webhook dispatcher: inbound events become *Deliver requests whose
// handler posts through the httpcall adapter (retry, a breaker per host, a timeout per attempt,
// a fallback for best-effort receivers); what still fails is deferred into a durable SQLite
// queue. Three receivers: healthy, busy (503 with Retry-After in bursts) and down (closed).
// Every event is sent under an OpenTelemetry span. logger options are those of zap's
// production configuration (a stack trace from error up).
func replayWebhooks(t *testing.T, cfg logging.Config, events int) webhookScenario {
	t.Helper()
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(healthy.Close)
	var busyCalls atomic.Int64
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if n := busyCalls.Add(1); n%10 < 6 { // bursts of six 503s, then four successes
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(busy.Close)
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close() // connections are refused

	q, err := durable.Open(context.Background(), sqlite.Open(filepath.Join(t.TempDir(), "queue.db")), durable.Config{
		Logger: zap.NewNop(),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() })
	durable.Register[*Deliver](q, "webhook.deliver")

	core, logs := observer.New(zapcore.DebugLevel)
	// beside the observer, what zap's production configuration would write (JSON, info and up)
	production := &countingWriter{}
	json := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(production), zapcore.InfoLevel)
	cfg.Logger = zap.New(zapcore.NewTee(core, json), zap.AddCaller(), zap.AddStacktrace(zapcore.ErrorLevel)) // zap.NewProduction's options
	t.Cleanup(func() {
		t.Logf("zap's production configuration would have written %d lines, %d bytes", production.lines, production.bytes)
	})

	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	m := mediator.New(nil, mediator.Config{Logger: zap.NewNop()})
	httpcall.Register(m, transport)
	client := &http.Client{Transport: httpcall.NewTransport(m, httpcall.Config{})}
	mediator.HandleFunc(m, func(ctx context.Context, d *Deliver) (mediator.Void, error) {
		if d.Panic {
			panic("webhook: nil template for event " + d.EventID)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, strings.NewReader(`{"event":"`+d.EventID+`"}`))
		if err != nil {
			return mediator.Void{}, err
		}
		if d.BestEffort {
			req.Header.Set("X-Best-Effort", "1")
		}
		resp, err := client.Do(req)
		if err != nil {
			return mediator.Void{}, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return mediator.Void{}, nil
	})
	onCall := mediator.ForRequest[*httpcall.Call]()
	m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 50 * time.Millisecond}}), onCall)
	m.Use(breaker.New(breaker.NewRegistry(breaker.Config{Key: httpcall.Authority, FailureThreshold: 5, OpenDuration: time.Hour})), onCall)
	m.Use(timeout.New(timeout.Config{Duration: 5 * time.Second}), onCall)
	m.Use(fallback.NewFor(func(_ context.Context, c *httpcall.Call, err error) (*http.Response, error) {
		if c.Request.Header.Get("X-Best-Effort") == "" {
			return nil, err // declined: the delivery must happen, the deferral keeps it
		}
		return &http.Response{StatusCode: http.StatusAccepted, Body: http.NoBody, Request: c.Request}, nil
	}, fallback.Config{}))
	m.Use(durable.NewDeferral(q, durable.DeferralConfig{}))
	m.Use(logging.New(cfg))
	require.NoError(t, m.Build())
	t.Cleanup(func() { _ = m.Close() })

	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewInMemoryExporter()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracer := tp.Tracer("webhook")

	sc := webhookScenario{logs: logs, traceOf: map[string]string{}}
	receivers := []string{healthy.URL, busy.URL, downURL}
	for i := range events {
		d := &Deliver{EventID: fmt.Sprintf("evt-%03d", i), URL: receivers[i%len(receivers)] + "/hook",
			BestEffort: i%4 == 3, Panic: i == events/2}
		sc.events = append(sc.events, d)
		ctx, span := tracer.Start(eventKey.With(context.Background(), d.EventID), "webhook.receive")
		sc.traceOf[d.EventID] = span.SpanContext().TraceID().String()
		_, err := mediator.Send(ctx, m, d) // one at a time: a delivery's lines precede the next one's
		span.End()
		if d.Panic {
			require.ErrorIs(t, err, mediator.ErrPanic)
		}
	}
	return sc
}

// The webhook dispatcher's log: at most one line at warn or above per delivery, however many
// inner HTTP calls it made, and none at all for a delivery that was deferred or answered by
// the fallback; stack traces only on the panic's line; every delivery's line carries the
// fields hook's event id and the trace id of its span.
func TestWebhookDispatcherLogs(t *testing.T) {
	const events = 120
	sc := replayWebhooks(t, logging.Config{Fields: webhookFields}, events)

	lines := sc.logs.AllUntimed()
	outcomes := map[string]int{}
	var loud, stacks, panicStacks, maxPerDelivery, quietBroken int
	perDelivery := 0
	var outer []observer.LoggedEntry
	for _, e := range lines {
		isPanic := strings.Contains(fmt.Sprint(e.ContextMap()["error"]), "mediator: panic")
		if e.Stack != "" {
			if isPanic {
				panicStacks++
			} else {
				stacks++
			}
		}
		if e.Level >= zapcore.WarnLevel {
			loud++
			perDelivery++
		}
		if e.ContextMap()["request"] == "logging_test.Deliver" { // the delivery's own line ends its group
			outer = append(outer, e)
			outcomes[e.ContextMap()["outcome"].(string)]++
			maxPerDelivery = max(maxPerDelivery, perDelivery)
			if o := e.ContextMap()["outcome"]; perDelivery > 0 && (o == "succeeded" || o == "deferred") {
				quietBroken++ // nobody need act on a delivery that was deferred or answered
			}
			perDelivery = 0
		}
	}
	t.Logf("%d lines, %d at warn or above, %d with a stack (%d of them the panic's); deliveries: %v",
		len(lines), loud, stacks+panicStacks, panicStacks, outcomes)

	// the scenario did what it is meant to: deliveries succeeded, were deferred, were answered
	// by the fallback for failing receivers, and one panicked
	require.Len(t, outer, events, "one line per delivery")
	require.Positive(t, outcomes["succeeded"])
	require.Positive(t, outcomes["deferred"])
	require.Equal(t, 1, outcomes["failed"], "the panic")

	assert.LessOrEqual(t, maxPerDelivery, 1, "lines at warn or above for one delivery")
	assert.Zero(t, quietBroken, "deliveries deferred or answered (by a fallback) with lines at warn or above")
	assert.Zero(t, stacks, "stack traces on lines that are not a panic's")
	assert.Equal(t, 1, panicStacks, "the panic's line carries its stack")
	for i, e := range outer {
		f := e.ContextMap()
		d := sc.events[i]
		assert.Equal(t, d.EventID, f["event_id"], "the fields hook's event id")
		assert.Equal(t, d.URL, f["receiver"], "the second fields hook's receiver")
		assert.Equal(t, sc.traceOf[d.EventID], f["trace_id"], "trace id of %v", f)
		assert.Len(t, f["span_id"], 16, "span id of %v", f)
		if d.Panic {
			assert.Contains(t, e.Stack, "replayWebhooks", "the panic's line carries the stack of the panic")
		}
	}
	// the inner calls' failures are there, for debugging, below the deliveries' level
	var inner, refused, answered int
	for _, e := range lines {
		if f := e.ContextMap(); f["request"] == "httpcall.Call" && f["outcome"] != "succeeded" {
			inner++
			if f["outcome"] == "refused" {
				refused++ // by the down receiver's open breaker
			}
			if f["outer_outcome"] == "succeeded" {
				answered++ // by the fallback
			}
			assert.Equal(t, zapcore.DebugLevel, e.Level, "%v", f)
			assert.Contains(t, []any{"succeeded", "deferred"}, f["outer_outcome"], "%v", f)
			assert.NotEmpty(t, f["event_id"], "%v", f)
		}
	}
	t.Logf("inner failures: %d, %d of them refused by a breaker, %d answered by the fallback", inner, refused, answered)
	assert.Positive(t, refused)
	assert.Positive(t, answered)
}
