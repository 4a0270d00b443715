package admin_test

// The dashboard as an operator reads it, at 1280×800 and at 390 px: what the layout and the
// wording must get right, asserted by measuring the page, with screenshots saved for a person
// to look at (see screenshotDir).

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/switchboard-go/switchboard/internal/browsertest"
)

// screenshot saves the whole page as name.png (see saveScreenshot).
func screenshot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	must(t, err)
	saveScreenshot(t, name, png)
}

// viewportScreenshot saves what the window shows as name.png (see saveScreenshot): a modal
// dialog, fixed in the window, as the operator sees it.
func viewportScreenshot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(tab, chromedp.CaptureScreenshot())
	must(t, err)
	saveScreenshot(t, name, png)
}

// saveScreenshot saves png as name.png in browsertest.ScreenshotDir.
func saveScreenshot(t *testing.T, name string, png []byte) { browsertest.SaveScreenshot(t, name, png) }

// layoutJS defines window.__layout, the measurements the layout tests make.
const layoutJS = `window.__layout = (function () {
  function visible(e) { return !!(e.offsetWidth || e.offsetHeight || e.getClientRects().length); }
  // lines returns the tops of the lines e's text is laid out on.
  function lines(e) {
    var tops = [];
    var w = document.createTreeWalker(e, NodeFilter.SHOW_TEXT);
    for (var n = w.nextNode(); n; n = w.nextNode()) {
      for (var i = 0; i < n.data.length; i++) {
        var r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 1);
        var rs = r.getClientRects();
        if (!rs.length) continue;
        var top = Math.round(rs[0].top);
        if (tops.indexOf(top) < 0 && tops.every(function (t) { return Math.abs(t - top) > 3; })) tops.push(top);
      }
    }
    return tops;
  }
  // midWord lists the line breaks of e's text nodes that fall between two letters or digits,
  // as "before|after" with some context.
  function midWord(e) {
    var out = [];
    var w = document.createTreeWalker(e, NodeFilter.SHOW_TEXT);
    for (var n = w.nextNode(); n; n = w.nextNode()) {
      var prevTop = null, prev = -1;
      for (var i = 0; i < n.data.length; i++) {
        var r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 1);
        var rs = r.getClientRects();
        if (!rs.length || /\s/.test(n.data[i])) continue;
        var top = Math.round(rs[0].top);
        if (prevTop !== null && top > prevTop + 3 && /[A-Za-z0-9]/.test(n.data[prev]) && /[A-Za-z0-9]/.test(n.data[i])) {
          out.push(n.data.slice(Math.max(0, prev - 12), prev + 1) + "|" + n.data.slice(i, i + 12));
        }
        prevTop = top; prev = i;
      }
    }
    return out;
  }
  return {
    visible: visible,
    lines: lines,
    // broken lists "selector: text: break" for every element of the selectors broken mid-word.
    broken: function (selectors) {
      var out = [];
      selectors.forEach(function (s) {
        Array.prototype.forEach.call(document.querySelectorAll(s), function (e) {
          if (!visible(e)) return;
          midWord(e).forEach(function (b) { out.push(s + ": " + e.textContent.trim().slice(0, 60) + ": " + b); });
        });
      });
      return out;
    },
    // multiline lists the elements of selector whose text takes more than one line.
    multiline: function (selector) {
      return Array.prototype.filter.call(document.querySelectorAll(selector), function (e) {
        return visible(e) && lines(e).length > 1;
      }).map(function (e) { return e.textContent.trim(); });
    },
    // badTimes lists the visible time elements whose text has no zone designator or that have
    // no datetime attribute.
    badTimes: function () {
      return Array.prototype.filter.call(document.querySelectorAll("time"), function (e) {
        return visible(e) && (!/\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:\d\d)/.test(e.textContent) || !e.getAttribute("datetime"));
      }).map(function (e) { return e.textContent; });
    },
    // emptyTables lists the visible tables without a row in their body.
    emptyTables: function () {
      return Array.prototype.filter.call(document.querySelectorAll("table"), function (e) {
        return visible(e) && !e.querySelector("tbody tr");
      }).map(function (e) { return e.className || e.id; });
    }
  };
})();`

// measure waits for ready, defines __layout in the page, and returns a function that
// evaluates a JavaScript expression whose value is a list of strings.
func measure(t *testing.T, tab context.Context, ready chromedp.Action[chromedp.Void]) func(expr string) []string {
	t.Helper()
	must(t, chromedp.Do(tab, ready, chromedp.Evaluate[chromedp.Void](layoutJS)))
	return func(expr string) []string {
		t.Helper()
		out, err := chromedp.Run(tab, chromedp.Evaluate[[]string](expr))
		must(t, err)
		return out
	}
}

func TestDashboardLayoutAt1280(t *testing.T) { testDashboardLayout(t, 1280, 800) }

func TestDashboardLayoutAt390(t *testing.T) { testDashboardLayout(t, 390, 844) }

func testDashboardLayout(t *testing.T, width, height int) {
	url := layoutDashboard(t).url
	tab := newBrowser(t, width, height)
	login(t, tab, url)
	eval := measure(t, tab, chromedp.WaitVisible(chromedp.CSS(rowSel(123))))
	screenshot(t, tab, "dashboard")
	noSideways := func(what string) {
		t.Helper()
		if w := eval(`(function () { var d = document.documentElement, o = [];
		  if (d.scrollWidth > d.clientWidth) o.push("page " + d.scrollWidth + " > " + d.clientWidth);
		  Array.prototype.forEach.call(document.querySelectorAll(".table-wrap"), function (w) {
		    if (__layout.visible(w) && w.scrollWidth > w.clientWidth) o.push("table " + w.scrollWidth + " > " + w.clientWidth);
		  });
		  return o; })()`); len(w) > 0 {
			t.Errorf("%s scrolls sideways at %d px: %v", what, width, w)
		}
	}
	noSideways("the dashboard")

	// Ids on one line; ids, names, keys and times never broken between two letters or digits.
	if ids := eval(`__layout.multiline("#dl-rows [data-f=id], #dl-rows [data-f=retries]")`); len(ids) > 0 {
		t.Errorf("ids or retry counts wrap: %q", ids)
	}
	if b := eval(`__layout.broken(["#dl-rows [data-f=id]", "#dl-rows [data-f=source]", "#dl-rows [data-f=key]", "#dl-rows time", ".breaker-key", ".badge", "#queue-stats dt"])`); len(b) > 0 {
		t.Errorf("broken mid-word at %d px:\n%s", width, strings.Join(b, "\n"))
	}

	// Every time says its zone; no 12-hour clock anywhere.
	if bad := eval(`__layout.badTimes()`); len(bad) > 0 {
		t.Errorf("times without a zone: %q", bad)
	}
	if ampm := eval(`(document.body.innerText.match(/\d\d? ?[AP]M\b/g) || [])`); len(ampm) > 0 {
		t.Errorf("12-hour times on the page: %q", ampm)
	}

	// No table header over an empty table: the empty Schedules say so in a sentence.
	if empty := eval(`__layout.emptyTables()`); len(empty) > 0 {
		t.Errorf("tables shown with a header and no rows: %q", empty)
	}
	sched, err := chromedp.Run(tab, chromedp.Evaluate[string](`(function () { var e = document.getElementById("sched-empty"); return __layout.visible(e) ? e.textContent : ""; })()`))
	must(t, err)
	if !strings.Contains(sched, "No schedule") {
		t.Errorf("the empty Schedules section reads %q; want a sentence saying there is none", sched)
	}

	// The two "dead" counts are labelled apart and explained.
	stats, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.getElementById("queue-stats").textContent`))
	must(t, err)
	for _, want := range []string{"Queue items", "Dead letters", "Awaiting action"} {
		if !strings.Contains(stats, want) {
			t.Errorf("the queue counts read %q; want %q among them", stats, want)
		}
	}
	if strings.Contains(stats, "Letters failed") {
		t.Errorf("the queue counts still read %q", stats)
	}
	hint, err := chromedp.Run(tab, chromedp.Evaluate[string](`(document.querySelector("#queue-hint") || {}).textContent || ""`))
	must(t, err)
	if !strings.Contains(hint, "dead letter") || !strings.Contains(hint, "replay") {
		t.Errorf("no explanation of the counts: %q", hint)
	}

	// A half-open breaker is calm: amber, not the alarm red of an open one, and says what
	// happens next.
	half := breakerSel("search-index") + ` [data-f=countdown]`
	got, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`(function () { var e = document.querySelector(`+js(half)+`);
	  var open = document.querySelector("li.breaker[data-state=open] [data-f=countdown]");
	  return [e.textContent, getComputedStyle(e).color, getComputedStyle(open).color, getComputedStyle(e).fontWeight]; })()`))
	must(t, err)
	if strings.Contains(got[0], "probe allowed") || !strings.Contains(got[0], "trial") || got[1] == got[2] || got[3] == "600" || got[3] == "700" {
		t.Errorf("half-open reads %q in %s (weight %s; open is %s); want its own calm wording and colour", got[0], got[1], got[3], got[2])
	}

	// A long error is cut in the list, and shown whole from there: a title, and a button.
	errCell := rowSel(10) + ` [data-f=error]`
	clamped, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`(function () { var s = document.querySelector(`+js(errCell+` .err-text`)+`);
	  return [String(s.scrollHeight > s.clientHeight + 1), s.title]; })()`))
	must(t, err)
	if clamped[0] != "true" || !strings.HasSuffix(clamped[1], "eu-west-1") {
		t.Errorf("the long error: cut %s, title %q; want it cut with the whole error as its title", clamped[0], clamped[1])
	}
	must(t, chromedp.Do(tab, chromedp.Evaluate[chromedp.Void](`document.activeElement.blur()`)))
	tabTo(t, tab, errCell+` button.more`)
	must(t, chromedp.Do(tab,
		chromedp.KeyEvent(kb.Enter),
		poll(`document.querySelector(`+js(errCell+` button.more`)+`).getAttribute("aria-expanded") === "true"`),
		poll(`(function () { var s = document.querySelector(`+js(errCell+` .err-text`)+`); return s.scrollHeight <= s.clientHeight + 1; })()`),
	))
	// "Show all" is offered exactly where an error is cut (or was opened).
	offers := eval(`Array.prototype.filter.call(document.querySelectorAll("#dl-rows [data-f=error]"), function (c) {
	  var s = c.querySelector(".err-text"), cut = s.scrollHeight > s.clientHeight + 1 || c.classList.contains("is-open");
	  return cut !== __layout.visible(c.querySelector("button.more"));
	}).map(function (c) { return c.textContent; })`)
	if len(offers) > 0 {
		t.Errorf("errors whose Show all does not match whether they are cut: %q", offers)
	}
	if vis := eval(`[String(__layout.visible(document.querySelector(` + js(rowSel(2)+` button.more`) + `)))]`); vis[0] != "false" {
		t.Error("a short error offers to be shown whole")
	}
	noSideways("the dashboard with an error shown whole")
	screenshot(t, tab, "dashboard-error-open")

	// A batch letter's timeline says what happened, not "1. No events."; an attempt that took
	// no time shows one time, not the same time twice.
	openInspect(t, tab, 11)
	tl, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.getElementById("inspect-dialog").innerText`))
	must(t, err)
	if strings.Contains(tl, "No events") || !strings.Contains(tl, "batch run") || !strings.Contains(tl, `field "email" is required`) {
		t.Errorf("the batch letter's dialog reads:\n%s", tl)
	}
	if bad := eval(`__layout.badTimes()`); len(bad) > 0 {
		t.Errorf("times without a zone in the dialog: %q", bad)
	}
	must(t, chromedp.Do(tab, chromedp.Evaluate[chromedp.Void](`document.getElementById("inspect-timeline").scrollIntoView({block: "nearest"})`)))
	viewportScreenshot(t, tab, "inspect-batch")
	closeDialog(t, tab, "inspect-dialog", "inspect-close")
	openInspect(t, tab, 10)
	twice := eval(`Array.prototype.filter.call(document.querySelectorAll("#inspect-timeline li"), function (li) {
	  var ts = Array.prototype.map.call(li.querySelectorAll("time"), function (e) { return e.textContent; });
	  return ts.length !== 1 || ts.some(function (x, i) { return ts.indexOf(x) !== i; });
	}).map(function (li) { return li.innerText; })`)
	if len(twice) > 0 {
		t.Errorf("timeline entries without exactly one time: %q", twice)
	}
	took, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.getElementById("inspect-timeline").innerText`))
	must(t, err)
	if !strings.Contains(took, "took 1.5 s") || !strings.Contains(took, "took 0 ms") {
		t.Errorf("the attempts do not say how long they took:\n%s", took)
	}
	if bad := eval(`__layout.badTimes()`); len(bad) > 0 {
		t.Errorf("times without a zone in the dialog: %q", bad)
	}
	if b := eval(`__layout.broken(["#inspect-facts dd", "#inspect-timeline time"])`); len(b) > 0 {
		t.Errorf("broken mid-word in the dialog:\n%s", strings.Join(b, "\n"))
	}
	must(t, chromedp.Do(tab, chromedp.Evaluate[chromedp.Void](`document.getElementById("inspect-timeline").scrollIntoView({block: "nearest"})`)))
	viewportScreenshot(t, tab, "inspect-attempts")
}

// A notice is about the last action: it goes away after a while, and as soon as the next
// action starts. It used to stay on screen, however stale.
func TestDashboardNoticeExpires(t *testing.T) {
	url := startDashboard(t).url
	tab := newBrowser(t, 1280, 800)
	login(t, tab, url)
	// Every notice shown is recorded as [text, its time], however short it lives.
	must(t, chromedp.Do(tab, chromedp.Evaluate[chromedp.Void](`window.__notices = [];
	  new MutationObserver(function () {
	    var n = document.getElementById("notice");
	    if (n.textContent) window.__notices.push([n.textContent, (n.querySelector("time") || {}).textContent || ""]);
	  }).observe(document.getElementById("notice"), { childList: true, subtree: true, characterData: true });`)))
	reset := func(key string) {
		t.Helper()
		must(t, chromedp.Do(tab,
			chromedp.Click(chromedp.CSS(breakerSel(key)+` [data-act=reset]`)),
			chromedp.WaitVisible(chromedp.ID("confirm-dialog")),
			chromedp.Click(chromedp.ID("confirm-ok")),
			chromedp.WaitVisible(chromedp.CSS(breakerSel(key)+`[data-state=closed]`)),
			poll(`__notices.some(function (n) { return n[0].indexOf(`+js(key)+`) >= 0; })`),
		))
	}
	// The lifetime is read from the element (data-ttl-ms), so the test need not wait for the
	// default one.
	must(t, chromedp.Do(tab, chromedp.Evaluate[chromedp.Void](`document.getElementById("notice").dataset.ttlMs = "400"`)))
	reset("mailer")
	stamp, err := chromedp.Run(tab, chromedp.Evaluate[string](`__notices.filter(function (n) { return n[0].indexOf("mailer") >= 0; })[0][1]`))
	must(t, err)
	if !strings.HasSuffix(stamp, "Z") {
		t.Errorf("the notice's time reads %q; want a time with its zone", stamp)
	}
	must(t, chromedp.Do(tab, poll(`!__visibleNotice()`)))

	// The next action clears it at once.
	must(t, chromedp.Do(tab, chromedp.Evaluate[chromedp.Void](`document.getElementById("notice").dataset.ttlMs = "600000"`)))
	reset("search-index")
	must(t, chromedp.Do(tab,
		poll(`__visibleNotice() && document.getElementById("notice").textContent.indexOf("search-index") >= 0`),
		chromedp.Click(chromedp.CSS(breakerSel("mailer")+` [data-act=trip]`)),
		chromedp.WaitVisible(chromedp.ID("confirm-dialog")),
		poll(`!__visibleNotice()`),
		chromedp.KeyEvent(kb.Escape),
	))
}

// Times read the same whatever the operator's zone: shown in UTC with their Z (the local
// time, with its offset, in the title), and the From/To filters read as UTC unless they give
// a zone. The browser runs in India (+05:30) so that a local reading would show.
func TestDashboardTimesAndFiltersAreUTC(t *testing.T) {
	url := startDashboard(t).url
	tab := newBrowser(t, 1280, 800)
	_, err := chromedp.Call(tab, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Kolkata"})
	must(t, err)
	login(t, tab, url)
	eval := measure(t, tab, poll(`document.querySelector("#sched-rows tr")`))
	if bad := eval(`__layout.badTimes()`); len(bad) > 0 {
		t.Errorf("times without a zone: %q", bad)
	}
	title := eval(`[document.querySelector(` + js(rowSel(4)+` time`) + `).title, document.querySelector(` + js(rowSel(4)+` time`) + `).textContent]`)
	if !strings.HasSuffix(title[0], "+05:30") || !strings.HasSuffix(title[1], "Z") {
		t.Errorf("a time reads %q with the title %q; want UTC, and the local time in the title", title[1], title[0])
	}

	// The run log: one time per run with how long it took.
	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.CSS(`#sched-rows tr[data-key="crm-pull"] [data-act=runs]`)),
		chromedp.WaitVisible(chromedp.ID("runs-dialog")),
	))
	runs, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.getElementById("runs-list").innerText`))
	must(t, err)
	if !strings.Contains(runs, "took 4 s") || strings.Contains(runs, "→") {
		t.Errorf("the run log reads %q", runs)
	}
	if bad := eval(`__layout.badTimes()`); len(bad) > 0 {
		t.Errorf("times without a zone in the run log: %q", bad)
	}
	closeDialog(t, tab, "runs-dialog", "runs-close")

	// A From that is not a time is refused, naming it, and nothing is filtered.
	must(t, chromedp.Do(tab,
		chromedp.SendKeys(chromedp.ID("f-from"), "yesterday"),
		chromedp.Click(chromedp.CSS(`#dl-filters button[type=submit]`)),
		poll(`document.getElementById("notice").textContent.indexOf('From "yesterday" is not a time') >= 0`),
		poll(`document.getElementById("f-from").getAttribute("aria-invalid") === "true"`),
		poll(`document.getElementById("dl-range").textContent === "1–6 of 6"`),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("f-from").value = ""`),
	))
	// To, before letter 4 was created: as UTC without a zone, and the same instant with one.
	created := eval(`[document.querySelector(` + js(rowSel(4)+` time`) + `).textContent]`)[0]
	at, err := time.Parse(time.RFC3339, created)
	must(t, err)
	for _, to := range []string{created, at.In(time.FixedZone("", 5*3600+1800)).Format("2006-01-02T15:04:05-07:00"), strings.TrimSuffix(created, "Z")} {
		must(t, chromedp.Do(tab,
			chromedp.Evaluate[chromedp.Void](`document.getElementById("f-to").value = `+js(to)),
			chromedp.Click(chromedp.CSS(`#dl-filters button[type=submit]`)),
			poll(`document.getElementById("dl-range").textContent === "1–3 of 3"`),
			chromedp.WaitVisible(chromedp.CSS(rowSel(3))),
			chromedp.Click(chromedp.ID("f-clear")),
			poll(`document.getElementById("dl-range").textContent === "1–6 of 6"`),
		))
	}
}
