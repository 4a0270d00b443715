package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/durable"
)

// GET /api/busiest-keys answers the queue's claims by fairness key: here the two items the
// fixture's scheduler claimed, both of one key; a bad limit is a 400 naming it, and a queue
// that does not count its claims a 404.
func TestBusiestKeysRoute(t *testing.T) {
	f := newItemsFixture(t)
	res := auth(t, f.h, "GET", "/api/busiest-keys", "")
	want(t, res, http.StatusOK)
	keys, _ := res.body["keys"].([]any)
	if res.body["total"] != float64(2) || res.body["others"] != float64(0) || len(keys) != 1 {
		t.Fatalf("busiest keys = %v; want 2 claims of one key", res.body)
	}
	k := keys[0].(map[string]any)
	if k["key"] != "crm.import-contact" || k["claims"] != float64(2) || k["share"] != float64(1) {
		t.Fatalf("the key = %v; want crm.import-contact with 2 claims, all of them", k)
	}
	if w, _ := res.body["window_seconds"].(float64); w < 0 || w > 300 {
		t.Errorf("window_seconds %v: want 0 to 300", res.body["window_seconds"])
	}
	for _, bad := range []string{"limit=0", "limit=101", "limit=x", "top=3"} {
		res := auth(t, f.h, "GET", "/api/busiest-keys?"+bad, "")
		want(t, res, http.StatusBadRequest)
		name := strings.SplitN(bad, "=", 2)[0]
		if msg, _ := res.body["error"].(string); !strings.Contains(msg, name) {
			t.Errorf("?%s: error %q does not name %s", bad, msg, name)
		}
	}
	h, err := admin.New(admin.Config{Queue: downQueue{}, Sender: nopSender{}, Token: token})
	must(t, err)
	res = auth(t, h, "GET", "/api/busiest-keys", "")
	want(t, res, http.StatusNotFound)
	if msg, _ := res.body["error"].(string); !strings.Contains(msg, "admin.BusiestKeys") {
		t.Errorf("404 says %q; want it to name admin.BusiestKeys", msg)
	}
}

// The dashboard lists the busiest keys of the instance's claims, the busiest first, with their
// claims and shares.
func TestDashboardBusiestKeys(t *testing.T) {
	f := newDashboardWith(t, false, true)
	ctx := context.Background()
	for i, key := range []string{"tenant-a", "tenant-b", "tenant-a", "tenant-a"} {
		_, err := f.q.Enqueue(ctx, &uiContact{Email: fmt.Sprintf("c%d@example", i)}, durable.WithFairnessKey(key))
		must(t, err)
	}
	tab := newBrowser(t, 1280, 900)
	login(t, tab, f.url)
	row := func(key string) string { return `#busiest-rows tr[data-key=` + css(key) + `]` }
	must(t, chromedp.Do(tab,
		chromedp.WaitVisible(chromedp.ID("busiest-title")),
		chromedp.WaitVisible(chromedp.CSS(row("tenant-a"))),
		chromedp.WaitVisible(chromedp.CSS(row("tenant-b"))),
	))
	rows, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#busiest-rows tr")).map(function (tr) { return tr.dataset.key + ": " + Array.from(tr.children).map(function (td) { return td.textContent.trim(); }).join(" | "); })`))
	must(t, err)
	if len(rows) < 2 || rows[0] != "tenant-a: tenant-a | 3 | 75 %" {
		t.Fatalf("rows %q; want tenant-a first, with its 3 claims of 4 (75 %%)", rows)
	}
	screenshot(t, tab, "busiest-keys")
}
