package main

// A browser test of the demo's dashboard, with chromedp driving headless Chromium through
// internal/browsertest, as the admin package's own browser tests do: without a chromium
// binary it skips, or fails when CI=true. Screenshots go to $SWITCHBOARD_SCREENSHOTS, else to
// the test's artifact directory (go test -artifacts); SWITCHBOARD_UPDATE_SCREENSHOT=1
// rewrites docs/demo-dashboard.png.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard-go/switchboard/internal/browsertest"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func poll(expr string, within time.Duration) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(within), chromedp.WithPollingInterval(50*time.Millisecond))
}

// syncBuffer is the demo's output, written by its goroutines and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The demo's dashboard as an operator watches it: the outage's breaker counts down, the charts
// draw the run (two points or more, the outage's band open), and after the summary a dead
// letter the demo left replays successfully.
func TestDemoDashboardInABrowser(t *testing.T) {
	tab := browsertest.New(t, 1280, 900, 120*time.Second)
	type served struct{ url, token string }
	listening, summarized, inspected := make(chan served, 1), make(chan served, 1), make(chan struct{})
	var out syncBuffer
	type result struct {
		rep *report
		err error
	}
	finished := make(chan result, 1)
	go func() {
		rep, err := run(context.Background(), &out, options{
			duration: 16 * time.Second, rate: 30, addr: "127.0.0.1:0", dir: t.TempDir(), quit: true,
			served:  func(url, token string) { listening <- served{url, token} },
			inspect: func(url, token string) { summarized <- served{url, token}; <-inspected },
		})
		finished <- result{rep, err}
	}()
	// ended waits for the demo's result once, whichever step takes it.
	var once sync.Once
	var res result
	ended := func() result {
		once.Do(func() { res = <-finished })
		return res
	}
	var s served
	select {
	case s = <-listening:
	case res = <-finished:
		once.Do(func() {})
		t.Fatalf("the demo ended before it served the dashboard: %v\n%s", res.err, out.String())
	}
	released := false
	release := func() {
		if !released {
			released = true
			close(inspected)
		}
	}
	defer func() {
		release()
		if r := ended(); r.err != nil {
			t.Errorf("the demo: %v\n%s", r.err, out.String())
		}
	}()

	// Sign in with the token the demo printed.
	must(t, chromedp.Do(tab,
		chromedp.Navigate(s.url),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), s.token),
		chromedp.Click(chromedp.ID("login-submit")),
		chromedp.WaitVisible(chromedp.ID("app")),
		chromedp.WaitVisible(chromedp.CSS(`#breakers li.breaker[data-key="outage"]`)),
	))

	// The outage opens its breaker; its countdown goes down while the operator watches.
	countdown := `document.querySelector('#breakers li.breaker[data-key="outage"] [data-f=countdown]')`
	must(t, chromedp.Do(tab, poll(countdown+`.dataset.remainingS`, 15*time.Second)))
	first, err := chromedp.Run(tab, chromedp.Evaluate[int](`Number(`+countdown+`.dataset.remainingS)`))
	must(t, err)
	must(t, chromedp.Do(tab, poll(`Number(`+countdown+`.dataset.remainingS) < `+strconv.Itoa(first), 10*time.Second)))
	png, err := chromedp.Run(tab, chromedp.CaptureScreenshot())
	must(t, err)
	browsertest.SaveScreenshot(t, "demo-breaker-open", png)

	// The charts have drawn the run so far: the queue's pending line has points, and the
	// outage's band on the breaker chart has been open.
	pending := `(document.querySelector('#chart-depth path[data-series="pending"]') || { getAttribute: function () { return ""; } }).getAttribute("data-values") || ""`
	must(t, chromedp.Do(tab, poll(pending+`.split(",").filter(function (v) { return v !== ""; }).length >= 2`, 15*time.Second)))
	must(t, chromedp.Do(tab, poll(`document.querySelector('#chart-breakers g.band-row[data-key="outage"] rect.band[data-state="open"]')`, 10*time.Second)))

	// After the summary the demo leaves half of the outage's dead letters: one replays now.
	select {
	case s = <-summarized:
	case r := <-finished:
		once.Do(func() { res = r })
		t.Fatalf("the demo ended without its summary: %v\n%s", r.err, out.String())
	}
	must(t, chromedp.Do(tab, poll(`document.querySelector("#dl-rows tr[data-key] [data-act=inspect]")`, 15*time.Second)))
	id, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.querySelector("#dl-rows tr[data-key]").dataset.key`))
	must(t, err)
	png, err = chromedp.Run(tab, chromedp.FullScreenshot(100))
	must(t, err)
	browsertest.SaveScreenshot(t, "demo-dashboard", png)
	png, err = chromedp.Run(tab, chromedp.CaptureScreenshot()) // the top: queue, breakers, charts
	must(t, err)
	browsertest.SaveScreenshot(t, "demo-dashboard-top", png)
	if os.Getenv("SWITCHBOARD_UPDATE_SCREENSHOT") == "1" {
		must(t, os.WriteFile(filepath.Join("..", "..", "docs", "demo-dashboard.png"), png, 0o644))
	}
	row := `#dl-rows tr[data-key="` + id + `"]`
	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.CSS(row+` [data-act=inspect]`)),
		chromedp.WaitVisible(chromedp.ID("inspect-dialog")),
		chromedp.Click(chromedp.ID("inspect-replay")),
		chromedp.WaitVisible(chromedp.ID("confirm-dialog")),
		chromedp.Click(chromedp.ID("confirm-ok")),
		poll(`document.querySelector("#inspect-facts .badge").textContent === "replayed"`, 15*time.Second),
	))
	if got := letterStatus(t, s, id); got != "replayed" {
		t.Errorf("dead letter %s is %q in the API after the replay; want replayed", id, got)
	}
	release()
}

// letterStatus reads a dead letter's status from the admin API.
func letterStatus(t *testing.T, s struct{ url, token string }, id string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.url+"api/dead-letters/"+id, nil)
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", req.URL, resp.Status)
	}
	var body map[string]any
	must(t, json.NewDecoder(resp.Body).Decode(&body))
	l, _ := body["dead_letter"].(map[string]any)
	return fmt.Sprint(l["status"])
}
