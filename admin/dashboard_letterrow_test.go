package admin_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/durabletest"
)

// A letter's row says what it was for, the endpoint its item was guarded by, without opening
// it; it showed the dedupe key alone, "–" for most letters.
func TestDashboardLetterRowNamesItsEndpoint(t *testing.T) {
	f := startDashboard(t)
	ctx := context.Background()
	const endpoint = "https://api.payments.example/v1/refund"
	f.setFail("order-8801", "POST "+endpoint+": 503 Service Unavailable")
	_, err := f.q.Enqueue(ctx, &uiCharge{Order: 8801, AmountCents: 100}, durable.WithBreakerKey(endpoint),
		durable.WithDeadline(f.clock.Now().Add(time.Second)))
	must(t, err)
	f.clock.Advance(2 * time.Second) // the deadline passes before the first attempt
	if res := durabletest.Work(ctx, t, f.q, f.m); res.Dead != 1 {
		t.Fatalf("working the item: %v", res)
	}
	tab := newBrowser(t, 1280, 800)
	login(t, tab, f.url)
	cell := rowSel(7) + ` [data-f=key]`
	must(t, chromedp.Do(tab, chromedp.WaitVisible(chromedp.CSS(cell))))
	got, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS(cell)))
	must(t, err)
	if got != endpoint {
		t.Errorf("the letter's row says %q; want its endpoint %q", got, endpoint)
	}
	other, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS(rowSel(3)+` [data-f=key]`)))
	must(t, err)
	if other != "order-7781" {
		t.Errorf("an unguarded letter's row says %q; want its key", other)
	}
	openInspect(t, tab, 7)
	facts, err := chromedp.Run(tab, chromedp.Text(chromedp.ID("inspect-facts")))
	must(t, err)
	if !strings.Contains(facts, "Endpoint") || !strings.Contains(facts, endpoint) {
		t.Errorf("the letter's facts %q do not name its endpoint", facts)
	}
}
