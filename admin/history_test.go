package admin_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/durabletest"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// historyQueue is a queue whose history the test wrote: minutes of the past the dashboard was
// not open for. It records the since each call asked for.
type historyQueue struct {
	*durable.Queue
	minutes []durable.HistoryMinute
	asked   *[]time.Time
}

func (h historyQueue) History(_ context.Context, since time.Time) ([]durable.HistoryMinute, error) {
	if h.asked != nil {
		*h.asked = append(*h.asked, since)
	}
	var out []durable.HistoryMinute
	for _, m := range h.minutes {
		if !m.Minute.Before(since.Truncate(time.Minute)) {
			out = append(out, m)
		}
	}
	return out, nil
}

// noHistoryQueue is a queue whose driver keeps no history.
type noHistoryQueue struct{ *durable.Queue }

func (noHistoryQueue) History(context.Context, time.Time) ([]durable.HistoryMinute, error) {
	return nil, fmt.Errorf("%w: the queue's driver does not implement driver.HistoryStore", durable.ErrNoHistory)
}

// outage is an hour of history ending at the minute before now: quiet, then from 45 to 35
// minutes ago items dying (12 a minute, the letters awaiting action rising with them) while
// the breaker "ledger" is open, then quiet again but for a half-open of "ledger" 30 minutes
// ago, in a minute it was otherwise closed (shorter than a refresh: no page would have seen
// it).
func outage(now time.Time) []durable.HistoryMinute {
	now = now.UTC().Truncate(time.Minute)
	var out []durable.HistoryMinute
	letters := 6
	for ago := 59; ago >= 1; ago-- {
		m := durable.HistoryMinute{Minute: now.Add(-time.Duration(ago) * time.Minute), Instances: 2,
			Outcomes: map[record.Settled]int64{record.SettledSucceeded: 30}}
		pending := int64(5)
		switch {
		case ago <= 45 && ago >= 35:
			m.Outcomes = map[record.Settled]int64{record.SettledDead: 12, record.SettledRefused: 40}
			letters += 12
			pending = int64(5 + 20*(46-ago))
			m.Breakers = map[string]breaker.State{"ledger": breaker.StateOpen}
		case ago == 30:
			m.Breakers = map[string]breaker.State{"ledger": breaker.StateHalfOpen}
		}
		m.Items = map[record.ItemState]int64{record.StatePending: pending, record.StateRunning: 2, record.StateCancelled: 0}
		m.DeadLetters = map[record.DeadLetterStatus]int{record.DeadLetterFailed: letters}
		out = append(out, m)
	}
	return out
}

// GET /api/history answers the queue's minutes from since (default the last 24 h) with their
// outcomes, gauges and breaker states; it needs a session or the token (401), names since
// when it is not a time, is further back than the history is kept or in the future, and
// names an unknown parameter (400); a queue without a history is a 404 naming admin.History.
func TestHistoryRoute(t *testing.T) {
	f := newFixture(t, durable.Config{})
	var asked []time.Time
	now := time.Now()
	h, err := admin.New(admin.Config{Queue: historyQueue{Queue: f.q, minutes: outage(now), asked: &asked}, Sender: f.m, Token: token})
	must(t, err)

	res := do(t, h, "GET", "/api/history", "")
	want(t, res, http.StatusUnauthorized)

	res = auth(t, h, "GET", "/api/history", "")
	want(t, res, http.StatusOK)
	if len(asked) != 1 || asked[0].Before(now.Add(-24*time.Hour-time.Minute)) || asked[0].After(time.Now().Add(-24*time.Hour)) {
		t.Fatalf("the route asked for the history since %v; want 24 h ago", asked)
	}
	minutes, _ := res.body["minutes"].([]any)
	if len(minutes) != 59 {
		t.Fatalf("%d minutes answered; want 59", len(minutes))
	}
	m := minutes[59-40].(map[string]any) // 40 minutes ago: the outage
	items, _ := m["items"].(map[string]any)
	letters, _ := m["dead_letters"].(map[string]any)
	outcomes, _ := m["outcomes"].(map[string]any)
	brk, _ := m["breakers"].(map[string]any)
	if m["instances"] != float64(2) || outcomes["dead"] != float64(12) || items["pending"] != float64(125) || letters["failed"] != float64(78) || brk["ledger"] != "open" {
		t.Fatalf("the minute 40 minutes ago = %v; want 2 instances, 12 dead, 125 pending, 78 letters failed, ledger open", m)
	}
	if half := minutes[59-30].(map[string]any)["breakers"].(map[string]any); half["ledger"] != "half-open" {
		t.Fatalf("the minute 30 minutes ago has breakers %v; want ledger half-open", half)
	}
	if _, err := time.Parse(time.RFC3339, m["minute"].(string)); err != nil {
		t.Fatalf("minute %v is not an RFC 3339 time", m["minute"])
	}

	since := now.Add(-10 * time.Minute).UTC().Format(time.RFC3339)
	res = auth(t, h, "GET", "/api/history?since="+url.QueryEscape(since), "")
	want(t, res, http.StatusOK)
	if minutes, _ := res.body["minutes"].([]any); len(minutes) != 10 && len(minutes) != 9 {
		t.Fatalf("since 10 minutes ago: %d minutes; want 9 or 10", len(minutes))
	}

	for _, bad := range []string{"since=yesterday", "since=" + url.QueryEscape(now.Add(-26*time.Hour).UTC().Format(time.RFC3339)),
		"since=" + url.QueryEscape(now.Add(time.Hour).UTC().Format(time.RFC3339)), "from=2026-01-01T00:00:00Z"} {
		res := auth(t, h, "GET", "/api/history?"+bad, "")
		want(t, res, http.StatusBadRequest)
		name, _, _ := strings.Cut(bad, "=")
		if msg, _ := res.body["error"].(string); !strings.Contains(msg, name) {
			t.Errorf("?%s: error %q does not name %s", bad, msg, name)
		}
	}

	// A *durable.Queue whose driver keeps no history: 404 saying so, not a server error.
	h, err = admin.New(admin.Config{Queue: noHistoryQueue{f.q}, Sender: f.m, Token: token})
	must(t, err)
	res = auth(t, h, "GET", "/api/history", "")
	want(t, res, http.StatusNotFound)
	if msg, _ := res.body["error"].(string); !strings.Contains(msg, "keeps no history") {
		t.Errorf("404 says %q; want it to say the queue keeps no history", msg)
	}

	h, err = admin.New(admin.Config{Queue: downQueue{}, Sender: nopSender{}, Token: token})
	must(t, err)
	res = auth(t, h, "GET", "/api/history", "")
	want(t, res, http.StatusNotFound)
	if msg, _ := res.body["error"].(string); !strings.Contains(msg, "admin.History") {
		t.Errorf("404 says %q; want it to name admin.History", msg)
	}
}

// historyDashboard serves the browser tests' dashboard over a queue whose history holds the
// outage (see outage): the page is opened after it.
func historyDashboard(t *testing.T) string {
	t.Helper()
	d := startDashboard(t)
	h, err := admin.New(admin.Config{Breakers: d.reg, Queue: historyQueue{Queue: d.q, minutes: outage(time.Now())}, Sender: d.m, Token: testToken})
	must(t, err)
	mux := http.NewServeMux()
	mux.Handle("/admin/", http.StripPrefix("/admin", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/admin/"
}

// shownOutage checks what the charts draw of the outage: the letters awaiting action rise to
// their peak, items die at 12 a minute (0.2 a second), the ledger breaker is open in the
// minutes of the outage and half-open in the minute 30 minutes ago.
func shownOutage(t *testing.T, tab context.Context) {
	t.Helper()
	must(t, chromedp.Do(tab,
		poll(`Number(document.getElementById("chart-depth").dataset.historyMinutes) > 0`),
		poll(`document.querySelector('#chart-breakers g.band-row[data-key="ledger"] rect[data-state=open]')`),
	))
	awaiting := values(t, tab, "chart-depth", "awaiting")
	peak := 0.0
	for _, v := range awaiting {
		peak = max(peak, v)
	}
	if peak != 138 {
		t.Errorf("the letters awaiting action drawn as %v; want them to reach 138", awaiting)
	}
	lettered := values(t, tab, "chart-rates", "lettered")
	died := 0
	for _, v := range lettered {
		if v == 0.2 {
			died++
		}
	}
	if died < 2 {
		t.Errorf("the dead-lettered rate drawn as %v; want 0.2 a second in the outage's minutes", lettered)
	}
	bands, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#chart-breakers g.band-row[data-key="ledger"] rect.band')).map(function (r) {
	  return r.dataset.state + " " + r.dataset.source + " " + r.dataset.from + " " + r.dataset.to; })`))
	must(t, err)
	now := time.Now().UTC().Truncate(time.Minute)
	var open, half bool
	for _, b := range bands {
		f := strings.Fields(b)
		from, _ := time.Parse(time.RFC3339, f[2])
		to, _ := time.Parse(time.RFC3339, f[3])
		ago := func(t time.Time) time.Duration { return now.Sub(t).Round(time.Minute) }
		switch {
		case f[0] == "open" && f[1] == "history" && ago(from) >= 44*time.Minute && ago(from) <= 46*time.Minute && ago(to) >= 33*time.Minute && ago(to) <= 35*time.Minute:
			open = true
		case f[0] == "half-open" && f[1] == "history" && ago(from) >= 29*time.Minute && ago(from) <= 31*time.Minute && to.Sub(from) == time.Minute:
			half = true
		}
	}
	if !open || !half {
		t.Errorf("ledger's bands %q; want it open from 45 to 34 minutes ago and half-open for the minute 30 minutes ago", bands)
	}
}

// A page opened after an outage shows it: the history on the server is drawn before the live
// samples, a breaker's half-open shorter than any refresh included; a reload shows it again.
// The range buttons choose how far back the charts go: 5 minutes leaves the outage out, 24 h
// keeps it.
func TestHistoryDashboardShowsAnOutage(t *testing.T) {
	u := historyDashboard(t)
	tab := newBrowser(t, 1280, 800)
	login(t, tab, u)
	must(t, chromedp.Do(tab, poll(`document.getElementById("range-1h").getAttribute("aria-pressed") === "true"`)))
	shownOutage(t, tab)
	must(t, chromedp.Do(tab, chromedp.Evaluate[chromedp.Void](`document.getElementById("charts-title").scrollIntoView({ block: "start" })`)))
	viewportScreenshot(t, tab, "history-outage")

	// A reload: the page starts over (and signs in again, its session held in memory), and
	// the history is read from the server again.
	must(t, chromedp.Do(tab, chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("token"))))
	login(t, tab, u)
	shownOutage(t, tab)
	must(t, chromedp.Do(tab, chromedp.Evaluate[chromedp.Void](`document.getElementById("charts-title").scrollIntoView({ block: "start" })`)))
	viewportScreenshot(t, tab, "history-reload")

	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.ID("range-5m")),
		poll(`!document.querySelector('#chart-breakers g.band-row[data-key="ledger"] rect[data-source=history]:not([data-state=closed])')`),
		chromedp.Click(chromedp.ID("range-24h")),
		poll(`document.querySelector('#chart-breakers g.band-row[data-key="ledger"] rect[data-state=open]')`),
	))
	desc, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.querySelector("#chart-breakers desc").textContent`))
	must(t, err)
	if !strings.Contains(desc, "ledger open") {
		t.Errorf("the breaker chart describes itself as %q; want the history's ledger open in it", desc)
	}

	narrow := newBrowser(t, 390, 844)
	login(t, narrow, u)
	shownOutage(t, narrow)
	must(t, chromedp.Do(narrow, chromedp.Evaluate[chromedp.Void](`document.getElementById("charts-title").scrollIntoView({ block: "start" })`)))
	got, err := chromedp.Run(narrow, chromedp.Evaluate[[]string](`(function () {
	  var out = [];
	  if (document.documentElement.scrollWidth > window.innerWidth + 1) out.push("the page scrolls sideways: " + document.documentElement.scrollWidth + " px");
	  var g = document.querySelector(".chart-range").getBoundingClientRect();
	  if (g.right > window.innerWidth) out.push("the range buttons stick out: " + g.right + " px");
	  return out; })()`))
	must(t, err)
	for _, p := range got {
		t.Error(p)
	}
	viewportScreenshot(t, narrow, "history-outage-390")
	must(t, chromedp.Do(narrow, chromedp.Evaluate[chromedp.Void](`document.getElementById("chart-breakers").scrollIntoView({ block: "start" })`)))
	viewportScreenshot(t, narrow, "history-breakers-390")
}

// An outage recorded while no page was open, through the real queue and its scheduler: items
// die and a breaker opens forty minutes ago (by the queue's clock), the scheduler stops, and
// only then is the route asked and the page opened: both show the minute, its three dead items
// and the open breaker.
func TestHistoryRecordedWhileNobodyWatched(t *testing.T) {
	ctx := context.Background()
	at := time.Now().Add(-40 * time.Minute)
	clock := durabletest.NewManualClock(at)
	reg := breaker.NewRegistry(breaker.Config{})
	reg.Declare("ledger")
	q := durabletest.NewQueue(t, durable.Config{Clock: clock, Logger: zap.NewNop(), PollInterval: 10 * time.Millisecond, Breakers: reg,
		Policy: retry.Policy{MaxAttempts: 1}, InstanceID: "worker-1"})
	durable.Register[*importContact](q, "crm.import-contact")
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, r *importContact) (mediator.Void, error) {
		return mediator.Void{}, errors.New("ledger: 503")
	})
	must(t, m.Build())
	must(t, q.Start(m))
	for _, email := range []string{"a@example", "b@example", "c@example"} {
		_, err := q.Enqueue(ctx, &importContact{Email: email})
		must(t, err)
	}
	// Polled with a deadline: the outcomes are in the database, where no channel says so.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(30 * time.Second); ; <-tick.C {
		st, err := q.Stats(ctx)
		must(t, err)
		if st.Counts[record.StateDead] == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("items not dead after 30 s: %v", st.Counts)
		}
	}
	must(t, reg.Trip("ledger"))
	must(t, q.Shutdown(ctx))

	h, err := admin.New(admin.Config{Queue: q, Breakers: reg, Sender: m, Token: testToken})
	must(t, err)
	res := do(t, h, "GET", "/api/history", "", "Authorization", "Bearer "+testToken)
	want(t, res, http.StatusOK)
	minutes, _ := res.body["minutes"].([]any)
	var found map[string]any
	for _, x := range minutes {
		if mi := x.(map[string]any); mi["minute"] == at.UTC().Truncate(time.Minute).Format(time.RFC3339) {
			found = mi
		}
	}
	if found == nil {
		t.Fatalf("no minute %s in the history %v", at.UTC().Truncate(time.Minute).Format(time.RFC3339), minutes)
	}
	outcomes, _ := found["outcomes"].(map[string]any)
	brk, _ := found["breakers"].(map[string]any)
	if outcomes["dead"] != float64(3) || brk["ledger"] != "open" || found["instances"] != float64(1) {
		t.Fatalf("the minute 40 minutes ago = %v; want 3 dead and ledger open, from one instance", found)
	}

	mux := http.NewServeMux()
	mux.Handle("/admin/", http.StripPrefix("/admin", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	tab := newBrowser(t, 1280, 800)
	login(t, tab, srv.URL+"/admin/")
	must(t, chromedp.Do(tab,
		poll(`Number(document.getElementById("chart-rates").dataset.historyMinutes) > 0`),
		poll(`document.querySelector('#chart-breakers g.band-row[data-key="ledger"] rect[data-state=open][data-source=history]')`),
	))
	lettered := values(t, tab, "chart-rates", "lettered")
	if !slices.Contains(lettered, 0.05) {
		t.Errorf("the dead-lettered rate drawn as %v; want 0.05 a second (3 in the minute)", lettered)
	}
}
