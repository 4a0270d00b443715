package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/hedge"
	"github.com/switchboard-go/switchboard/mediator"
)

var _ admin.Hedges = (*hedge.Behavior)(nil)

type hedgedQuote struct {
	mediator.Returns[string]
	Endpoint string
}

// hedged returns a hedging behavior keyed by endpoint that has seen two calls of
// "quotes.example/eu", one hedged and won by its hedge, and one fast call of "quotes.example/us".
func hedged(t *testing.T) *hedge.Behavior {
	t.Helper()
	h := hedge.New(hedge.Config{Delay: 2 * time.Millisecond, Key: func(req any) string { return req.(*hedgedQuote).Endpoint }})
	var n atomic.Int32
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, q *hedgedQuote) (string, error) {
		if n.Add(1) == 1 {
			<-ctx.Done() // the first attempt hangs until the hedge wins
			return "", ctx.Err()
		}
		return "ok", nil
	})
	m.Use(h)
	must(t, m.Build())
	for _, e := range []string{"quotes.example/eu", "quotes.example/us"} {
		if _, err := mediator.Send(context.Background(), m, &hedgedQuote{Endpoint: e}); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func TestHedgesRoute(t *testing.T) {
	h, err := admin.New(admin.Config{Breakers: breaker.NewRegistry(breaker.Config{}), Hedges: hedged(t), Token: token})
	must(t, err)
	res := auth(t, h, "GET", "/api/hedges", "")
	want(t, res, http.StatusOK)
	list, _ := res.body["hedges"].([]any)
	if len(list) != 2 {
		t.Fatalf("hedges = %v", res.body)
	}
	eu, us := list[0].(map[string]any), list[1].(map[string]any)
	if eu["key"] != "quotes.example/eu" || eu["calls"] != 1.0 || eu["hedges_sent"] != 1.0 || eu["hedges_won"] != 1.0 ||
		eu["hedges_refused"] != 0.0 || eu["delay_ms"] != 2.0 || us["hedges_sent"] != 0.0 {
		t.Fatalf("hedges = %v", list)
	}
	want(t, auth(t, h, "GET", "/api/hedges?x=1", ""), http.StatusBadRequest)

	// Without a hedging behavior the route says so.
	h, err = admin.New(admin.Config{Breakers: breaker.NewRegistry(breaker.Config{}), Token: token})
	must(t, err)
	want(t, auth(t, h, "GET", "/api/hedges", ""), http.StatusNotFound)
	if _, err := admin.New(admin.Config{Breakers: breaker.NewRegistry(breaker.Config{}), Token: token, Hedges: (*hedge.Behavior)(nil)}); err == nil {
		t.Fatal("a nil *hedge.Behavior was accepted")
	}
}

// The Hedging panel lists each key with its calls, the hedges sent (with their share of the
// calls), the calls they won and the delay; without a hedging behavior the panel is hidden.
func TestDashboardHedges(t *testing.T) {
	h, err := admin.New(admin.Config{Breakers: breakers(t), Hedges: hedged(t), Token: testToken})
	must(t, err)
	mux := http.NewServeMux()
	mux.Handle("/admin/", http.StripPrefix("/admin", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	tab := newBrowser(t, 1280, 900)
	row := `#hedges-rows tr[data-hedge-key="quotes.example/eu"]`
	must(t, chromedp.Do(tab,
		chromedp.Navigate(srv.URL+"/admin/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), testToken),
		chromedp.Click(chromedp.ID("login-submit")),
		chromedp.WaitVisible(chromedp.ID("app")),
		chromedp.WaitVisible(chromedp.ID("hedges-title")),
		chromedp.WaitVisible(chromedp.CSS(row)),
		poll(`document.querySelectorAll("#hedges-rows tr").length === 2`),
		poll(`document.getElementById("hedges-empty").hidden`),
	))
	cells, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll(`+js(row+` td`)+`)).map(function (td) { return td.textContent; })`))
	must(t, err)
	wantCells := []string{"quotes.example/eu", "1", "1 (100.0 %)", "1 (100.0 %)", "0", "2.00 ms"}
	if len(cells) != len(wantCells) {
		t.Fatalf("cells %q", cells)
	}
	for i := range cells {
		if cells[i] != wantCells[i] {
			t.Errorf("cell %d reads %q, want %q", i, cells[i], wantCells[i])
		}
	}
	screenshot(t, tab, "hedges")

	// Without one, the panel stays hidden.
	h2, err := admin.New(admin.Config{Breakers: breakers(t), Token: testToken})
	must(t, err)
	srv2 := httptest.NewServer(http.StripPrefix("/admin", h2))
	t.Cleanup(srv2.Close)
	tab2 := newBrowser(t, 1280, 900)
	must(t, chromedp.Do(tab2,
		chromedp.Navigate(srv2.URL+"/admin/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), testToken),
		chromedp.Click(chromedp.ID("login-submit")),
		chromedp.WaitVisible(chromedp.CSS(`#breakers li.breaker`)),
		poll(`!!document.querySelector("#updated time")`), // every panel has loaded
	))
	hidden, err := chromedp.Run(tab2, chromedp.Evaluate[bool](`document.getElementById("hedges-title").closest("section").hidden`))
	must(t, err)
	if !hidden {
		t.Error("the Hedging panel shows without a hedging behavior")
	}
}
