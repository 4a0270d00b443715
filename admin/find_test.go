package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/durable"
)

// GET /api/find answers the items and dead letters a reference, token or dedupe key names;
// a missing or unreadable q is a 400 naming q.
func TestFindRoute(t *testing.T) {
	f := newFixture(t, durableConfig())
	ctx := context.Background()
	enq, err := f.q.Enqueue(ctx, &importContact{Email: "ann@example"}, durable.WithReference("n-00168"), durable.WithDelay(time.Hour))
	must(t, err)

	res := auth(t, f.h, "GET", "/api/find?q=n-00168", "")
	want(t, res, http.StatusOK)
	items, _ := res.body["items"].([]any)
	letters, _ := res.body["dead_letters"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["reference"] != "n-00168" || items[0].(map[string]any)["token"] != enq.Token || letters == nil {
		t.Fatalf("GET /api/find: %s", res.Body)
	}
	res = auth(t, f.h, "GET", "/api/find?q=n-00169", "")
	want(t, res, http.StatusOK)
	if items, _ := res.body["items"].([]any); len(items) != 0 {
		t.Errorf("an unknown reference found %s", res.Body)
	}
	for path, msg := range map[string]string{
		"/api/find":         "q is required",
		"/api/find?q=%20":   "q is required",
		"/api/find?q=a%00b": "q \"a\\x00b\" holds a NUL byte",
		"/api/find?q=%FF":   "not valid UTF-8",
		"/api/find?q=a&x=1": `unknown query parameter "x"`,
		"/api/find?q=a&q=b": "given 2 times",
	} {
		res := auth(t, f.h, "GET", path, "")
		want(t, res, http.StatusBadRequest)
		if !strings.Contains(errorOf(res), msg) {
			t.Errorf("GET %s: %q; want it to say %q", path, errorOf(res), msg)
		}
	}
	h, err := admin.New(admin.Config{Breakers: f.reg, Token: token})
	must(t, err)
	want(t, auth(t, h, "GET", "/api/find?q=n-00168", ""), http.StatusNotFound)
	want(t, do(t, f.h, "GET", "/api/find?q=n-00168", ""), http.StatusUnauthorized)
}

// An operator finds an item by the application's id from the top bar's search box, and
// opens it: the reference is among its facts.
func TestDashboardFindsAnItemByItsReference(t *testing.T) {
	f := startDashboard(t)
	ctx := context.Background()
	enq, err := f.q.Enqueue(ctx, &uiCharge{Order: 168, AmountCents: 500}, durable.WithReference("n-00168"), durable.WithDelay(time.Hour))
	must(t, err)
	for _, size := range []struct{ w, h int }{{1280, 800}, {390, 844}} {
		tab := newBrowser(t, size.w, size.h)
		login(t, tab, f.url)
		row := `#find-item-rows tr[data-key="` + itoa(enq.ID) + `"]`
		must(t, chromedp.Do(tab,
			chromedp.SendKeys(chromedp.ID("find-q"), "n-00168"),
			chromedp.Click(chromedp.ID("find-submit")),
			chromedp.WaitVisible(chromedp.CSS(row)),
		))
		title, err := chromedp.Run(tab, chromedp.Text(chromedp.ID("find-title")))
		must(t, err)
		if !strings.Contains(title, "n-00168") || !strings.Contains(title, "1 item") {
			t.Errorf("the panel's title reads %q", title)
		}
		viewportScreenshot(t, tab, fmt.Sprintf("find-%d", size.w))
		must(t, chromedp.Do(tab,
			chromedp.Click(chromedp.CSS(row+` [data-act=inspect]`)),
			chromedp.WaitVisible(chromedp.ID("item-dialog")),
			poll(`document.getElementById("item-title").textContent.indexOf("Item `+itoa(enq.ID)+` ") === 0`),
		))
		facts, err := chromedp.Run(tab, chromedp.Text(chromedp.ID("item-facts")))
		must(t, err)
		if !strings.Contains(facts, "Reference") || !strings.Contains(facts, "n-00168") || !strings.Contains(facts, "Token") || !strings.Contains(facts, enq.Token) {
			t.Errorf("the item's facts %q do not give its reference and token", facts)
		}
	}
}
