package admin_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
)

// With many breakers (a fleet's endpoints), the panel shows the open ones first and at most a
// hundred cards, and says how many of each state there are: 1,500 cards made a page of 60,000
// pixels that took Chromium most of a core to draw.
func TestDashboardManyBreakersOpenFirst(t *testing.T) {
	reg := breaker.NewRegistry(breaker.Config{OpenDuration: 5 * time.Minute})
	for i := range 300 {
		p, err := reg.Gate(fmt.Sprintf("partner-%03d", i))
		must(t, err)
		p.Success()
	}
	for _, k := range []string{"partner-250", "partner-290", "partner-007"} {
		must(t, reg.Trip(k))
	}
	h, err := admin.New(admin.Config{Breakers: reg, Token: testToken})
	must(t, err)
	mux := http.NewServeMux()
	mux.Handle("/admin/", http.StripPrefix("/admin", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	tab := newBrowser(t, 1280, 900)
	must(t, chromedp.Do(tab,
		chromedp.Navigate(srv.URL+"/admin/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), testToken),
		chromedp.Click(chromedp.ID("login-submit")),
		chromedp.WaitVisible(chromedp.ID("breakers-more")),
	))
	keys, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#breakers > li")).map(function (li) { return li.dataset.key; })`))
	must(t, err)
	text, err := chromedp.Run(tab, chromedp.Text(chromedp.ID("breakers-more")))
	must(t, err)
	if want := "showing 100 of 300 breakers, the open and half-open first (3 open, 0 half-open, 297 closed)"; text != want {
		t.Errorf("%q, want %q", text, want)
	}
	if len(keys) != 100 || keys[0] != "partner-007" || keys[1] != "partner-250" || keys[2] != "partner-290" || keys[3] != "partner-000" {
		t.Errorf("%d cards, the first %v: want 100, the three open ones first, in key order, then the closed", len(keys), keys[:min(len(keys), 5)])
	}
}
