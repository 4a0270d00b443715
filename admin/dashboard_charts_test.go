package admin_test

// The Activity charts (ui/assets/charts.js): drawn from the samples the page takes at every
// refresh, so the tests drive time with the dashboard's own refresh — Pause updates holds it,
// Resume updates refreshes at once — and poll the DOM with a deadline for what follows.

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable/durabletest"
)

// chartSeries selects the path of a series in a chart.
func chartSeries(chart, series string) string {
	return `#` + chart + ` path[data-series=` + css(series) + `]`
}

// attr is the JavaScript expression of an attribute of the element matching sel ("" when
// there is none).
func attr(sel, name string) string {
	return `((document.querySelector(` + js(sel) + `) || { getAttribute: function () { return ""; } }).getAttribute(` + js(name) + `) || "")`
}

// values returns the values a series of a chart draws, oldest first.
func values(t *testing.T, tab context.Context, chart, series string) []float64 {
	t.Helper()
	s, err := chromedp.Run(tab, chromedp.Evaluate[string](attr(chartSeries(chart, series), "data-values")))
	must(t, err)
	var out []float64
	for _, f := range strings.Split(s, ",") {
		if f == "" {
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		must(t, err)
		out = append(out, v)
	}
	return out
}

// loginPaused signs in with updates paused: the page loads once, at sign-in, and takes one
// sample; every later sample is a click on Resume updates (see resumeOnce). The charts show
// the last 5 minutes, the live samples these tests drive (the fixture's history is older).
func loginPaused(t *testing.T, tab context.Context, url string) {
	t.Helper()
	must(t, chromedp.Do(tab,
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("pause").click()`),
		chromedp.SendKeys(chromedp.ID("token"), testToken),
		chromedp.Click(chromedp.ID("login-submit")),
		chromedp.WaitVisible(chromedp.ID("app")),
		chromedp.WaitVisible(chromedp.CSS(`#breakers li.breaker`)),
		poll(`document.getElementById("pause").getAttribute("aria-pressed") === "true"`),
		chromedp.Click(chromedp.ID("range-5m")),
		poll(`document.getElementById("range-5m").getAttribute("aria-pressed") === "true"`),
	))
}

// resumeOnce refreshes the paused page once (Resume updates refreshes at once), pauses it
// again, and waits until the breaker chart has taken the refresh's sample.
func resumeOnce(t *testing.T, tab context.Context) {
	t.Helper()
	n, err := chromedp.Run(tab, chromedp.Evaluate[int](`Number(document.getElementById("chart-breakers").dataset.samples || 0)`))
	must(t, err)
	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.ID("pause")),
		chromedp.Click(chromedp.ID("pause")),
		poll(`document.getElementById("pause").getAttribute("aria-pressed") === "true" && Number(document.getElementById("chart-breakers").dataset.samples) > `+strconv.Itoa(n)+
			` && Number(document.getElementById("chart-depth").dataset.samples) > `+strconv.Itoa(n)),
	))
}

func TestDashboardChartsDrawTheQueueOverTime(t *testing.T) {
	f := startDashboard(t)
	tab := newBrowser(t, 1280, 800)
	loginPaused(t, tab, f.url)

	// One sample, taken at sign-in, and no history on the server in the range: every chart
	// says that its live line starts now and that a line needs two samples.
	must(t, chromedp.Do(tab, poll(`document.getElementById("chart-depth").dataset.samples === "1"`)))
	for _, chart := range []string{"chart-rates", "chart-depth", "chart-breakers"} {
		got, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`(function () { var f = document.getElementById(`+js(chart)+`), n = f.querySelector(".chart-note");
		  return [f.dataset.ready, n ? n.textContent : ""]; })()`))
		must(t, err)
		if got[0] != "false" || !strings.Contains(got[1], "no history in this range") || !strings.Contains(got[1], "starts when this page opened") || !strings.Contains(got[1], "two samples") {
			t.Errorf("%s with one sample: ready %s, note %q; want a note saying the server has no history in the range and the live line starts when the page opened", chart, got[0], got[1])
		}
	}

	// A second sample: the depth chart has two points, the note is gone.
	resumeOnce(t, tab)
	must(t, chromedp.Do(tab, poll(`document.getElementById("chart-depth").dataset.ready === "true" && !document.querySelector("#chart-depth .chart-note")`)))
	pending := values(t, tab, "chart-depth", "pending")
	if len(pending) < 2 {
		t.Fatalf("the pending line has %d points after two samples; want 2", len(pending))
	}
	before := pending[len(pending)-1]

	// Four items enqueued: the pending line rises by four at the next sample.
	ctx := context.Background()
	for i := range 4 {
		_, err := f.q.Enqueue(ctx, &uiContact{Email: "chart-" + strconv.Itoa(i) + "@example"})
		must(t, err)
	}
	resumeOnce(t, tab)
	pending = values(t, tab, "chart-depth", "pending")
	if got := pending[len(pending)-1]; got != before+4 {
		t.Fatalf("pending drawn as %v after 4 enqueued; want the last %v", pending, before+4)
	}
	desc, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.querySelector("#chart-depth desc").textContent`))
	must(t, err)
	if want := "pending " + strconv.FormatFloat(before+4, 'f', -1, 64) + ","; !strings.Contains(desc, want) {
		t.Errorf("the depth chart describes itself as %q; want %q in it", desc, want)
	}
	// The line moves: its last point is higher on the page than its first.
	ys, err := chromedp.Run(tab, chromedp.Evaluate[[]float64](`(function () {
	  var d = document.querySelector(`+js(chartSeries("chart-depth", "pending"))+`).getAttribute("d");
	  var pts = d.match(/-?\d+(\.\d+)?,-?\d+(\.\d+)?/g).map(function (p) { return Number(p.split(",")[1]); });
	  return [pts[0], pts[pts.length - 1]]; })()`))
	must(t, err)
	if ys[1] >= ys[0] {
		t.Errorf("the pending line goes from y=%v to y=%v; want it to rise", ys[0], ys[1])
	}

	// They succeed: at the samples after, pending falls back and succeeded has a rate above
	// zero. The rate needs samples a second apart, so updates run on their own now.
	for done := 0; done < 4; {
		res := durabletest.Work(ctx, t, f.q, f.m, durabletest.AsInstance("worker-1"))
		if res.Succeeded == 0 {
			t.Fatalf("working the enqueued items: %+v", res)
		}
		done += res.Succeeded
	}
	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.ID("pause")),
		poll(`(function () { var v = `+attr(chartSeries("chart-rates", "succeeded"), "data-values")+`.split(",").map(Number);
		  return v.some(function (r) { return r > 0; }); })()`),
		poll(`Number(`+attr(chartSeries("chart-depth", "pending"), "data-values")+`.split(",").pop()) === `+strconv.FormatFloat(before, 'f', -1, 64)),
	))
	for _, s := range []string{"succeeded", "lettered", "cancelled"} {
		v := values(t, tab, "chart-rates", s)
		if len(v) < 2 {
			t.Errorf("the %s rate has %d points; want 2 or more", s, len(v))
		}
		for _, r := range v {
			if r < 0 {
				t.Errorf("the %s rate is drawn at %v", s, r)
			}
		}
	}

	// A count that falls (retention deleted succeeded items) has no rate over that interval,
	// rather than a negative one; an interval longer than the gap has none either.
	rates, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`(function () {
	  var g = window.switchboardCharts.gapMs;
	  var s = [{ t: 0, v: { c: 10 } }, { t: 2000, v: { c: 14 } }, { t: 4000, v: { c: 3 } }, { t: 4500, v: { c: 5 } }, { t: 6000, v: { c: 6 } }, { t: 6000 + g + 1, v: { c: 9 } }];
	  return window.switchboardCharts.rateIntervals(s, "c").map(function (i) { return i.t0 + "-" + i.t1 + ":" + i.r; }); })()`))
	must(t, err)
	gap, err := chromedp.Run(tab, chromedp.Evaluate[int](`window.switchboardCharts.gapMs`))
	must(t, err)
	want := []string{"0-2000:2", "2000-4000:null", "4000-6000:1.5", "6000-" + strconv.Itoa(6000+gap+1) + ":null"}
	if strings.Join(rates, " ") != strings.Join(want, " ") {
		t.Errorf("rateIntervals = %v; want %v", rates, want)
	}

	// A count made before its answer (count_age_ms: a state with many items is counted in full
	// every few seconds) stands at the time it was made: the rate is taken between two counts,
	// the answers that repeat a count add nothing, and two counts further apart than the gap
	// (but not than a few minutes) still give one.
	rates, err = chromedp.Run(tab, chromedp.Evaluate[[]string](`(function () {
	  var s = [{ t: 2000, made: { c: 0 }, v: { c: 100 } }, { t: 4000, made: { c: 0 }, v: { c: 100 } },
	           { t: 12000, made: { c: 10000 }, v: { c: 600 } }, { t: 14000, made: { c: 10000 }, v: { c: 600 } },
	           { t: 40000, made: { c: 40000 }, v: { c: 1200 } }];
	  return window.switchboardCharts.rateIntervals(s, "c").map(function (i) { return i.t0 + "-" + i.t1 + ":" + i.r; }); })()`))
	must(t, err)
	want = []string{"0-10000:50", "10000-40000:20"}
	if strings.Join(rates, " ") != strings.Join(want, " ") {
		t.Errorf("rateIntervals of kept counts = %v; want %v", rates, want)
	}
	// One kept count carried by two answers whose latencies differ by more than a second is
	// one sample, not an interval without a rise.
	rates, err = chromedp.Run(tab, chromedp.Evaluate[[]string](`(function () {
	  var s = [{ t: 10000, made: { c: 9500 }, v: { c: 50000 } }, { t: 12100, made: { c: 10700 }, v: { c: 50000 } },
	           { t: 20600, made: { c: 20000 }, v: { c: 52100 } }];
	  return window.switchboardCharts.rateIntervals(s, "c").map(function (i) { return i.t0 + "-" + i.t1 + ":" + i.r; }); })()`))
	must(t, err)
	want = []string{"9500-20000:200"}
	if strings.Join(rates, " ") != strings.Join(want, " ") {
		t.Errorf("rateIntervals of one kept count answered twice = %v; want %v", rates, want)
	}
}

func TestDashboardChartsShowABreakerGoingOpen(t *testing.T) {
	f := startDashboard(t)
	tab := newBrowser(t, 1280, 800)
	loginPaused(t, tab, f.url)
	resumeOnce(t, tab)
	row := `#chart-breakers g.band-row[data-key="mailer"]`
	states := func() []string {
		t.Helper()
		s, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll(`+js(row+` rect.band`)+`)).map(function (r) { return r.dataset.state; })`))
		must(t, err)
		return s
	}
	if got := states(); strings.Join(got, ",") != "closed" {
		t.Fatalf("mailer's band before the trip: %v; want closed", got)
	}
	// The open ones are drawn open, the half-open one half-open.
	for key, want := range map[string]string{"crm sync 100%": "open", "search-index": "half-open"} {
		got, err := chromedp.Run(tab, chromedp.Evaluate[string](attr(`#chart-breakers g.band-row[data-key=`+css(key)+`] rect.band`, "data-state")))
		must(t, err)
		if got != want {
			t.Errorf("%s is drawn %q; want %q", key, got, want)
		}
	}

	// Trip mailer through the API, as a script would.
	req, err := http.NewRequest(http.MethodPost, f.url+"api/breakers/mailer/trip", nil)
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+testToken)
	res, err := http.DefaultClient.Do(req)
	must(t, err)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || f.Breaker("mailer").State != breaker.StateOpen {
		t.Fatalf("trip: %s, breaker %s", res.Status, f.Breaker("mailer").State)
	}
	resumeOnce(t, tab)
	if got := states(); strings.Join(got, ",") != "closed,open" {
		t.Fatalf("mailer's band after the trip: %v; want closed, then open", got)
	}
	// The open band starts where the closed one ends, and ends at the last sample.
	ends, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`(function () { var r = document.querySelectorAll(`+js(row+` rect.band`)+`);
	  return [r[0].dataset.to, r[1].dataset.from]; })()`))
	must(t, err)
	if ends[0] != ends[1] {
		t.Errorf("closed until %s, open from %s; want the same sample", ends[0], ends[1])
	}
	// The chart's description and the row's title say it is open now; the card's countdown
	// runs.
	desc, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`[document.querySelector("#chart-breakers desc").textContent, document.querySelector(`+js(row+` title`)+`).textContent]`))
	must(t, err)
	if !strings.Contains(desc[0], "open: ") || !strings.Contains(desc[0], "mailer") || desc[1] != "mailer: open now" {
		t.Errorf("the chart describes itself as %q, the row as %q", desc[0], desc[1])
	}
	countdown := `Number(document.querySelector(` + js(breakerSel("mailer")+` [data-f=countdown]`) + `).dataset.remainingS)`
	must(t, chromedp.Do(tab, poll(countdown+` > 0`)))
	first, err := chromedp.Run(tab, chromedp.Evaluate[int](countdown))
	must(t, err)
	must(t, chromedp.Do(tab, poll(countdown+` < `+strconv.Itoa(first))))
}

func TestDashboardChartsScreenshot(t *testing.T) {
	f := startDashboard(t)
	tab := newBrowser(t, 1280, 800)
	login(t, tab, f.url)
	ctx := context.Background()
	for i := range 6 {
		_, err := f.q.Enqueue(ctx, &uiContact{Email: "shot-" + strconv.Itoa(i) + "@example"})
		must(t, err)
	}
	must(t, chromedp.Do(tab, poll(`Number(`+attr(chartSeries("chart-depth", "pending"), "data-values")+`.split(",").pop()) >= 6`)))
	durabletest.Work(ctx, t, f.q, f.m, durabletest.AsInstance("worker-1"))
	must(t, f.reg.Trip("mailer"))
	must(t, chromedp.Do(tab,
		poll(`document.querySelector('#chart-breakers g.band-row[data-key="mailer"] rect[data-state=open]')`),
		poll(`document.getElementById("chart-rates").dataset.ready === "true" && document.getElementById("chart-breakers").dataset.ready === "true"`),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("charts-title").scrollIntoView({ block: "start" })`),
	))

	// Readable at 1280×800: the whole panel fits in the window, every chart fits its column
	// with time labels on its axis, a legend and an accessible title.
	got, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`(function () {
	  var out = [], panel = document.getElementById("charts-title").closest("section").getBoundingClientRect();
	  if (panel.height > window.innerHeight) out.push("the panel is " + panel.height + " px high");
	  ["chart-rates", "chart-depth", "chart-breakers"].forEach(function (id) {
	    var f = document.getElementById(id), s = f.querySelector("svg"), r = s.getBoundingClientRect();
	    if (r.right > f.getBoundingClientRect().right + 0.5 || r.width < 300) out.push(id + " is " + r.width + " px wide");
	    var labels = Array.from(s.querySelectorAll(".axis-time text")).map(function (t) { return t.textContent; });
	    if (labels.length < 2 || !labels.every(function (l) { return /^\d\d:\d\d(:\d\d)?$/.test(l); })) out.push(id + " time labels " + labels);
	    if (f.querySelectorAll(".legend li").length < 3) out.push(id + " has no legend");
	    var title = document.getElementById(s.getAttribute("aria-labelledby").split(" ")[0]);
	    if (s.getAttribute("role") !== "img" || !title || !title.textContent) out.push(id + " has no accessible title");
	  });
	  ["chart-rates", "chart-depth"].forEach(function (id) {
	    if (document.querySelectorAll("#" + id + " .axis-value text").length < 2) out.push(id + " has no values on its axis");
	  });
	  return out; })()`))
	must(t, err)
	for _, p := range got {
		t.Error(p)
	}
	png, err := chromedp.Run(tab, chromedp.CaptureScreenshot())
	must(t, err)
	saveScreenshot(t, "dashboard-charts", png)
}

// A breaker key is any string: keys named like the properties every JavaScript object inherits
// ("constructor", "__proto__", "toString") are drawn like the others. They were looked up in
// plain objects and lost: never drawn, not counted among the breakers left out.
func TestDashboardChartsDrawKeysNamedLikeObjectProperties(t *testing.T) {
	f := startDashboard(t)
	keys := []string{"constructor", "__proto__", "toString"}
	f.reg.Declare(keys...)
	must(t, f.reg.Trip("__proto__"))
	tab := newBrowser(t, 1280, 800)
	loginPaused(t, tab, f.url)
	resumeOnce(t, tab)
	for _, key := range keys {
		want := "closed"
		if key == "__proto__" {
			want = "open"
		}
		got, err := chromedp.Run(tab, chromedp.Evaluate[string](attr(`#chart-breakers g.band-row[data-key=`+css(key)+`] rect.band`, "data-state")))
		must(t, err)
		if got != want {
			t.Errorf("breaker %q is drawn %q; want %q", key, got, want)
		}
	}
	leaked, err := chromedp.Run(tab, chromedp.Evaluate[bool](`Object.prototype.hasOwnProperty("troubled")`))
	must(t, err)
	if leaked {
		t.Error("the chart set a property on Object.prototype")
	}
}
