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

// A letter that died by its deadline says in its timeline what the deadline was and what was
// last tried before it; the entry read only "Deadline passed", and the deadline was printed to
// the nanosecond in the error.
func TestDashboardDeadlineEntrySaysDeadlineAndLastTry(t *testing.T) {
	f := startDashboard(t)
	ctx := context.Background()
	deadline := f.clock.Now().Add(45 * time.Second).Truncate(time.Second)
	f.setFail("order-8800", "POST https://api.payments.example/v1/charge: 503 Service Unavailable")
	_, err := f.q.Enqueue(ctx, &uiCharge{Order: 8800, AmountCents: 100}, durable.WithDeadline(deadline))
	must(t, err)
	if res := durabletest.Work(ctx, t, f.q, f.m); res.Retried != 1 {
		t.Fatalf("the first attempt: %v", res)
	}
	f.clock.Advance(time.Minute)
	if res := durabletest.Work(ctx, t, f.q, f.m); res.Dead != 1 {
		t.Fatalf("past the deadline: %v", res)
	}
	const id = 7 // the fixture's letters are 1 to 6

	tab := newBrowser(t, 1280, 800)
	login(t, tab, f.url)
	openInspect(t, tab, id)
	entry := `#inspect-timeline li[data-kind=expired]`
	must(t, chromedp.Do(tab, poll(`(document.querySelector(`+js(entry+` [data-f=deadline]`)+`) || {}).textContent && document.querySelector(`+js(entry+` [data-f=deadline]`)+`).textContent.indexOf("The deadline was") === 0`)))
	text, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS(entry+` [data-f=deadline]`)))
	must(t, err)
	want := "The deadline was " + deadline.UTC().Format(time.RFC3339) + ". Last tried: queue attempt 1, failed, at "
	if !strings.HasPrefix(text, want) {
		t.Errorf("the deadline entry reads %q; want it to start %q", text, want)
	}
	errText, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS(entry+` .err`)))
	must(t, err)
	if !strings.Contains(errText, "deadline passed ("+deadline.UTC().Format(time.RFC3339)+")") {
		t.Errorf("the entry's error %q does not give the deadline to the second", errText)
	}
	viewportScreenshot(t, tab, "deadline-entry")
}
