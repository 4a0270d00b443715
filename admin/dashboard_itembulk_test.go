package admin_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard-go/switchboard/durable/durabletest"
	"github.com/switchboard-go/switchboard/durable/record"
)

// itemActionJS evaluates to the fields of the listed item action id, joined by "|".
func itemActionJS(id record.BulkActionID, fields ...string) string {
	expr := `(function () { var li = document.querySelector('#ib-list li[data-key="` + fmt.Sprint(id) + `"]'); if (!li) return ""; return [`
	for i, f := range fields {
		if i > 0 {
			expr += ", "
		}
		if f == "cancel" {
			expr += `String(li.querySelector("[data-act=cancel]").hidden)`
		} else {
			expr += `li.querySelector("[data-f=` + f + `]").textContent`
		}
	}
	return expr + `].join("|"); })()`
}

// A cancel of the items parked on a breaker key from the Items panel: the filter (state parked,
// the key) selects them, "Apply to matching…" shows the dry run's count and sample to confirm,
// and the action's progress (settled of matched, totals, state) follows as the queue's
// scheduler cancels them one a second of the queue's clock. At 390 px the bar and the progress
// fit the screen.
func TestDashboardItemBulkCancelByKey(t *testing.T) {
	clock := durabletest.NewManualClock(time.Now().UTC().Truncate(time.Second))
	f := newItemBulkFixture(t, 3, clock)
	ctx := context.Background()
	srv := httptest.NewServer(f.h)
	t.Cleanup(srv.Close)
	tab := newBrowser(t, 1280, 800)
	must(t, chromedp.Do(tab,
		signIn(srv.URL),
		chromedp.WaitVisible(chromedp.ID("ib-start")),
		chromedp.SetValue(chromedp.ID("i-state"), "parked"),
		chromedp.SetValue(chromedp.ID("i-key"), "blocked.example"),
		chromedp.Click(chromedp.CSS(`#items-filters button[type=submit]`)),
		poll(`document.querySelectorAll("#items-rows tr").length === 3`),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("items-title").scrollIntoView()`),
		chromedp.Click(chromedp.ID("ib-start")),
		chromedp.WaitVisible(chromedp.ID("ib-dialog")),
		poll(`document.getElementById("ib-dialog-title").textContent === "Cancel 3 pending items?"`),
	))
	sample, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#ib-sample li")).map(function (l) { return l.textContent; })`))
	must(t, err)
	wantSample := []string{}
	for _, id := range f.parked {
		wantSample = append(wantSample, fmt.Sprintf("#%d crm.import-contact (parked on blocked.example)", id))
	}
	if fmt.Sprint(sample) != fmt.Sprint(wantSample) {
		t.Fatalf("sample %q, want %q", sample, wantSample)
	}
	if count, err := chromedp.Run(tab, chromedp.TextContent(chromedp.ID("ib-count"))); err != nil || count[:45] != "3 pending items match parked on blocked.examp" {
		t.Fatalf("count reads %q, %v", count, err)
	}
	if list, _ := f.q.ItemBulkActions(ctx, 0, 0); len(list) != 0 {
		t.Fatalf("the dry run stored %+v", list)
	}
	viewportScreenshot(t, tab, "item-bulk-cancel-confirm")

	// Without a reason the cancel is not started; with one, at one item a second of the queue's
	// clock, the first is cancelled at once and the next waits.
	must(t, chromedp.Do(tab,
		chromedp.SetValue(chromedp.ID("ib-rate"), "1"),
		chromedp.Click(chromedp.ID("ib-ok")),
		poll(`document.getElementById("ib-error").textContent === "A reason is required."`),
		chromedp.SendKeys(chromedp.ID("ib-reason"), "endpoint retired"),
		chromedp.Click(chromedp.ID("ib-ok")),
		poll(`document.getElementById("notice").textContent.indexOf("Bulk cancel #") === 0`),
	))
	list, err := f.q.ItemBulkActions(ctx, 0, 0)
	if err != nil || len(list) != 1 {
		t.Fatalf("actions %+v, %v", list, err)
	}
	id := list[0].ID
	must(t, chromedp.Do(tab, poll(itemActionJS(id, "progress")+` === "1 of 3 settled"`)))
	progress, err := chromedp.Run(tab, chromedp.Evaluate[string](itemActionJS(id, "state", "title", "filter", "totals", "cancel")))
	must(t, err)
	if want := fmt.Sprintf("running|#%d cancel by admin| parked on blocked.example|1 cancelled|false", id); progress != want {
		t.Fatalf("progress shows %q, want %q", progress, want)
	}
	screenshot(t, tab, "item-bulk-cancel-progress")

	// At 390 px: the bar and the running action fit the screen.
	phone := newBrowser(t, 390, 844)
	must(t, chromedp.Do(phone,
		signIn(srv.URL),
		poll(itemActionJS(id, "progress")+` === "1 of 3 settled"`),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("ib-bar").scrollIntoView()`),
	))
	fits, err := chromedp.Run(phone, chromedp.Evaluate[bool](`document.documentElement.scrollWidth <= document.documentElement.clientWidth &&
		document.getElementById("ib-list").getBoundingClientRect().right <= window.innerWidth && document.getElementById("ib-start").getBoundingClientRect().right <= window.innerWidth`))
	must(t, err)
	if !fits {
		t.Error("the bulk bar or its actions scroll sideways at 390 px")
	}
	viewportScreenshot(t, phone, "item-bulk-cancel-390")

	for range 2 {
		clock.Advance(time.Second)
	}
	must(t, chromedp.Do(tab, poll(itemActionJS(id, "state")+` === "done"`)))
	done, err := chromedp.Run(tab, chromedp.Evaluate[string](itemActionJS(id, "progress", "totals", "cancel")))
	must(t, err)
	if done != "3 of 3 settled|3 cancelled|true" {
		t.Fatalf("done shows %q", done)
	}
	must(t, chromedp.Do(tab, poll(`document.querySelectorAll("#items-rows tr").length === 0`)))
	screenshot(t, tab, "item-bulk-cancel-done")
	for _, it := range f.parked {
		if got, _ := f.q.Item(ctx, it); got.State != record.StateCancelled {
			t.Errorf("item %d: %s", it, got.State)
		}
	}
	for _, it := range f.later {
		if got, _ := f.q.Item(ctx, it); got.State != record.StatePending {
			t.Errorf("item %d outside the filter: %s", it, got.State)
		}
	}
}
