package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

// manyLetters stands in for a queue with 25,000 failed letters whose listing counts them up to
// 10,000 or the page's end, as durable.Queue.DeadLetters does.
type manyLetters struct{ admin.Operations }

const manyLettersCount, manyLettersBound = 25_000, 10_000

func (manyLetters) DeadLetters(_ context.Context, f durable.DeadLetterFilter) (durable.DeadLetterPage, error) {
	limit := f.Limit
	if limit == 0 {
		limit = 50
	}
	var page durable.DeadLetterPage
	at := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := f.Offset; i < min(f.Offset+limit, manyLettersCount); i++ {
		id := record.DeadLetterID(manyLettersCount - i)
		page.Letters = append(page.Letters, record.DeadLetter{ID: id, Source: "crm-sync", Name: "ImportContact",
			Key: fmt.Sprintf("c%d", id), Error: "boom", Status: record.DeadLetterFailed, CreatedAt: at, UpdatedAt: at})
	}
	bound := max(manyLettersBound, f.Offset+limit)
	page.Total, page.Over = min(manyLettersCount, bound), manyLettersCount > bound
	return page, nil
}

// The listing's total says "more than" when the server's count stopped, and Next pages on
// past it; GET /api/dead-letters says so in total_over.
func TestDashboardSaysTheLetterCountStopped(t *testing.T) {
	f := newFixture(t, durableConfig())
	h, err := admin.New(admin.Config{Queue: manyLetters{f.q}, Breakers: f.reg, Sender: f.m, Token: testToken})
	must(t, err)
	res := do(t, h, "GET", "/api/dead-letters?limit=25&offset=9990", "", "Authorization", "Bearer "+testToken)
	if res.Code != http.StatusOK || res.body["total"] != float64(10015) || res.body["total_over"] != true {
		t.Errorf("GET /api/dead-letters?offset=9990 = %d %s; want total 10015 and total_over true", res.Code, res.Body.String())
	}
	tab := serveAndLogIn(t, h, chromedp.WaitVisible(chromedp.CSS(`#dl-rows tr`)))
	must(t, chromedp.Do(tab,
		poll(`document.getElementById("dl-range").textContent === "1–50 of more than 10,000"`),
		poll(`!document.getElementById("dl-next").disabled`),
		chromedp.Click(chromedp.ID("dl-next")),
		poll(`document.getElementById("dl-range").textContent === "51–100 of more than 10,000"`),
		poll(`document.querySelector("#dl-rows tr").dataset.key === "24950"`),
	))
}

// shrinkingLetters stands in for a queue whose failed letters are n, which the test lowers as
// if letters were discarded elsewhere.
type shrinkingLetters struct {
	admin.Operations
	n *atomic.Int64
}

func (q shrinkingLetters) DeadLetters(_ context.Context, f durable.DeadLetterFilter) (durable.DeadLetterPage, error) {
	n := int(q.n.Load())
	var page durable.DeadLetterPage
	at := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := f.Offset; i < min(f.Offset+f.Limit, n); i++ {
		id := record.DeadLetterID(n - i)
		page.Letters = append(page.Letters, record.DeadLetter{ID: id, Source: "crm-sync", Name: "ImportContact",
			Key: fmt.Sprintf("c%d", id), Error: "boom", Status: record.DeadLetterFailed, CreatedAt: at, UpdatedAt: at})
	}
	page.Total = n
	return page, nil
}

// When the last page empties (its letters resolved elsewhere), the list steps back to the new
// last page at once: it never says that no letter matches while letters do.
func TestDashboardLastPageThatEmptiesStepsBackAtOnce(t *testing.T) {
	f := newFixture(t, durableConfig())
	var n atomic.Int64
	n.Store(60)
	h, err := admin.New(admin.Config{Queue: shrinkingLetters{f.q, &n}, Breakers: f.reg, Sender: f.m, Token: testToken})
	must(t, err)
	tab := serveAndLogIn(t, h, chromedp.WaitVisible(chromedp.CSS(`#dl-rows tr`)))
	must(t, chromedp.Do(tab,
		poll(`document.getElementById("dl-range").textContent === "1–50 of 60"`),
		chromedp.Click(chromedp.ID("dl-next")),
		poll(`document.getElementById("dl-range").textContent === "51–60 of 60"`),
	))
	// Every text the range shows from now on, and whether the empty list's message showed.
	_, err = chromedp.Run(tab, chromedp.Evaluate[any](`(function () {
		var r = document.getElementById("dl-range"), e = document.getElementById("dl-empty");
		window.seen = [];
		new MutationObserver(function () { window.seen.push(r.textContent); }).observe(r, {childList: true, characterData: true, subtree: true});
		new MutationObserver(function () { if (!e.hidden) window.seen.push("empty shown"); }).observe(e, {attributes: true});
		return null;
	})()`))
	must(t, err)
	n.Store(50)
	must(t, chromedp.Do(tab, poll(`document.getElementById("dl-range").textContent === "1–50 of 50"`)))
	seen, err := chromedp.Run(tab, chromedp.Evaluate[[]string](`window.seen`))
	must(t, err)
	for _, s := range seen {
		if s == "0 of 50" || s == "empty shown" {
			t.Errorf("after the last page emptied the list showed %q on its way (%q)", s, seen)
		}
	}
}
