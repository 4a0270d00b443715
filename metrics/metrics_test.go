package metrics_test

import (
	"context"
	"errors"
	"io"
	"maps"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/fallback"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/mediator"
	"github.com/switchboard-go/switchboard/metrics"
)

type Ping struct{ mediator.Returns[string] }
type Flaky struct{ mediator.Returns[string] }
type Quote struct{ mediator.Returns[string] }
type Lookup struct{ mediator.Returns[string] }
type Slow struct{ mediator.Returns[string] }
type Send struct {
	mediator.Command
	To string `json:"to"`
}

type transient struct{}

func (transient) Error() string   { return "transient" }
func (transient) Retryable() bool { return true }

var errBad = errors.New("bad record")

// scrape reads the handler's exposition of the named metric families.
func scrape(t *testing.T, rec *metrics.Recorder, expected string, names ...string) {
	t.Helper()
	srv := httptest.NewServer(rec.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatal(resp.Status, err)
	}
	if err := testutil.ScrapeAndCompare(srv.URL, strings.NewReader(expected), names...); err != nil {
		t.Errorf("%v\nfull exposition:\n%s", err, body)
	}
}

// A scripted run through a pipeline with every behavior wired to the Recorder, scraped through
// promhttp: names, labels and values exact.
func TestScrapeAfterScriptedRun(t *testing.T) {
	ctx := context.Background()
	rec, err := metrics.New(metrics.Config{Prefix: "shop_api", StatsMaxAge: -1}) // no cache: each scrape reads the queue
	if err != nil {
		t.Fatal(err)
	}
	q, err := durable.Open(ctx, sqlite.Open(filepath.Join(t.TempDir(), "q.db")), durable.Config{
		Policy: retry.Policy{BaseDelay: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	durable.Register[*Send](q, "test.send")

	reg := breaker.NewRegistry(breaker.Config{FailureThreshold: 1, OpenDuration: time.Hour, OnRefusal: []func(string){rec.OnRefusal}})
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *Ping) (string, error) { return "pong", nil })
	flaky := 0
	mediator.HandleFunc(m, func(context.Context, *Flaky) (string, error) {
		if flaky++; flaky == 1 {
			return "", transient{}
		}
		return "ok", nil
	})
	mediator.HandleFunc(m, func(context.Context, *Quote) (string, error) { return "", transient{} })
	mediator.HandleFunc(m, func(context.Context, *Lookup) (string, error) { return "found", nil })
	cctx, cancel := context.WithCancel(ctx)
	mediator.HandleFunc(m, func(ctx context.Context, _ *Slow) (string, error) { cancel(); return "", ctx.Err() })
	mediator.HandleFunc(m, func(_ context.Context, s *Send) (mediator.Void, error) {
		if s.To == "bad" {
			return mediator.Void{}, errBad
		}
		return mediator.Void{}, transient{}
	})
	m.Use(rec.Behavior())
	m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 2, BaseDelay: time.Millisecond}, OnRetry: []func(context.Context, retry.Event){rec.OnRetry}}),
		mediator.ForRequest[*Flaky]())
	m.Use(fallback.NewFor(func(context.Context, *Quote, error) (string, error) { return "cached", nil },
		fallback.Config{OnFallback: []func(context.Context, fallback.Fallback){rec.OnFallback}}))
	m.Use(breaker.New(reg), mediator.ForTypes(func(i mediator.RequestInfo) bool {
		return i.Request == quoteType || i.Request == lookupType
	}))
	m.Use(durable.NewDeferral(q, durable.DeferralConfig{}))
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	if err := rec.CollectBreakers(reg); err != nil {
		t.Fatal(err)
	}
	if err := rec.CollectQueue(q); err != nil {
		t.Fatal(err)
	}

	// Tripped by hand before any traffic: open from the first scrape, no listener involved.
	if err := reg.Trip(behaviors.TypeKey(lookupType)); err != nil {
		t.Fatal(err)
	}
	scrape(t, rec, `
# HELP shop_api_breaker_state Circuit breaker state, read from the registry at scrape time: 1 open, 0 closed or half-open (_overflow: how many of the breakers beyond the Recorder's bound are open).
# TYPE shop_api_breaker_state gauge
shop_api_breaker_state{key="*metrics_test.Lookup"} 1
shop_api_breaker_state{key="*metrics_test.Quote"} 0
`, "shop_api_breaker_state")

	for range 2 {
		if _, err := mediator.Send(ctx, m, &Ping{}); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := mediator.Send(ctx, m, &Flaky{}); err != nil || r != "ok" {
		t.Fatal(r, err)
	}
	for range 2 { // trips the breaker, then is refused by it: the fallback answers both
		if r, err := mediator.Send(ctx, m, &Quote{}); err != nil || r != "cached" {
			t.Fatal(r, err)
		}
	}
	if _, err := mediator.Send(ctx, m, &Lookup{}); !errors.Is(err, breaker.ErrOpen) {
		t.Fatal(err)
	}
	if _, err := mediator.Send(cctx, m, &Slow{}); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if _, err := mediator.Send(ctx, m, &Send{To: "later"}); !errors.Is(err, durable.ErrDeferred) {
		t.Fatal(err)
	}
	res, err := q.RunBatch(ctx, m, "import", []durable.BatchItem{{Key: "r1", Request: &Send{To: "bad"}}})
	if err != nil {
		t.Fatal(res, err)
	}

	scrape(t, rec, `
# HELP shop_api_requests_total Requests sent through the mediator, by request type and outcome (succeeded, failed, client_error, cancelled, refused, deferred).
# TYPE shop_api_requests_total counter
`+requests(map[string][6]int{
		"Flaky":  {1, 0, 0, 0, 0},
		"Lookup": {0, 0, 0, 1, 0},
		"Ping":   {2, 0, 0, 0, 0},
		"Quote":  {2, 0, 0, 0, 0},
		"Send":   {0, 1, 0, 0, 1},
		"Slow":   {0, 0, 1, 0, 0},
	})+`
# HELP shop_api_retries_total Attempts that failed and were retried in process, by request type.
# TYPE shop_api_retries_total counter
shop_api_retries_total{request="metrics_test.Flaky"} 1
shop_api_retries_total{request="metrics_test.Lookup"} 0
shop_api_retries_total{request="metrics_test.Ping"} 0
shop_api_retries_total{request="metrics_test.Quote"} 0
shop_api_retries_total{request="metrics_test.Send"} 0
shop_api_retries_total{request="metrics_test.Slow"} 0
# HELP shop_api_fallbacks_total Failures a fallback handled, by request type and what it did (answered, declined, failed, cancelled).
# TYPE shop_api_fallbacks_total counter
`+fallbacks(map[string]int{"Quote": 2}, "Flaky", "Lookup", "Ping", "Send", "Slow")+`
# HELP shop_api_breaker_refused_total Calls refused by an open circuit breaker, by breaker key (_overflow: keys beyond the Recorder's bound).
# TYPE shop_api_breaker_refused_total counter
shop_api_breaker_refused_total{key="*metrics_test.Lookup"} 1
shop_api_breaker_refused_total{key="*metrics_test.Quote"} 1
# HELP shop_api_breaker_state Circuit breaker state, read from the registry at scrape time: 1 open, 0 closed or half-open (_overflow: how many of the breakers beyond the Recorder's bound are open).
# TYPE shop_api_breaker_state gauge
shop_api_breaker_state{key="*metrics_test.Lookup"} 1
shop_api_breaker_state{key="*metrics_test.Quote"} 1
# HELP shop_api_breaker_half_open 1 while a circuit breaker is half-open (letting probes through), 0 otherwise (_overflow: how many of the breakers beyond the Recorder's bound are half-open).
# TYPE shop_api_breaker_half_open gauge
shop_api_breaker_half_open{key="*metrics_test.Lookup"} 0
shop_api_breaker_half_open{key="*metrics_test.Quote"} 0
# HELP shop_api_durable_items Durable queue items per state (pending, running, succeeded, dead, cancelled), read at scrape time.
# TYPE shop_api_durable_items gauge
shop_api_durable_items{state="cancelled"} 0
shop_api_durable_items{state="dead"} 0
shop_api_durable_items{state="pending"} 1
shop_api_durable_items{state="running"} 0
shop_api_durable_items{state="succeeded"} 0
# HELP shop_api_durable_dead_letters Dead letters per status (failed: waiting for an operator; replayed; discarded), read at scrape time.
# TYPE shop_api_durable_dead_letters gauge
shop_api_durable_dead_letters{status="discarded"} 0
shop_api_durable_dead_letters{status="failed"} 1
shop_api_durable_dead_letters{status="replayed"} 0
`, "shop_api_requests_total", "shop_api_retries_total", "shop_api_fallbacks_total", "shop_api_breaker_refused_total",
		"shop_api_breaker_state", "shop_api_breaker_half_open", "shop_api_durable_items", "shop_api_durable_dead_letters")

	// Every request was timed once.
	if n := histogramCount(t, rec, "shop_api_request_duration_seconds"); n != 9 {
		t.Errorf("request_duration_seconds counted %d, want 9", n)
	}
}

var (
	quoteType  = typeOf[*Quote]()
	lookupType = typeOf[*Lookup]()
)

// requests renders the requests_total samples of types (short names) and their counts in the
// order of the outcomes: succeeded, failed, cancelled, refused, deferred, client_error.
func requests(types map[string][6]int) string {
	var b strings.Builder
	names := []string{"cancelled", "client_error", "deferred", "failed", "refused", "succeeded"}
	idx := map[string]int{"succeeded": 0, "failed": 1, "cancelled": 2, "refused": 3, "deferred": 4, "client_error": 5}
	for _, typ := range sortedKeys(types) {
		for _, o := range names {
			b.WriteString("shop_api_requests_total{outcome=\"" + o + "\",request=\"metrics_test." + typ + "\"} " +
				itoa(types[typ][idx[o]]) + "\n")
		}
	}
	return b.String()
}

// fallbacks renders the fallbacks_total samples of request types (short names) whose fallback
// answered the given number of failures, and of the others types, which counted none.
func fallbacks(answered map[string]int, others ...string) string {
	all := map[string]int{}
	for _, typ := range others {
		all[typ] = 0
	}
	maps.Copy(all, answered)
	var b strings.Builder
	for _, typ := range sortedKeys(all) {
		for _, o := range []string{"answered", "cancelled", "declined", "failed"} {
			n := 0
			if o == "answered" {
				n = all[typ]
			}
			b.WriteString("shop_api_fallbacks_total{outcome=\"" + o + "\",request=\"metrics_test." + typ + "\"} " + itoa(n) + "\n")
		}
	}
	return b.String()
}

func histogramCount(t *testing.T, rec *metrics.Recorder, name string) uint64 {
	t.Helper()
	mfs, err := rec.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}
