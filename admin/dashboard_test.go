package admin_test

// Browser tests of the dashboard (ui/) with chromedp driving headless Chromium. They run
// against the real handler over a real breaker registry and durable queue (startDashboard in
// dashboard_fixture_test.go), mounted under /admin/. Without a chromium binary they skip, or
// fail when CI=true. Screenshots go to $SWITCHBOARD_SCREENSHOTS, else to the test's artifact directory
// (go test -artifacts); set SWITCHBOARD_UPDATE_SCREENSHOT=1 to rewrite docs/dashboard.png.

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/internal/browsertest"
)

const testToken = "s3cret-admin-token"

// probeScript runs before the page's own scripts and records what a strict CSP refused and
// every uncaught error, so a test can fail on them; it also defines __visibleNotice.
const probeScript = `window.__problems = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__problems.push("CSP refused " + e.violatedDirective + ": " + e.blockedURI);
});
window.addEventListener("error", function (e) { window.__problems.push("error: " + e.message); });
window.addEventListener("unhandledrejection", function (e) { window.__problems.push("unhandled rejection: " + e.reason); });
window.__visibleNotice = function () { var n = document.getElementById("notice"); return !!(n && n.textContent && n.offsetHeight); };`

// newBrowser starts headless Chromium for one test (browsertest.New, 90 s) with a window of
// the given size, records what the page's CSP refuses and its uncaught errors, and fails the
// test on them at its end; it returns the tab's context.
func newBrowser(t *testing.T, width, height int) context.Context {
	t.Helper()
	tab := browsertest.New(t, width, height, 90*time.Second)
	_, err := chromedp.Call(tab, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: probeScript})
	must(t, err)
	t.Cleanup(func() {
		if tab.Err() != nil {
			return
		}
		problems, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`window.__problems || []`))
		if err != nil {
			t.Errorf("reading the page's errors: %v", err)
		}
		for _, p := range problems {
			t.Errorf("page: %s", p)
		}
	})
	return tab
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// css quotes s as a CSS attribute value.
func css(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// js quotes s as a JavaScript string literal.
func js(s string) string { return strconv.Quote(s) }

func breakerSel(key string) string { return `li.breaker[data-key=` + css(key) + `]` }
func rowSel(id int64) string       { return `#dl-rows tr[data-key="` + strconv.FormatInt(id, 10) + `"]` }

// poll waits until the JavaScript expression is truthy.
func poll(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(15*time.Second), chromedp.WithPollingInterval(50*time.Millisecond))
}

// serveAndLogIn serves h, opens it in a new browser tab, logs in with testToken and runs sel,
// which waits for the page; it returns the tab.
func serveAndLogIn(t *testing.T, h http.Handler, sel chromedp.Action[chromedp.Void]) context.Context {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	tab := newBrowser(t, 1280, 800)
	must(t, chromedp.Do(tab,
		chromedp.Navigate(srv.URL),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), testToken),
		chromedp.Click(chromedp.ID("login-submit")),
		sel,
	))
	return tab
}

// login signs in with the mouse and waits for the first data.
func login(t *testing.T, tab context.Context, url string) {
	t.Helper()
	must(t, chromedp.Do(tab,
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), testToken),
		chromedp.Click(chromedp.ID("login-submit")),
		chromedp.WaitVisible(chromedp.ID("app")),
		chromedp.WaitVisible(chromedp.CSS(`#breakers li.breaker`)),
		chromedp.WaitVisible(chromedp.CSS(`#dl-rows tr`)),
	))
}

// openInspect opens the inspect dialog of the dead letter id and waits for its data.
func openInspect(t *testing.T, tab context.Context, id int64) {
	t.Helper()
	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.CSS(rowSel(id)+` [data-act=inspect]`)),
		chromedp.WaitVisible(chromedp.ID("inspect-dialog")),
		poll(`document.getElementById("inspect-title").textContent === "Dead letter `+strconv.FormatInt(id, 10)+`"`),
	))
}

// closeDialog closes the dialog with the button closeID and waits for the dialog's close
// event: the page gives the focus back to the dialog's opener then, which scrolls it into
// view, after the dialog is hidden. A click aimed, or keys typed, before that can miss.
func closeDialog(t *testing.T, tab context.Context, dialogID, closeID string) {
	t.Helper()
	must(t, chromedp.Do(tab,
		chromedp.Evaluate[chromedp.Void](`window.__closed = false; document.getElementById(`+js(dialogID)+`).addEventListener("close", function () { window.__closed = true; }, { once: true })`),
		chromedp.Click(chromedp.ID(closeID)),
		poll(`window.__closed === true`),
	))
}

// tabTo presses Tab until the element matching sel has the focus.
func tabTo(t *testing.T, tab context.Context, sel string) {
	t.Helper()
	for range 100 {
		focused, err := chromedp.Run(tab, chromedp.Evaluate[bool](`document.activeElement === document.querySelector(`+js(sel)+`)`))
		must(t, err)
		if focused {
			return
		}
		must(t, chromedp.Do(tab, chromedp.KeyEvent(kb.Tab)))
	}
	active, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.activeElement.outerHTML.slice(0, 200)`))
	t.Fatalf("%s never got the focus with Tab; the focus is on %s", sel, active)
}

func TestDashboardKeyboardLoginBreakerCountdownAndReset(t *testing.T) {
	f := startDashboard(t)
	url := f.url
	tab := newBrowser(t, 1280, 800)
	key := "https://api.payments.example/v1/charge?region=eu"
	sel := breakerSel(key)

	// Log in with the keyboard only: the token field has the focus, Enter submits.
	must(t, chromedp.Do(tab,
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.ID("token")),
		poll(`document.activeElement && document.activeElement.id === "token"`),
		chromedp.KeyEvent(testToken+kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(sel)),
	))
	cookieVisible, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.cookie`))
	must(t, err)
	if strings.Contains(cookieVisible, sessionCookie) {
		t.Errorf("the session cookie is readable by the page: %q", cookieVisible)
	}
	tokenKept, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.getElementById("token").value`))
	must(t, err)
	if tokenKept != "" {
		t.Errorf("the token field still holds %q after sign-in", tokenKept)
	}

	// The open breaker's badge, failure count and a countdown that goes down.
	must(t, chromedp.Do(tab, poll(`document.querySelector(`+js(sel+` [data-f=countdown]`)+`).dataset.remainingS`)))
	state, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS(sel+` [data-f=state]`)))
	must(t, err)
	failures, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS(sel+` [data-f=failures]`)))
	must(t, err)
	if state != "open" || failures != "5 failures · this instance only" {
		t.Fatalf("badge shows %q, %q; want open, 5 failures", state, failures)
	}
	first, err := chromedp.Run(tab, chromedp.Evaluate[int](`Number(document.querySelector(`+js(sel+` [data-f=countdown]`)+`).dataset.remainingS)`))
	must(t, err)
	if first < 200 || first > 300 {
		t.Fatalf("countdown starts at %ds; want about 280s", first)
	}
	must(t, chromedp.Do(tab, poll(`Number(document.querySelector(`+js(sel+` [data-f=countdown]`)+`).dataset.remainingS) < `+strconv.Itoa(first))))
	text, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS(sel+` [data-f=countdown]`)))
	must(t, err)
	if !regexp.MustCompile(`^probe in 4 min [0-5][0-9] s$`).MatchString(text) {
		t.Errorf("countdown reads %q; want probe in 4 min ss s", text)
	}

	// Escape closes the confirmation without doing anything.
	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.CSS(sel+` [data-act=reset]`)),
		chromedp.WaitVisible(chromedp.ID("confirm-dialog")),
		chromedp.KeyEvent(kb.Escape),
		chromedp.WaitNotVisible(chromedp.ID("confirm-dialog")),
	))
	if b := f.Breaker(key); b.State != breaker.StateOpen {
		t.Fatalf("after Escape the breaker is %s; want it still open", b.State)
	}

	// Reset with Tab and Enter: the button, then the dialog's Reset (the focus starts on Cancel).
	must(t, chromedp.Do(tab, chromedp.Evaluate[chromedp.Void](`document.activeElement.blur()`)))
	tabTo(t, tab, sel+` [data-act=reset]`)
	must(t, chromedp.Do(tab,
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.ID("confirm-dialog")),
		poll(`document.activeElement.id === "confirm-cancel"`),
	))
	tabTo(t, tab, `#confirm-ok`)
	must(t, chromedp.Do(tab,
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitNotVisible(chromedp.ID("confirm-dialog")),
		chromedp.WaitVisible(chromedp.CSS(sel+`[data-state=closed]`)),
		// The focus went back to the Reset button.
		poll(`document.activeElement === document.querySelector(`+js(sel+` [data-act=reset]`)+`)`),
	))
	if b := f.Breaker(key); b.State != breaker.StateClosed || b.Failures != 0 {
		t.Fatalf("the API has the breaker %s with %d failures; want closed with 0", b.State, b.Failures)
	}

	// Trip with the keyboard: the Trip button becomes disabled once the breaker is open, and
	// the focus moves to its Reset button rather than falling to the page (it used to land on
	// the body, throwing a keyboard user back to the top).
	must(t, chromedp.Do(tab, chromedp.Evaluate[chromedp.Void](`document.activeElement.blur()`)))
	tabTo(t, tab, sel+` [data-act=trip]`)
	must(t, chromedp.Do(tab,
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.ID("confirm-dialog")),
		poll(`document.activeElement.id === "confirm-cancel"`),
	))
	tabTo(t, tab, `#confirm-ok`)
	must(t, chromedp.Do(tab,
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitNotVisible(chromedp.ID("confirm-dialog")),
		chromedp.WaitVisible(chromedp.CSS(sel+`[data-state=open]`)),
		poll(`document.activeElement === document.querySelector(`+js(sel+` [data-act=reset]`)+`)`),
	))
	// And back to closed with the mouse, for the checks below.
	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.CSS(sel+` [data-act=reset]`)),
		chromedp.WaitVisible(chromedp.ID("confirm-dialog")),
		chromedp.Click(chromedp.ID("confirm-ok")),
		chromedp.WaitVisible(chromedp.CSS(sel+`[data-state=closed]`)),
	))
	text, err = chromedp.Run(tab, chromedp.Text(chromedp.CSS(sel)))
	must(t, err)
	if !strings.Contains(text, "0 failures") || strings.Contains(text, "probe in") {
		t.Errorf("the reset breaker reads %q; want 0 failures and no countdown", text)
	}

	// Trip a key with a space and a percent sign: the escaped path segment reaches the API.
	other := "crm sync 100%"
	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.CSS(breakerSel(other)+` [data-act=reset]`)),
		chromedp.WaitVisible(chromedp.ID("confirm-dialog")),
		chromedp.Click(chromedp.ID("confirm-ok")),
		chromedp.WaitVisible(chromedp.CSS(breakerSel(other)+`[data-state=closed]`)),
		chromedp.Click(chromedp.CSS(breakerSel(other)+` [data-act=trip]`)),
		chromedp.WaitVisible(chromedp.ID("confirm-dialog")),
		chromedp.Click(chromedp.ID("confirm-ok")),
		chromedp.WaitVisible(chromedp.CSS(breakerSel(other)+`[data-state=open]`)),
	))
	if b := f.Breaker(other); b.State != breaker.StateOpen {
		t.Fatalf("tripped %q is %s in the API", other, b.State)
	}
}

func TestDashboardDeadLetters(t *testing.T) {
	f := startDashboard(t)
	url := f.url
	tab := newBrowser(t, 1280, 800)
	login(t, tab, url)

	// Newest first, failed ones by default, with the total.
	ids, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#dl-rows tr")).map(function (r) { return r.dataset.key; })`))
	must(t, err)
	if strings.Join(ids, ",") != "6,5,4,3,2,1" {
		t.Fatalf("rows %v; want 6,5,4,3,2,1", ids)
	}
	rng, err := chromedp.Run(tab, chromedp.Text(chromedp.ID("dl-range")))
	must(t, err)
	if rng != "1–6 of 6" {
		t.Errorf("range reads %q", rng)
	}
	// An error with markup is shown as text, not parsed.
	must(t, chromedp.Do(tab, poll(`document.querySelector(`+js(rowSel(4)+` [data-f=error]`)+`).textContent.indexOf("<script>") >= 0 && !document.querySelector("#dl-rows script")`)))

	// Inspect: pretty-printed payload, error, timeline; then replay from the dialog.
	openInspect(t, tab, 1)
	payload, err := chromedp.Run(tab, chromedp.TextContent(chromedp.ID("inspect-payload")))
	must(t, err)
	want := "{\n  \"email\": \"ann@example\",\n  \"name\": \"Ann\",\n  \"tags\": [\n    \"vip\",\n    \"eu\"\n  ]\n}"
	if payload != want {
		t.Errorf("payload shown as\n%s\nwant\n%s", payload, want)
	}
	errText, err := chromedp.Run(tab, chromedp.TextContent(chromedp.ID("inspect-error")))
	must(t, err)
	if errText != `mapping: field "email" is required` {
		t.Errorf("error shown as %q", errText)
	}
	attempts, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#inspect-timeline li[data-kind=attempt] strong")).map(function (e) { return e.textContent.trim(); })`))
	must(t, err)
	if strings.Join(attempts, ",") != "Queue attempt 1,Queue attempt 2,Queue attempt 3" {
		t.Errorf("timeline attempts %v", attempts)
	}
	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.ID("inspect-replay")),
		chromedp.WaitVisible(chromedp.ID("confirm-dialog")),
		chromedp.Click(chromedp.ID("confirm-ok")),
		poll(`document.querySelector("#inspect-facts .badge").textContent === "replayed"`),
		poll(`document.querySelector("#inspect-timeline li[data-kind=replay]")`),
		poll(`document.getElementById("inspect-replay").disabled`),
		chromedp.KeyEvent(kb.Escape),
		chromedp.WaitNotVisible(chromedp.ID("inspect-dialog")),
		chromedp.WaitNotPresent(chromedp.CSS(rowSel(1))),
	))
	if l, _ := f.Letter(1); l.Status != "replayed" {
		t.Fatalf("letter 1 is %s in the API; want replayed", l.Status)
	}

	// A string payload is shown as it is.
	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.CSS(rowSel(5)+` [data-act=inspect]`)),
		poll(`document.getElementById("inspect-payload").textContent === "not json: <b>raw</b> bytes"`),
	))
	closeDialog(t, tab, "inspect-dialog", "inspect-close")

	// Discard needs a reason.
	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.CSS(rowSel(2)+` [data-act=discard]`)),
		chromedp.WaitVisible(chromedp.ID("discard-dialog")),
		chromedp.Click(chromedp.ID("discard-ok")),
		poll(`document.getElementById("discard-error").textContent === "A reason is required."`),
		chromedp.WaitVisible(chromedp.ID("discard-dialog")),
		chromedp.SendKeys(chromedp.ID("discard-reason"), "record has no email"),
		chromedp.Click(chromedp.ID("discard-ok")),
		chromedp.WaitNotVisible(chromedp.ID("discard-dialog")),
		chromedp.WaitNotPresent(chromedp.CSS(rowSel(2))),
	))
	l, tl := f.Letter(2)
	if l.Status != "discarded" || len(tl) == 0 || tl[len(tl)-1].Reason != "record has no email" || tl[len(tl)-1].Actor != "admin" {
		t.Fatalf("letter 2 after discard: %s, timeline %+v", l.Status, tl)
	}

	// Bulk replay of 3 and 4: per-id outcomes, 4 fails again.
	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.CSS(rowSel(3)+` [data-f=select]`)),
		chromedp.Click(chromedp.CSS(rowSel(4)+` [data-f=select]`)),
		poll(`document.getElementById("bulk-count").textContent === "2 selected"`),
		chromedp.Click(chromedp.ID("bulk-replay")),
		chromedp.WaitVisible(chromedp.ID("confirm-dialog")),
		chromedp.Click(chromedp.ID("confirm-ok")),
		chromedp.WaitVisible(chromedp.ID("bulk-results")),
		chromedp.WaitVisible(chromedp.CSS(`#bulk-results-list li[data-id="3"][data-resolution=replayed]`)),
		chromedp.WaitVisible(chromedp.CSS(`#bulk-results-list li[data-id="4"][data-resolution=still_failed]`)),
	))
	res, err := chromedp.Run(tab, chromedp.Text(chromedp.ID("bulk-results")))
	must(t, err)
	if !strings.Contains(res, "1 of 2 replayed") || !strings.Contains(res, "card declined: <script>alert(1)</script>") {
		t.Errorf("bulk results read %q", res)
	}
	must(t, chromedp.Do(tab,
		chromedp.WaitNotPresent(chromedp.CSS(rowSel(3))),
		poll(`document.querySelector(`+js(rowSel(4)+` [data-f=retries]`)+`).textContent === "1"`),
		poll(`document.getElementById("bulk-count").textContent === "0 selected"`),
	))

	// Bulk discard of 5 and 6 with a reason.
	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.CSS(rowSel(5)+` [data-f=select]`)),
		chromedp.Click(chromedp.CSS(rowSel(6)+` [data-f=select]`)),
		chromedp.Click(chromedp.ID("bulk-discard")),
		chromedp.WaitVisible(chromedp.ID("discard-dialog")),
		chromedp.SendKeys(chromedp.ID("discard-reason"), "receipts resent by hand"),
		chromedp.Click(chromedp.ID("discard-ok")),
		chromedp.WaitVisible(chromedp.CSS(`#bulk-results-list li[data-id="5"][data-resolution=discarded]`)),
		chromedp.WaitVisible(chromedp.CSS(`#bulk-results-list li[data-id="6"][data-resolution=discarded]`)),
		chromedp.WaitNotPresent(chromedp.CSS(rowSel(5))),
		chromedp.WaitNotPresent(chromedp.CSS(rowSel(6))),
	))
	for _, id := range []int64{5, 6} {
		if l, tl := f.Letter(id); l.Status != "discarded" || tl[len(tl)-1].Reason != "receipts resent by hand" {
			t.Errorf("letter %d after bulk discard: %s, %+v", id, l.Status, tl[len(tl)-1])
		}
	}

	// The status filter shows the discarded ones; paging by 25 leaves one page.
	must(t, chromedp.Do(tab,
		chromedp.SetValue(chromedp.ID("f-status"), "discarded"),
		chromedp.Click(chromedp.CSS(`#dl-filters button[type=submit]`)),
		poll(`document.getElementById("dl-range").textContent === "1–3 of 3"`),
		chromedp.WaitVisible(chromedp.CSS(rowSel(2))),
	))

	// Every state-changing request went through the session with its CSRF token.
	posts := f.Posts()
	for _, p := range []string{"POST /api/session", "POST /api/dead-letters/1/replay", "POST /api/dead-letters/2/discard", "POST /api/dead-letters/replay", "POST /api/dead-letters/discard"} {
		if p == "POST /api/session" {
			continue // not behind auth(): it is the exchange itself
		}
		if !strings.Contains(posts, p) {
			t.Errorf("no %s among the accepted requests:\n%s", p, posts)
		}
	}
}

func TestDashboardPhoneWidthHasNoHorizontalScroll(t *testing.T) {
	url := startDashboard(t).url
	tab := newBrowser(t, 390, 844)
	login(t, tab, url)
	const noScroll = `document.documentElement.scrollWidth <= document.documentElement.clientWidth`
	check := func(what string) {
		t.Helper()
		ok, err := chromedp.Run(tab, chromedp.Evaluate[bool](noScroll))
		must(t, err)
		if !ok {
			w, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.documentElement.scrollWidth + " > " + document.documentElement.clientWidth`))
			t.Errorf("%s scrolls sideways at 390 px: %s", what, w)
		}
	}
	check("the dashboard")
	screenshot(t, tab, "dashboard-390")
	openInspect(t, tab, 1)
	check("the inspect dialog")
	fits, err := chromedp.Run(tab, chromedp.Evaluate[bool](`document.getElementById("inspect-dialog").getBoundingClientRect().right <= window.innerWidth`))
	must(t, err)
	if !fits {
		t.Error("the inspect dialog is wider than the screen")
	}
}

func TestDashboardScreenshot(t *testing.T) {
	url := startDashboard(t).url
	tab := newBrowser(t, 1280, 800)
	login(t, tab, url)
	must(t, chromedp.Do(tab,
		poll(`document.querySelector("[data-f=countdown]").dataset.remainingS`),
		poll(`document.querySelector("#sched-rows tr")`),
		chromedp.Click(chromedp.CSS(rowSel(4)+` [data-f=select]`)),
		chromedp.Click(chromedp.CSS(rowSel(3)+` [data-f=select]`)),
		chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`),
	))
	png, err := chromedp.Run(tab, chromedp.CaptureScreenshot())
	must(t, err)
	out := filepath.Join(browsertest.ScreenshotDir(t), "dashboard.png")
	must(t, os.WriteFile(out, png, 0o644))
	t.Logf("screenshot: %s", out)
	if os.Getenv("SWITCHBOARD_UPDATE_SCREENSHOT") != "" {
		must(t, os.WriteFile(filepath.Join("..", "docs", "dashboard.png"), png, 0o644))
		t.Log("wrote ../docs/dashboard.png")
	}
}
