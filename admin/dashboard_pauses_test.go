package admin_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/switchboard-go/switchboard/durable/record"
)

func pauseRowSel(kind, target string) string {
	return `#pauses-rows tr[data-kind=` + css(kind) + `][data-target=` + css(target) + `]`
}

// An operator pauses a breaker key until a time and a request name until resumed through the
// dashboard, sees both (and the key's breaker card marked paused) and the audit log's entries,
// then resumes the name.
func TestDashboardPauseAndResume(t *testing.T) {
	f := startDashboard(t)
	tab := newBrowser(t, 1280, 900)
	login(t, tab, f.url)
	key := "https://api.payments.example/v1/charge?region=eu"
	must(t, chromedp.Do(tab,
		chromedp.WaitVisible(chromedp.ID("pauses-title")),
		chromedp.WaitVisible(chromedp.ID("pauses-empty")),
		chromedp.WaitVisible(chromedp.ID("audit-title")),
	))

	// A bad end time is refused in the dialog, naming the field; nothing is sent.
	until := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.ID("pause-open")),
		chromedp.WaitVisible(chromedp.ID("pause-dialog")),
		chromedp.SetValue(chromedp.ID("pause-kind"), "breaker_key"),
		chromedp.SendKeys(chromedp.ID("pause-target"), key),
		chromedp.SendKeys(chromedp.ID("pause-until"), "tomorrow"),
		chromedp.SendKeys(chromedp.ID("pause-reason"), "processor incident"),
		chromedp.Click(chromedp.ID("pause-ok")),
		poll(`document.getElementById("pause-error").textContent.indexOf("end time") >= 0`),
		poll(`document.getElementById("pause-until").getAttribute("aria-invalid") === "true"`),
	))
	if strings.Contains(f.Posts(), "/api/pauses") {
		t.Fatalf("a refused pause was sent: %s", f.Posts())
	}
	must(t, chromedp.Do(tab,
		chromedp.SetValue(chromedp.ID("pause-until"), until.Format("2006-01-02T15:04:05Z")),
	))
	viewportScreenshot(t, tab, "pause-dialog")
	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.ID("pause-ok")),
		chromedp.WaitNotVisible(chromedp.ID("pause-dialog")),
		chromedp.WaitVisible(chromedp.CSS(pauseRowSel("breaker_key", key))),
		chromedp.WaitVisible(chromedp.CSS(breakerSel(key)+` [data-f=paused]`)),
	))

	// A request name, until resumed; Enter in the name field pauses (it does not cancel).
	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.ID("pause-open")),
		chromedp.WaitVisible(chromedp.ID("pause-dialog")),
		poll(`document.getElementById("pause-target").value === ""`),
		chromedp.SetValue(chromedp.ID("pause-kind"), "name"),
		chromedp.SendKeys(chromedp.ID("pause-reason"), "bad deploy, rolling back"),
		chromedp.SendKeys(chromedp.ID("pause-target"), "ChargeCard"+kb.Enter),
		chromedp.WaitNotVisible(chromedp.ID("pause-dialog")),
		chromedp.WaitVisible(chromedp.CSS(pauseRowSel("name", "ChargeCard"))),
		poll(`document.querySelectorAll("#audit-rows tr").length === 2`),
	))
	ps, err := f.q.Pauses(context.Background())
	must(t, err)
	if len(ps) != 2 || ps[0].Kind != record.PauseBreakerKey || !ps[0].Until.Equal(until) || ps[0].Actor != "admin" || ps[0].Reason != "processor incident" ||
		ps[1].Target != "ChargeCard" || !ps[1].Until.IsZero() {
		t.Fatalf("the queue's pauses: %+v", ps)
	}
	untilText, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS(pauseRowSel("name", "ChargeCard")+` td:nth-child(3)`)))
	must(t, err)
	if untilText != "until resumed" {
		t.Errorf("the name's until cell reads %q", untilText)
	}
	screenshot(t, tab, "paused")

	// Resume the name: confirmed, then gone from the list, and in the audit log.
	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.CSS(pauseRowSel("name", "ChargeCard")+` [data-act=resume]`)),
		chromedp.WaitVisible(chromedp.ID("confirm-dialog")),
		chromedp.Click(chromedp.ID("confirm-ok")),
		chromedp.WaitNotVisible(chromedp.ID("confirm-dialog")),
		poll(`!document.querySelector(`+js(pauseRowSel("name", "ChargeCard"))+`)`),
		poll(`document.querySelectorAll("#audit-rows tr").length === 3`),
		poll(`document.querySelector("#audit-rows tr").textContent.indexOf("resume") >= 0`),
	))
	ps, err = f.q.Pauses(context.Background())
	must(t, err)
	if len(ps) != 1 || ps[0].Kind != record.PauseBreakerKey {
		t.Fatalf("after the resume the queue's pauses are %+v; want the key's alone", ps)
	}
	if posts := f.Posts(); !strings.Contains(posts, "POST /api/pauses/resume") {
		t.Fatalf("posts: %s", posts)
	}
	screenshot(t, tab, "resumed")
}
