package admin_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard-go/switchboard/durable/record"
)

// A replay by filter from the dashboard: the filter selects the letters whose error mentions
// smtp, "Replay matching…" shows the dry run's count and sample to confirm, and the action's
// progress (settled of matched, per-outcome totals, state) follows as the queue's scheduler
// replays them one a second of the queue's clock. A discard by filter asks for its reason.
func TestDashboardBulkReplayByFilter(t *testing.T) {
	d := newDashboardWith(t, false, true)
	d.setFail("not json: <b>raw</b> bytes", "") // letters 5 and 6 succeed when replayed
	d.setFail(`{"to":"bob@example"}`, "")
	tab := newBrowser(t, 1280, 900)
	login(t, tab, d.url)
	must(t, chromedp.Do(tab,
		chromedp.WaitVisible(chromedp.ID("ba-title")),
		chromedp.SetValue(chromedp.ID("f-error"), "SMTP"), // not typed: the first load ends by moving the focus to the main region
		chromedp.Click(chromedp.CSS(`#dl-filters button[type=submit]`)),
		poll(`document.querySelectorAll("#dl-rows tr").length === 2`),
		chromedp.Click(chromedp.ID("ba-replay")),
		chromedp.WaitVisible(chromedp.ID("ba-dialog")),
		poll(`document.getElementById("ba-dialog-title").textContent === "Replay 2 matching letters?"`),
	))
	sample, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#ba-sample li")).map(function (l) { return l.textContent; })`))
	must(t, err)
	if strings.Join(sample, "|") != "#6 SendReceipt: smtp: 421 try again later|#5 SendReceipt: smtp: 421 try again later" {
		t.Fatalf("sample %q", sample)
	}
	count, err := chromedp.Run(tab, chromedp.TextContent(chromedp.ID("ba-count")))
	must(t, err)
	if !strings.Contains(count, `error containing "SMTP"`) {
		t.Fatalf("count reads %q", count)
	}
	if list, _ := d.q.BulkActions(context.Background(), 0, 0); len(list) != 0 {
		t.Fatalf("the dry run stored %+v", list)
	}
	viewportScreenshot(t, tab, "bulk-replay-confirm")
	must(t, chromedp.Do(tab,
		chromedp.SetValue(chromedp.ID("ba-rate"), "1"),
		chromedp.SendKeys(chromedp.ID("ba-reason"), "smtp relay fixed"),
		chromedp.Click(chromedp.ID("ba-ok")),
		poll(`document.getElementById("notice").textContent.indexOf("Bulk replay #1 started: 2 letters.") === 0`),
		// The first letter goes at once; the second waits a second of the queue's clock.
		poll(`(function () { var li = document.querySelector('#ba-list li[data-key="1"]'); return li && li.querySelector("[data-f=progress]").textContent === "1 of 2 settled"; })()`),
	))
	progress, err := chromedp.Run(tab, chromedp.Evaluate[string](`(function () { var li = document.querySelector('#ba-list li[data-key="1"]');
		return [li.querySelector("[data-f=state]").textContent, li.querySelector("[data-f=title]").textContent, li.querySelector("[data-f=totals]").textContent,
			String(li.querySelector("progress").value) + "/" + li.querySelector("progress").max, String(li.querySelector("[data-act=cancel]").hidden)].join("|"); })()`))
	must(t, err)
	if progress != "running|#1 replay by admin|1 replayed · 0 still failed|1/2|false" {
		t.Fatalf("progress shows %q", progress)
	}
	screenshot(t, tab, "bulk-replay-progress")
	d.clock.Advance(time.Second)
	must(t, chromedp.Do(tab,
		poll(`(function () { var li = document.querySelector('#ba-list li[data-key="1"]'); return li && li.querySelector("[data-f=state]").textContent === "done"; })()`),
	))
	done, err := chromedp.Run(tab, chromedp.Evaluate[string](`(function () { var li = document.querySelector('#ba-list li[data-key="1"]');
		return [li.querySelector("[data-f=progress]").textContent, li.querySelector("[data-f=totals]").textContent, String(li.querySelector("[data-act=cancel]").hidden)].join("|"); })()`))
	must(t, err)
	if done != "2 of 2 settled|2 replayed · 0 still failed|true" {
		t.Fatalf("done shows %q", done)
	}
	must(t, chromedp.Do(tab, poll(`document.querySelectorAll("#dl-rows tr").length === 0`)))
	screenshot(t, tab, "bulk-replay-done")
	for _, id := range []int64{5, 6} {
		l, tl := d.Letter(id)
		if l.Status != record.DeadLetterReplayed || tl[len(tl)-1].BulkAction != 1 {
			t.Fatalf("letter %d: %+v, last event %+v", id, l, tl[len(tl)-1])
		}
	}

	// A discard by filter needs a reason.
	must(t, chromedp.Do(tab,
		chromedp.SetValue(chromedp.ID("f-error"), "mapping"),
		chromedp.Click(chromedp.CSS(`#dl-filters button[type=submit]`)),
		poll(`document.querySelectorAll("#dl-rows tr").length === 2`),
	))
	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.ID("ba-discard")),
		chromedp.WaitVisible(chromedp.ID("ba-dialog")),
		poll(`document.getElementById("ba-ok").textContent === "Discard 2"`),
	))
	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.ID("ba-ok")),
		poll(`document.getElementById("ba-error").textContent === "A reason is required."`),
		chromedp.SendKeys(chromedp.ID("ba-reason"), "contacts deleted upstream"),
		chromedp.Click(chromedp.ID("ba-ok")),
	))
	// The throttle waits on the queue's clock: move it on until the discard is done.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				d.clock.Advance(100 * time.Millisecond)
			}
		}
	}()
	must(t, chromedp.Do(tab,
		poll(`(function () { var li = document.querySelector('#ba-list li[data-key="2"]'); return li && li.querySelector("[data-f=state]").textContent === "done"; })()`),
	))
	a, err := d.q.BulkAction(context.Background(), 2)
	must(t, err)
	if a.Kind != record.BulkDiscard || a.Totals.Discarded != 2 || a.Reason != "contacts deleted upstream" {
		t.Fatalf("discard action %+v", a)
	}
}
