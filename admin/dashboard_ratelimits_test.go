package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/behaviors/ratelimit"
	"github.com/switchboard-go/switchboard/durable/durabletest"
)

// uiRateLimits is the dashboard fixture's rate limiter: a limit of this instance's and a
// fleet's limit whose store is away.
type uiRateLimits struct{}

func (uiRateLimits) Snapshot() []ratelimit.KeySnapshot {
	return []ratelimit.KeySnapshot{
		{Key: "https://api.payments.example/v1/charge", Rate: 100, Burst: 1, Available: 0, Waiting: 3, Refused: 12, Fleet: true, Fallback: true, Instances: 3, Leased: 4210},
		{Key: "crm", Rate: 5, Burst: 10, Available: 10, Instances: 1},
	}
}

func rateLimitRowSel(key string) string { return `#rate-limits-rows tr[data-key=` + css(key) + `]` }

// The dashboard lists each key's limit: the rate, what is free, waiting and refused, and a
// fleet's limit on its share while the store is away.
func TestDashboardRateLimits(t *testing.T) {
	f := startDashboard(t)
	tab := newBrowser(t, 1280, 900)
	login(t, tab, f.url)
	fleet := "https://api.payments.example/v1/charge"
	must(t, chromedp.Do(tab,
		chromedp.WaitVisible(chromedp.ID("rate-limits-title")),
		chromedp.WaitVisible(chromedp.CSS(rateLimitRowSel(fleet))),
		chromedp.WaitVisible(chromedp.CSS(rateLimitRowSel("crm"))),
	))
	fleetRow, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS(rateLimitRowSel(fleet))))
	must(t, err)
	localRow, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS(rateLimitRowSel("crm"))))
	must(t, err)
	for _, want := range []string{"100/s", "12", "fleet of 3", "4210 leased", "share"} {
		if !strings.Contains(fleetRow, want) {
			t.Errorf("the fleet's row %q lacks %q", fleetRow, want)
		}
	}
	for _, want := range []string{"5/s (burst 10)", "this instance only"} {
		if !strings.Contains(localRow, want) {
			t.Errorf("the local row %q lacks %q", localRow, want)
		}
	}
	screenshot(t, tab, "rate-limits")
}

// GET /api/rate-limits answers the limiter's snapshot, and 404 without one.
func TestRateLimitsRoute(t *testing.T) {
	for _, rl := range []admin.RateLimits{uiRateLimits{}, nil} {
		h, err := admin.New(admin.Config{Breakers: breakers(t), RateLimits: rl, Token: testToken})
		must(t, err)
		req := httptest.NewRequest(http.MethodGet, "/api/rate-limits", nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if rl == nil {
			if w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), "no rate limiter") {
				t.Fatalf("without a limiter: %d %s", w.Code, w.Body)
			}
			continue
		}
		var body struct {
			RateLimits []ratelimit.KeySnapshot `json:"rate_limits"`
		}
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &body) != nil || len(body.RateLimits) != 2 ||
			!body.RateLimits[0].Fallback || body.RateLimits[0].Instances != 3 || body.RateLimits[1].Available != 10 {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	}
}

// A route that takes no query parameter says so of one it is given, rather than listing an
// empty set of the parameters it wants.
func TestRouteWithoutParametersNamesNone(t *testing.T) {
	h, err := admin.New(admin.Config{Breakers: breakers(t), RateLimits: uiRateLimits{}, Token: testToken})
	must(t, err)
	req := httptest.NewRequest(http.MethodGet, "/api/rate-limits?limit=abc", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), `unknown query parameter \"limit\": this route takes none`) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}

// manyRateLimits is a limiter keyed by URL: more keys than the route lists.
type manyRateLimits int

func (n manyRateLimits) Snapshot() []ratelimit.KeySnapshot {
	out := make([]ratelimit.KeySnapshot, n)
	for i := range out {
		out[i] = ratelimit.KeySnapshot{Key: fmt.Sprintf("https://api.example/item/%05d", i), Rate: 1, Burst: 1, Instances: 1}
	}
	return out
}

// GET /api/rate-limits lists at most the first 500 keys, in key order, and says how many
// there are, so that a limiter keyed by URL does not answer megabytes to the dashboard.
func TestRateLimitsRouteBounded(t *testing.T) {
	for _, n := range []int{3, 500, 1200} {
		h, err := admin.New(admin.Config{Breakers: breakers(t), RateLimits: manyRateLimits(n), Token: testToken})
		must(t, err)
		req := httptest.NewRequest(http.MethodGet, "/api/rate-limits", nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		var body struct {
			RateLimits []ratelimit.KeySnapshot `json:"rate_limits"`
			Total      int                     `json:"total"`
		}
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &body) != nil {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		if want := min(n, 500); len(body.RateLimits) != want || body.Total != n || body.RateLimits[want-1].Key != fmt.Sprintf("https://api.example/item/%05d", want-1) {
			t.Fatalf("%d keys: %d listed, total %d", n, len(body.RateLimits), body.Total)
		}
	}
}

// With more keys than the route lists, the panel says how many it shows of how many.
func TestDashboardRateLimitsTruncated(t *testing.T) {
	h, err := admin.New(admin.Config{Breakers: breakers(t), RateLimits: manyRateLimits(1200), Token: testToken})
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
		chromedp.WaitVisible(chromedp.ID("rate-limits-more")),
	))
	text, err := chromedp.Run(tab, chromedp.Text(chromedp.ID("rate-limits-more")))
	must(t, err)
	if text != "showing 500 of 1200 keys" {
		t.Fatalf("%q", text)
	}
}

// A limiter with rates of its own per key: GET /api/rate-limits (which the dashboard's panel
// shows row by row) answers each key's own rate and burst, and the default's for a key not
// listed.
func TestRateLimitsRouteShowsEachKeysOwnRate(t *testing.T) {
	rl := ratelimit.New(ratelimit.Config{Rate: 10, Key: func(req any) string { return req.(string) },
		Clock:  durabletest.NewManualClock(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)), // no permit comes back meanwhile
		Limits: map[string]ratelimit.Limit{"sms": {Rate: 50, Burst: 5}, "email": {Rate: 100}}})
	for _, key := range []string{"sms", "email", "push"} {
		if _, err := rl.Handle(context.Background(), key, func(context.Context, any) (any, error) { return nil, nil }); err != nil {
			t.Fatal(err)
		}
	}
	h, err := admin.New(admin.Config{Breakers: breakers(t), RateLimits: rl, Token: testToken})
	must(t, err)
	req := httptest.NewRequest(http.MethodGet, "/api/rate-limits", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	var body struct {
		RateLimits []struct {
			Key       string  `json:"key"`
			Rate      float64 `json:"rate"`
			Burst     int     `json:"burst"`
			Available int     `json:"available"`
		} `json:"rate_limits"`
	}
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &body) != nil || len(body.RateLimits) != 3 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	want := map[string][3]float64{"email": {100, 1, 0}, "push": {10, 1, 0}, "sms": {50, 5, 4}}
	for _, l := range body.RateLimits {
		if w := want[l.Key]; l.Rate != w[0] || float64(l.Burst) != w[1] || float64(l.Available) != w[2] {
			t.Errorf("%s: rate %v, burst %d, %d free; want %v, %v, %v", l.Key, l.Rate, l.Burst, l.Available, w[0], w[1], w[2])
		}
	}
}
