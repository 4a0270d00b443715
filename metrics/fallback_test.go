package metrics_test

import (
	"context"
	"errors"
	"testing"

	"github.com/switchboard-go/switchboard/behaviors/fallback"
	"github.com/switchboard-go/switchboard/mediator"
	"github.com/switchboard-go/switchboard/metrics"
)

// Lookup of a quote for one market: the fallback answers some markets from its cache, declines
// others, and fails for one.
type MarketQuote struct {
	mediator.Returns[string]
	Market string
}

// fallbacks_total counts what a fallback did: one whose function failed, or that declined
// (When, ErrDecline), is not counted as an answer; each outcome has its own series.
func TestFallbacksTotalCountsOnlyAnswers(t *testing.T) {
	rec, err := metrics.New(metrics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(context.Context, *MarketQuote) (string, error) { return "", errBad })
	m.Use(fallback.NewFor(func(_ context.Context, q *MarketQuote, _ error) (string, error) {
		switch q.Market {
		case "eu":
			return "cached", nil
		case "us":
			return "", fallback.ErrDecline
		}
		return "", errors.New("cache down")
	}, fallback.Config{
		When:       func(_ context.Context, req any, _ error) bool { return req.(*MarketQuote).Market != "live" },
		OnFallback: []func(context.Context, fallback.Fallback){rec.OnFallback},
	}))
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	for _, market := range []string{"eu", "eu", "us", "live", "asia"} {
		_, _ = mediator.Send(context.Background(), m, &MarketQuote{Market: market})
	}
	scrape(t, rec, `
# HELP switchboard_fallbacks_total Failures a fallback handled, by request type and what it did (answered, declined, failed, cancelled).
# TYPE switchboard_fallbacks_total counter
switchboard_fallbacks_total{outcome="answered",request="metrics_test.MarketQuote"} 2
switchboard_fallbacks_total{outcome="cancelled",request="metrics_test.MarketQuote"} 0
switchboard_fallbacks_total{outcome="declined",request="metrics_test.MarketQuote"} 2
switchboard_fallbacks_total{outcome="failed",request="metrics_test.MarketQuote"} 1
`, "switchboard_fallbacks_total")
}
