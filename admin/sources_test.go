package admin_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/budget"
	"github.com/switchboard-go/switchboard/behaviors/hedge"
	"github.com/switchboard-go/switchboard/behaviors/ratelimit"
)

// A service with a breaker registry keyed by host and one keyed by request type, a limiter
// per provider, two retry budgets and two hedging behaviors: the shape the relay had to merge
// by hand.
type fakeLimiter []ratelimit.KeySnapshot

func (f fakeLimiter) Snapshot() []ratelimit.KeySnapshot { return f }

type fakeBudget []budget.Usage

func (f fakeBudget) Snapshot() []budget.Usage { return f }

type fakeHedges []hedge.Tally

func (f fakeHedges) Snapshot() []hedge.Tally { return f }

// manySources returns the Config of such a service and its two registries: "payments" is a
// key of both, "crm" of the default one only, "search" of "types" only.
func manySources(t *testing.T) (admin.Config, *breaker.Registry, *breaker.Registry) {
	t.Helper()
	hosts := breaker.NewRegistry(breaker.Config{OpenDuration: time.Minute})
	types := breaker.NewRegistry(breaker.Config{OpenDuration: time.Minute})
	for _, k := range []string{"payments", "crm"} {
		_, err := hosts.Gate(k)
		must(t, err)
	}
	for _, k := range []string{"payments", "search"} {
		_, err := types.Gate(k)
		must(t, err)
	}
	return admin.Config{
		Breakers:          hosts,
		BreakerRegistries: map[string]admin.Breakers{"types": types},
		RateLimits:        fakeLimiter{{Key: "charge", Rate: 100, Burst: 1, Instances: 1}},
		RateLimiters:      map[string]admin.RateLimits{"openai": fakeLimiter{{Key: "chat", Rate: 5, Burst: 10, Available: 10, Instances: 1}}},
		Budgets:           fakeBudget{{Key: "api", Calls: 10, Allowed: 2}},
		RetryBudgets:      map[string]admin.Budgets{"batch": fakeBudget{{Key: "api", Calls: 3, Allowed: 1}}},
		Hedges:            fakeHedges{{Key: "search", Calls: 7}},
		HedgeBehaviors:    map[string]admin.Hedges{"reads": fakeHedges{{Key: "search", Calls: 9}}},
		Token:             token,
	}, hosts, types
}

// Every registry, limiter, budget and hedging behavior is listed, each row naming its own.
func TestEverySourceListedByName(t *testing.T) {
	cfg, _, _ := manySources(t)
	h, err := admin.New(cfg)
	must(t, err)
	for _, c := range []struct{ path, list, field, want string }{
		{"/api/breakers", "breakers", "registry", "default/crm default/payments types/payments types/search"},
		{"/api/rate-limits", "rate_limits", "limiter", "default/charge openai/chat"},
		{"/api/retry-budgets", "budgets", "budget", "default/api batch/api"},
		{"/api/hedges", "hedges", "behavior", "default/search reads/search"},
	} {
		res := auth(t, h, "GET", c.path, "")
		want(t, res, http.StatusOK)
		rows, _ := res.body[c.list].([]any)
		var got []string
		for _, r := range rows {
			m := r.(map[string]any)
			got = append(got, fmt.Sprint(m[c.field], "/", m["key"]))
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("GET %s: rows %q, want %q", c.path, got, c.want)
		}
		if c.list == "breakers" && rows[0].(map[string]any)["shared"] != false {
			t.Errorf("a registry without a store listed as shared: %v", rows[0])
		}
	}
}

// A breaker is found in the only registry that knows its key, or in the one the query names;
// a key of two registries without a name is a 400 naming both, and nothing is tripped.
func TestBreakerOfTwoRegistries(t *testing.T) {
	cfg, hosts, types := manySources(t)
	h, err := admin.New(cfg)
	must(t, err)
	stateOf := func(reg *breaker.Registry, key string) breaker.State {
		s, err := reg.Get(key)
		must(t, err)
		return s.State
	}

	res := auth(t, h, "POST", "/api/breakers/search/trip", "{}")
	want(t, res, http.StatusOK)
	if res.body["registry"] != "types" || stateOf(types, "search") != breaker.StateOpen {
		t.Fatalf("trip of a key of one registry: %s; its state %v", res.Body, stateOf(types, "search"))
	}

	res = auth(t, h, "POST", "/api/breakers/payments/trip", "{}")
	want(t, res, http.StatusBadRequest)
	if msg := errorOf(res); !strings.Contains(msg, `"default"`) || !strings.Contains(msg, `"types"`) || !strings.Contains(msg, "registry") {
		t.Errorf("the 400 %q does not name both registries", msg)
	}
	if stateOf(hosts, "payments") != breaker.StateClosed || stateOf(types, "payments") != breaker.StateClosed {
		t.Fatal("an ambiguous trip tripped a breaker")
	}

	res = auth(t, h, "POST", "/api/breakers/payments/trip?registry=types", "{}")
	want(t, res, http.StatusOK)
	if stateOf(types, "payments") != breaker.StateOpen || stateOf(hosts, "payments") != breaker.StateClosed {
		t.Fatal("the trip named the registry types and did not trip its breaker alone")
	}
	res = auth(t, h, "GET", "/api/breakers/payments?registry=default", "")
	want(t, res, http.StatusOK)
	if res.body["state"] != "closed" || res.body["registry"] != "default" {
		t.Errorf("GET of the default registry's payments: %s", res.Body)
	}
	res = auth(t, h, "POST", "/api/breakers/payments/reset?registry=types", "{}")
	want(t, res, http.StatusOK)
	if stateOf(types, "payments") != breaker.StateClosed {
		t.Error("the reset did not close the breaker of the registry it named")
	}

	for _, c := range []struct{ path, want string }{
		{"/api/breakers/payments?registry=nope", `no breaker registry named "nope": want "default" or "types"`},
		{"/api/breakers/nope", `unknown breaker "nope" in every registry`},
		{"/api/breakers/search?registry=default", `unknown breaker "search" in registry "default"`},
	} {
		res := auth(t, h, "GET", c.path, "")
		want(t, res, http.StatusNotFound)
		if msg := errorOf(res); msg != c.want {
			t.Errorf("GET %s: %q, want %q", c.path, msg, c.want)
		}
	}
	res = auth(t, h, "GET", "/api/breakers/crm?registri=types", "")
	want(t, res, http.StatusBadRequest)
	if msg := errorOf(res); !strings.Contains(msg, `unknown query parameter "registri"`) {
		t.Errorf("a misspelt parameter: %q", msg)
	}
}

// Config's maps of named sources are checked, each problem naming its field.
func TestNamedSourcesValidated(t *testing.T) {
	var nilReg *breaker.Registry
	err := admin.Config{
		Token:             token,
		BreakerRegistries: map[string]admin.Breakers{"": breakers(t), "default": breakers(t), "x\x00": breakers(t), "nil": nilReg, "none": nil},
		RateLimiters:      map[string]admin.RateLimits{" ": fakeLimiter{}},
	}.Validate()
	if err == nil {
		t.Fatal("Validate accepted bad names")
	}
	for _, want := range []string{
		"Config.BreakerRegistries has an empty name",
		`Config.BreakerRegistries names one "default"`,
		`Config.BreakerRegistries name "x\x00" holds a NUL byte`,
		`Config.BreakerRegistries["nil"] is nil`,
		`Config.BreakerRegistries["none"] is nil`,
		"Config.RateLimiters has an empty name",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
	// Named registries alone are something to administer.
	if err := (admin.Config{Token: token, BreakerRegistries: map[string]admin.Breakers{"hosts": breakers(t)}}).Validate(); err != nil {
		t.Errorf("a named registry alone: %v", err)
	}
}

// The dashboard shows the breakers of two registries and the keys of two limiters, each by
// its name, and trips the breaker of the registry whose card was clicked.
func TestDashboardShowsEverySourceByName(t *testing.T) {
	cfg, hosts, types := manySources(t)
	cfg.Token = testToken
	h, err := admin.New(cfg)
	must(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	for _, size := range []struct{ w, h int }{{1280, 800}, {390, 844}} {
		tab := newBrowser(t, size.w, size.h)
		typesPayments := `li.breaker[data-key=` + css("types\x1fpayments") + `]`
		must(t, chromedp.Do(tab,
			chromedp.Navigate(srv.URL),
			chromedp.WaitVisible(chromedp.ID("token")),
			chromedp.SendKeys(chromedp.ID("token"), testToken),
			chromedp.Click(chromedp.ID("login-submit")),
			chromedp.WaitVisible(chromedp.CSS(typesPayments)),
			chromedp.WaitVisible(chromedp.CSS(`#rate-limits-rows tr[data-limiter="openai"]`)),
		))
		card, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS(typesPayments)))
		must(t, err)
		if !strings.Contains(card, "types") || !strings.Contains(card, "payments") {
			t.Errorf("the card of types' payments reads %q", card)
		}
		row, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS(`#rate-limits-rows tr[data-limiter="openai"]`)))
		must(t, err)
		if !strings.Contains(row, "openai") || !strings.Contains(row, "chat") {
			t.Errorf("the openai limiter's row reads %q", row)
		}
		budgets, err := chromedp.Run(tab, chromedp.Text(chromedp.ID("budgets-rows")))
		must(t, err)
		if !strings.Contains(budgets, "batch") || !strings.Contains(budgets, "default") {
			t.Errorf("the budgets read %q", budgets)
		}
		screenshot(t, tab, fmt.Sprintf("sources-%d", size.w))
		if size.w != 1280 {
			continue
		}
		must(t, chromedp.Do(tab,
			chromedp.Click(chromedp.CSS(typesPayments+` [data-act=trip]`)),
			chromedp.WaitVisible(chromedp.ID("confirm-ok")),
			chromedp.Click(chromedp.ID("confirm-ok")),
			chromedp.WaitVisible(chromedp.CSS(typesPayments+`[data-state="open"]`)),
		))
		if s, _ := types.Get("payments"); s.State != breaker.StateOpen {
			t.Errorf("types' payments is %v after its card's trip", s.State)
		}
		if s, _ := hosts.Get("payments"); s.State != breaker.StateClosed {
			t.Errorf("the default registry's payments is %v after the trip of types'", s.State)
		}
	}
}
