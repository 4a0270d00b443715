package admin_test

import (
	"context"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

func itemRowSel(id record.ItemID, act string) string {
	return `#items-rows button[data-act=` + act + `][data-id="` + strconv.FormatInt(int64(id), 10) + `"]`
}

// signIn opens the dashboard served at url and signs in with the test token.
func signIn(url string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Navigate(url+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.ID("login-submit")),
		chromedp.WaitVisible(chromedp.ID("app")),
	)
}

// wantErrorNotice fails the test unless the dashboard's notice, of what, shows as an error.
func wantErrorNotice(t *testing.T, tab context.Context, what string) {
	t.Helper()
	class, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.getElementById("notice").className`))
	must(t, err)
	if !strings.Contains(class, "is-error") {
		t.Errorf("%s's notice is not an error: class %q", what, class)
	}
}

// showItems selects state in the Items panel and waits for its rows.
func showItems(t *testing.T, tab context.Context, state string) {
	t.Helper()
	must(t, chromedp.Do(tab,
		chromedp.SetValue(chromedp.ID("i-state"), state),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("i-state").dispatchEvent(new Event("change"))`),
		poll(`document.getElementById("items-time-col").textContent !== "" && document.querySelector("#items-rows tr td span.badge.s-`+state+`") !== null`),
	))
}

// The Items panel: inspect a pending item, run one now, cancel one with a reason, and try to
// cancel a running one, which the answer says is not interrupted.
func TestDashboardItemsCancelAndRunNow(t *testing.T) {
	f := newItemsFixture(t)
	ctx := context.Background()
	spare := got[durable.Enqueued](t)(f.q.Enqueue(ctx, &importContact{Email: "spare@example"}, durable.WithDelay(2*time.Hour))).ID
	srv := httptest.NewServer(f.h)
	t.Cleanup(srv.Close)
	tab := newBrowser(t, 1280, 900)
	must(t, chromedp.Do(tab,
		signIn(srv.URL),
		chromedp.WaitVisible(chromedp.CSS(itemRowSel(f.pending, "inspect"))),
		chromedp.WaitVisible(chromedp.CSS(itemRowSel(spare, "cancel"))),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("items-title").scrollIntoView()`),
	))
	screenshot(t, tab, "items-pending")

	// Inspect: payload, state, next run.
	must(t, chromedp.Do(tab,
		poll(`(b => b ? (b.click(), true) : false)(document.querySelector(`+js(itemRowSel(f.pending, "inspect"))+`))`),
		chromedp.WaitVisible(chromedp.ID("item-dialog")),
		poll(`document.getElementById("item-payload").textContent.indexOf("later@example") >= 0`),
	))
	viewportScreenshot(t, tab, "item-inspect")
	closeDialog(t, tab, "item-dialog", "item-close")

	// Run now: confirmed, the item is due at once and the woken scheduler runs it.
	must(t, chromedp.Do(tab,
		poll(`(b => b ? (b.click(), true) : false)(document.querySelector(`+js(itemRowSel(f.pending, "run-now"))+`))`),
		chromedp.WaitVisible(chromedp.ID("confirm-dialog")),
		chromedp.Click(chromedp.ID("confirm-ok")),
		poll(`document.getElementById("notice").textContent.indexOf("is due now") >= 0`),
	))
	screenshot(t, tab, "item-run-now")
	if it := got[record.Item](t)(f.q.Item(ctx, f.pending)); it.State == record.StatePending && it.NextAt.After(time.Now()) {
		t.Errorf("after run now: %+v", it)
	}

	// Cancel with a reason.
	must(t, chromedp.Do(tab,
		poll(`(b => b ? (b.click(), true) : false)(document.querySelector(`+js(itemRowSel(spare, "cancel"))+`))`),
		chromedp.WaitVisible(chromedp.ID("item-cancel-dialog")),
		chromedp.Click(chromedp.ID("item-cancel-ok")),
		poll(`document.getElementById("item-cancel-error").textContent === "A reason is required."`),
		chromedp.SendKeys(chromedp.ID("item-cancel-reason"), "imported twice"),
	))
	viewportScreenshot(t, tab, "item-cancel-reason")
	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.ID("item-cancel-ok")),
		poll(`document.getElementById("notice").textContent.indexOf("cancelled") >= 0`),
		poll(`document.querySelector(`+js(itemRowSel(spare, "inspect"))+`) === null`),
	))
	screenshot(t, tab, "item-cancelled")
	if it := got[record.Item](t)(f.q.Item(ctx, spare)); it.State != record.StateCancelled {
		t.Errorf("after cancel: %s", it.State)
	}
	log := got[[]record.AuditEntry](t)(f.q.Audit(ctx, durable.AuditFilter{TargetKind: record.AuditTargetItem}))
	if len(log) != 2 || log[0].Action != record.AuditCancel || log[0].Detail != "reason: imported twice" || log[1].Action != record.AuditRunNow {
		t.Errorf("audit = %+v", log)
	}
	showItems(t, tab, "cancelled")
	screenshot(t, tab, "items-cancelled")

	// A running item: the cancel is refused, saying it runs and is not interrupted.
	showItems(t, tab, "running")
	must(t, chromedp.Do(tab,
		// Clicked in the page, when the row is there: the listing's refresh replaces the rows,
		// and a node found before a refresh is gone by the time a click by node reaches it.
		poll(`(b => b ? (b.click(), true) : false)(document.querySelector(`+js(itemRowSel(f.running, "cancel"))+`))`),
		chromedp.WaitVisible(chromedp.ID("item-cancel-dialog")),
		chromedp.SendKeys(chromedp.ID("item-cancel-reason"), "stuck?"),
		chromedp.Click(chromedp.ID("item-cancel-ok")),
		poll(`document.getElementById("notice").textContent.indexOf("not interrupted") >= 0`),
	))
	screenshot(t, tab, "item-cancel-running")
	wantErrorNotice(t, tab, "the refused cancel")
	if it := got[record.Item](t)(f.q.Item(ctx, f.running)); it.State != record.StateRunning {
		t.Errorf("the running item is %s after the refused cancel", it.State)
	}
}

// A succeeded item's detail shows its attempt as every other attempt is shown: its number, the
// outcome and the instance that made it, though the success is recorded on the item, not in an
// attempt row.
func TestDashboardSucceededItemShowsItsAttempt(t *testing.T) {
	f := newItemsFixture(t)
	ctx := context.Background()
	as := got[[]record.Attempt](t)(f.q.Attempts(ctx, f.succeeded))
	if len(as) != 1 || as[0].Outcome != record.OutcomeSucceeded || as[0].ID <= 0 || as[0].Instance == "" {
		t.Fatalf("attempts of the succeeded item: %+v", as)
	}
	srv := httptest.NewServer(f.h)
	t.Cleanup(srv.Close)
	tab := newBrowser(t, 1280, 900)
	must(t, chromedp.Do(tab, signIn(srv.URL)))
	showItems(t, tab, "succeeded")
	must(t, chromedp.Do(tab,
		// Clicked in the page, when the row is there: a refresh of the listing replaces its
		// rows, and a node found before one is gone when a click by node reaches it.
		poll(`(b => b ? (b.click(), true) : false)(document.querySelector(`+js(itemRowSel(f.succeeded, "inspect"))+`))`),
		chromedp.WaitVisible(chromedp.ID("item-dialog")),
		poll(`document.querySelectorAll("#item-attempts li").length === 1`),
	))
	viewportScreenshot(t, tab, "item-succeeded-attempt")
	text, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.getElementById("item-attempts").textContent`))
	must(t, err)
	for _, want := range []string{"#1", "succeeded", "on " + as[0].Instance + " at "} {
		if !strings.Contains(text, want) {
			t.Errorf("the succeeded item's attempts read %q; want %q in them", text, want)
		}
	}
	empty, err := chromedp.Run(tab, chromedp.Evaluate[bool](`document.getElementById("item-attempts-empty").hidden`))
	must(t, err)
	if !empty {
		t.Error(`"No attempts yet." shows beside the succeeded item's attempt`)
	}
	// The item's last error is of its last failed attempt or deferral, never of a success: the
	// heading must not say the error is the last attempt's.
	head, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.getElementById("item-error-head").textContent`))
	must(t, err)
	if !strings.Contains(head, "of the last failed attempt or deferral") || strings.Contains(head, "last queue attempt") {
		t.Errorf("the succeeded item's error heading reads %q", head)
	}
}
