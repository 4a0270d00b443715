package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/switchboard-go/switchboard/admin"
)

const (
	viewerToken   = "s3cret-viewer-token"
	operatorToken = "s3cret-operator-token"
)

// rolesDashboard serves the dashboard of d's registry and queue again, under /admin/ of its own
// server, with a viewer's token (carol) and an operator's (otto) beside the admin's.
func rolesDashboard(t *testing.T, d *dashboard) string {
	t.Helper()
	h, err := admin.New(admin.Config{Breakers: d.reg, Queue: d.q, Sender: d.m, Token: testToken, RateLimits: uiRateLimits{},
		Tokens: []admin.BearerToken{{Token: viewerToken, Name: "carol", Role: admin.RoleViewer}, {Token: operatorToken, Name: "otto", Role: admin.RoleOperator}}})
	must(t, err)
	mux := http.NewServeMux()
	mux.Handle("/admin/", http.StripPrefix("/admin", d.record(h)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/admin/"
}

// loginAs signs in with tok and waits for the first data.
func loginAs(t *testing.T, tab context.Context, url, tok string) {
	t.Helper()
	must(t, chromedp.Do(tab,
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), tok),
		chromedp.Click(chromedp.ID("login-submit")),
		chromedp.WaitVisible(chromedp.ID("app")),
		chromedp.WaitVisible(chromedp.CSS(`#breakers li.breaker`)),
		chromedp.WaitVisible(chromedp.CSS(`#dl-rows tr`)),
		poll(`document.querySelector("#sched-rows tr [data-act=run-now]")`),
	))
}

// enabledButtonsJS lists the enabled buttons of the page, each as its id, data-act or text:
// what a user could press (or reach with Tab in an open dialog).
const enabledButtonsJS = `Array.from(document.querySelectorAll("button")).filter(function (b) { return !b.disabled; }).map(function (b) {
  return b.id || (b.dataset.act ? "[" + b.dataset.act + "]" : (b.closest("form.filters") ? "filters " : "") + b.textContent.trim());
})`

// The controls a viewer may use: they read, page, filter, open a view or close one.
var viewerControls = map[string]bool{
	"pause": true, "logout": true, "login-submit": true, "find-submit": true, "find-close": true, "filters Apply": true, "f-clear": true, "bulk-clear": true,
	"bulk-results-close": true, "dl-prev": true, "dl-next": true, "items-prev": true, "items-next": true,
	"audit-newest": true, "audit-older": true, "[inspect]": true, "[runs]": true, "Show all": true,
	"inspect-close": true, "runs-close": true, "item-close": true,
	"pause-cancel": true, "limit-cancel": true, "confirm-cancel": true, "discard-cancel": true, "sched-add-cancel": true, "ba-cancel": true, "item-cancel-back": true,
}

// A viewer's dashboard says the role beside the name and shows no enabled action, however the
// panels render and re-render; a change the viewer makes anyway, with the session's CSRF
// token, is answered 403 with the reason; nothing was changed.
func TestDashboardViewerSeesNoAction(t *testing.T) {
	d := startDashboard(t)
	url := rolesDashboard(t, d)
	for _, size := range []struct {
		w, h int
		name string
	}{{1280, 800, "roles-viewer"}, {390, 844, "roles-viewer-390"}} {
		tab := newBrowser(t, size.w, size.h)
		loginAs(t, tab, url, viewerToken)
		who, err := chromedp.Run(tab, chromedp.Text(chromedp.ID("principal")))
		must(t, err)
		if who != "Signed in as carol (viewer)" {
			t.Errorf("the session bar says %q", who)
		}
		check := func(when string) {
			t.Helper()
			enabled, err := chromedp.Run(tab, chromedp.Evaluate[[]string](enabledButtonsJS))
			must(t, err)
			for _, b := range enabled {
				if !viewerControls[b] {
					t.Errorf("%s: the viewer has the enabled action %q", when, b)
				}
			}
			// The actions are there, disabled, and say why.
			for _, sel := range []string{`#breakers [data-act=trip]`, `#breakers [data-act=reset]`, `#dl-rows [data-act=replay]`,
				`#sched-rows [data-act=run-now]`, `#ba-replay`, `#pause-open`, `#limit-open`, `#sched-add`} {
				ok, err := chromedp.Run(tab, chromedp.Evaluate[bool](`(function () { var l = document.querySelectorAll(`+js(sel)+`);
  return l.length > 0 && Array.from(l).every(function (b) { return b.disabled && /^Needs the (operator|admin) role; you are a viewer$/.test(b.title); }); })()`))
				must(t, err)
				if !ok {
					t.Errorf("%s: %s is missing, enabled, or does not say why", when, sel)
				}
			}
		}
		check("after the sign-in")
		// Selecting letters enables the bulk buttons for an operator; not for a viewer. And a
		// refresh that renders the panels again keeps every action disabled.
		must(t, chromedp.Do(tab,
			chromedp.Click(chromedp.CSS(rowSel(4)+` [data-f=select]`)),
			chromedp.Evaluate[chromedp.Void](`window.__updated = document.getElementById("updated").textContent`),
			poll(`document.getElementById("updated").textContent !== window.__updated`),
		))
		check("after a selection and a refresh")
		must(t, chromedp.Do(tab, chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`)))
		if size.w == 1280 {
			viewportScreenshot(t, tab, size.name) // the window, as the viewer first sees it
		}
		screenshot(t, tab, size.name+"-page")

		// The API refuses what the page does not offer, with the reason.
		answer, err := chromedp.Run(tab, chromedp.Evaluate[string](`fetch("api/session").then(function (r) { return r.json(); }).then(function (s) {
  return fetch("api/breakers/mailer/trip", { method: "POST", headers: { "X-CSRF-Token": s.csrf_token } });
}).then(function (r) { return r.text().then(function (t) { return r.status + " " + t; }); })`, chromedp.EvalAwaitPromise))
		must(t, err)
		if want := `403 {"error":"forbidden: carol is a viewer; tripping a breaker needs the operator role"}`; strings.TrimSpace(answer) != want {
			t.Errorf("a viewer's trip: %s; want %s", answer, want)
		}
	}
	if posts := d.Posts(); strings.Contains(posts, "/trip") || strings.Contains(posts, "/replay") {
		t.Errorf("a viewer changed something: %s", posts)
	}
	if d.Breaker("mailer").State.String() != "closed" {
		t.Error("the viewer's trip opened the mailer's breaker")
	}
}

// An operator's dashboard offers the actions on the work, and not the configuration's: adding
// a schedule and setting a concurrency limit need an admin.
func TestDashboardOperatorCannotConfigure(t *testing.T) {
	d := startDashboard(t)
	url := rolesDashboard(t, d)
	tab := newBrowser(t, 1280, 800)
	loginAs(t, tab, url, operatorToken)
	states, err := chromedp.Run(tab, chromedp.Evaluate[map[string]string](`(function () {
  var out = {};
  [["#breakers [data-act=reset]", "reset"], ["#dl-rows [data-act=inspect]", "inspect"], ["#sched-rows [data-act=run-now]", "run-now"],
   ["#ba-replay", "ba-replay"], ["#pause-open", "pause-open"], ["#limit-open", "limit-open"], ["#sched-add", "sched-add"]].forEach(function (p) {
    var b = document.querySelector(p[0]);
    out[p[1]] = !b ? "missing" : b.disabled ? "disabled: " + b.title : "enabled";
  });
  out.principal = document.getElementById("principal").textContent;
  return out;
})()`))
	must(t, err)
	want := map[string]string{
		"reset": "enabled", "inspect": "enabled", "run-now": "enabled", "ba-replay": "enabled", "pause-open": "enabled",
		"limit-open": "disabled: Needs the admin role; you are an operator", "sched-add": "disabled: Needs the admin role; you are an operator",
		"principal": "Signed in as otto (operator)",
	}
	for k, w := range want {
		if states[k] != w {
			t.Errorf("%s: %q, want %q", k, states[k], w)
		}
	}
}
