package admin_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
)

// nowLines returns the Now panel's lines as "kind: text".
func nowLines(t *testing.T, tab context.Context) []string {
	t.Helper()
	lines, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#now-list li")).map(function (li) {
		return li.dataset.kind + ": " + li.textContent; })`))
	must(t, err)
	return lines
}

// At 1280×800 the answer to "is anything wrong?" is above the fold: the Now panel, first on
// the page, names the open breakers, the half-open one, a key failing behind a closed breaker,
// the paused work and the dead letters
// awaiting action, each line linking to its panel; it used to take scrolling through 3,500 px.
func TestDashboardNowAnswersAboveTheFold(t *testing.T) {
	f := startDashboard(t)
	if _, err := f.q.Pause(context.Background(), durable.NameTarget("ChargeCard"), "admin"); err != nil {
		t.Fatal(err)
	}
	for _, size := range []struct{ w, h int }{{1280, 800}, {390, 844}} {
		tab := newBrowser(t, size.w, size.h)
		login(t, tab, f.url)
		must(t, chromedp.Do(tab, poll(`document.querySelector("#now-list li[data-kind=paused]") && document.querySelector("#now-list li[data-kind=letters]")`)))
		lines := nowLines(t, tab)
		all := strings.Join(lines, "\n")
		for _, want := range []string{
			"open: open 2 breakers open: crm sync 100% (probe in ",
			"https://api.payments.example/v1/charge?region=eu (probe in ",
			"half-open: half-open 1 breaker half-open, letting trial calls through: search-index",
			"failing: failing 1 key failing behind a closed breaker: mailer (1 failure)",
			"paused: paused 1 pause holds work back: ChargeCard",
			"letters: failed 6 dead letters await action; the newest",
		} {
			if !strings.Contains(all, want) {
				t.Errorf("at %d px the Now panel lacks %q:\n%s", size.w, want, all)
			}
		}
		// Each line links to the panel that deals with it.
		hrefs, err := chromedp.Run(tab, chromedp.Evaluate[string](`Array.from(document.querySelectorAll("#now-list a")).map(function (a) { return a.getAttribute("href"); }).join(" ")`))
		must(t, err)
		if hrefs != "#breakers-title #breakers-title #breakers-title #pauses-title #dl-title" {
			t.Errorf("the lines link to %q", hrefs)
		}
		if size.w == 1280 {
			// The sign-in's focus on the content used to scroll the top bar (the session, Find,
			// Log out) out of view.
			top, err := chromedp.Run(tab, chromedp.Evaluate[float64](`document.getElementById("session-bar").getBoundingClientRect().top`))
			must(t, err)
			if top < 0 {
				t.Errorf("the top bar is scrolled out of view after the sign-in (its top at %.0f px)", top)
			}
			bottom, err := chromedp.Run(tab, chromedp.Evaluate[float64](`document.getElementById("now-list").getBoundingClientRect().bottom`))
			must(t, err)
			if bottom > float64(size.h) {
				t.Errorf("the Now panel ends at %.0f px, below the fold of %d px", bottom, size.h)
			}
		}
		viewportScreenshot(t, tab, fmt.Sprintf("now-%d", size.w))
	}
}

// With nothing wrong the panel says so in one line, and lists nothing.
func TestDashboardNowSaysNothingIsWrong(t *testing.T) {
	h, err := admin.New(admin.Config{Breakers: breakersClosed(t), Token: testToken})
	must(t, err)
	tab := serveAndLogIn(t, h, chromedp.WaitVisible(chromedp.ID("now-ok")))
	if lines := nowLines(t, tab); len(lines) != 0 {
		t.Errorf("nothing is wrong, yet the panel lists %q", lines)
	}
}

// breakersClosed is a registry whose breakers are all closed.
func breakersClosed(t *testing.T) *breaker.Registry {
	t.Helper()
	reg := breaker.NewRegistry(breaker.Config{})
	reg.Declare("payments")
	reg.Declare("crm")
	return reg
}
