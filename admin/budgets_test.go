package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/behaviors/budget"
)

// spentBudget is a retry budget whose key "quotes-api" has 10 calls, 2 retries allowed and
// 1 refused, and whose key "crm" has 1 call.
func spentBudget(t *testing.T) *budget.Budget {
	t.Helper()
	b := budget.New(budget.Config{Ratio: 0.2, Floor: budget.NoFloor, Window: time.Hour,
		Key: func(req any) string { return *req.(*string) }})
	ctx := context.Background()
	quotes, crm := "quotes-api", "crm"
	for range 10 {
		b.Count(ctx, &quotes)
	}
	b.Count(ctx, &crm)
	for range 3 {
		_ = b.Retry(ctx, &quotes)
	}
	return b
}

// GET /api/retry-budgets lists each key's counts; without a budget it answers 404.
func TestRetryBudgetsRoute(t *testing.T) {
	h, err := admin.New(admin.Config{Budgets: spentBudget(t), Token: token})
	if err != nil {
		t.Fatal(err)
	}
	res := auth(t, h, "GET", "/api/retry-budgets", "")
	want(t, res, http.StatusOK)
	list, _ := res.body["budgets"].([]any)
	if len(list) != 2 {
		t.Fatalf("budgets = %v", res.body)
	}
	crm, _ := list[0].(map[string]any)
	q, _ := list[1].(map[string]any)
	if crm["key"] != "crm" || crm["calls"] != 1.0 || q["key"] != "quotes-api" || q["calls"] != 10.0 ||
		q["retries"] != 2.0 || q["refused"] != 1.0 || q["allowed"] != 2.0 {
		t.Fatalf("budgets = %v", list)
	}
	// An unknown query parameter is refused, as on every other route: a misspelt filter
	// must not be ignored.
	want(t, auth(t, h, "GET", "/api/retry-budgets?key=crm", ""), http.StatusBadRequest)
	f := newFixture(t, durableConfig())
	want(t, auth(t, f.h, "GET", "/api/retry-budgets", ""), http.StatusNotFound)
	if _, err := admin.New(admin.Config{Budgets: (*budget.Budget)(nil), Token: token}); err == nil {
		t.Fatal("a nil *budget.Budget was accepted")
	}
}

// The dashboard shows the Retry budgets panel: a row per key with its counts, and the key
// whose retries were refused marked exceeded.
func TestDashboardRetryBudgets(t *testing.T) {
	h, err := admin.New(admin.Config{Budgets: spentBudget(t), Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	tab := newBrowser(t, 1280, 900)
	row := `#budgets-rows tr[data-key="quotes-api"]`
	must(t, chromedp.Do(tab,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), testToken),
		chromedp.Click(chromedp.ID("login-submit")),
		chromedp.WaitVisible(chromedp.ID("budgets-title")),
		chromedp.WaitVisible(chromedp.CSS(row)),
		chromedp.WaitVisible(chromedp.CSS(row+` .badge.s-exceeded`)),
		poll(`document.querySelectorAll("#budgets-rows tr").length === 2`),
		poll(`document.getElementById("budgets-empty").hidden`),
	))
	cells, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll(`+js(row+` td`)+`)).map(function (td) { return td.textContent.trim(); })`))
	must(t, err)
	if len(cells) != 6 || cells[0] != "quotes-api" || cells[1] != "10" || cells[2] != "2" || cells[3] != "1" || cells[4] != "2" || cells[5] != "100 % exceeded" {
		t.Fatalf("the quotes-api row reads %q", cells)
	}
	hidden, err := chromedp.Run(tab, chromedp.Evaluate[bool](`document.getElementById("breakers-title").closest("section").hidden`))
	must(t, err)
	if !hidden {
		t.Error("the breakers panel shows without a registry")
	}
	screenshot(t, tab, "retry-budgets")
}
