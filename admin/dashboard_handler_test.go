package admin_test

// The dashboard against the real handler (admin.New) on loopback, over a breaker registry and
// a durable queue (durabletest.NewQueue): the acceptance walk of the operator surface in a browser.

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/durabletest"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

type dashContact struct {
	mediator.Command
	Email string `json:"email"`
}

func TestDashboardAgainstTheHandler(t *testing.T) {
	tab := newBrowser(t, 1280, 800) // skips (or fails under CI) before any setup without Chromium
	ctx := context.Background()

	q := durabletest.NewQueue(t, durable.Config{Logger: zap.NewNop()})
	durable.Register[*dashContact](q, "crm.dash-contact")
	fixed := false
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, r *dashContact) (mediator.Void, error) {
		if !fixed || r.Email == "" {
			return mediator.Void{}, errors.New("invalid email " + r.Email)
		}
		return mediator.Void{}, nil
	})
	must(t, m.Build())
	res, err := q.RunBatch(ctx, m, "crm-sync", []durable.BatchItem{
		{Key: "c1", Request: &dashContact{Email: "bob@example"}},
		{Key: "c2", Request: &dashContact{Email: "ann@example"}},
		{Key: "c3", Request: &dashContact{}},
	})
	if err != nil || len(res.DeadLetters) != 3 {
		t.Fatalf("RunBatch = %+v, %v", res, err)
	}
	fixed = true

	key := "https://api.example/v1/orders?region=eu&x=1"
	reg := breaker.NewRegistry(breaker.Config{OpenDuration: 5 * time.Minute})
	reg.Declare(key, "payments")
	must(t, reg.Trip(key))

	h, err := admin.New(admin.Config{Breakers: reg, Queue: q, Sender: m, Token: testToken})
	must(t, err)
	mux := http.NewServeMux()
	mux.Handle("/admin/", http.StripPrefix("/admin", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	// Sign in with the keyboard; the tripped breaker is open with a countdown that goes down.
	sel := breakerSel(key)
	countdown := `Number(document.querySelector(` + js(sel+` [data-f=countdown]`) + `).dataset.remainingS)`
	must(t, chromedp.Do(tab,
		chromedp.Navigate(srv.URL+"/admin/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		poll(`document.activeElement && document.activeElement.id === "token"`),
		chromedp.KeyEvent(testToken+kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(sel+`[data-state=open]`)),
		poll(countdown+` > 0`),
	))
	first, err := chromedp.Run(tab, chromedp.Evaluate[int](countdown))
	must(t, err)
	must(t, chromedp.Do(tab, poll(countdown+` < `+strconv.Itoa(first))))

	// Reset (confirmed): closed in the registry.
	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.CSS(sel+` [data-act=reset]`)),
		chromedp.WaitVisible(chromedp.ID("confirm-dialog")),
		chromedp.Click(chromedp.ID("confirm-ok")),
		chromedp.WaitVisible(chromedp.CSS(sel+`[data-state=closed]`)),
	))
	if s, err := reg.Get(key); err != nil || s.State != breaker.StateClosed || s.Failures != 0 {
		t.Fatalf("after Reset the registry has %+v, %v", s, err)
	}

	// Inspect the first letter and replay it: its status changes.
	id := res.DeadLetters[1]
	must(t, chromedp.Do(tab,
		chromedp.WaitVisible(chromedp.CSS(rowSel(int64(id)))),
		chromedp.Click(chromedp.CSS(rowSel(int64(id))+` [data-act=inspect]`)),
		chromedp.WaitVisible(chromedp.ID("inspect-dialog")),
		poll(`document.getElementById("inspect-payload").textContent.indexOf("\"email\": \"ann@example\"") >= 0`),
		poll(`document.querySelector("#inspect-timeline li")`),
	))
	// A letter of a batch run has no recorded attempt: its timeline says so, with its error,
	// rather than "1. No events.".
	tl, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.getElementById("inspect-timeline").innerText`))
	must(t, err)
	if strings.Contains(tl, "No events") || !strings.Contains(tl, "batch run") || !strings.Contains(tl, "invalid email ann@example") {
		t.Errorf("the batch letter's timeline reads %q", tl)
	}
	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.ID("inspect-replay")),
		chromedp.WaitVisible(chromedp.ID("confirm-dialog")),
		chromedp.Click(chromedp.ID("confirm-ok")),
		poll(`document.querySelector("#inspect-facts .badge").textContent === "replayed"`),
		chromedp.KeyEvent(kb.Escape),
		chromedp.WaitNotVisible(chromedp.ID("inspect-dialog")),
		chromedp.WaitNotPresent(chromedp.CSS(rowSel(int64(id)))),
	))
	if d, _, err := q.DeadLetter(ctx, id); err != nil || d.Status != record.DeadLetterReplayed {
		t.Fatalf("letter %d after replay: %+v, %v", id, d, err)
	}

	// Bulk-discard the other two with a reason: per-id outcomes.
	a, b := int64(res.DeadLetters[0]), int64(res.DeadLetters[2])
	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.CSS(rowSel(a)+` [data-f=select]`)),
		chromedp.Click(chromedp.CSS(rowSel(b)+` [data-f=select]`)),
		chromedp.Click(chromedp.ID("bulk-discard")),
		chromedp.WaitVisible(chromedp.ID("discard-dialog")),
		chromedp.SendKeys(chromedp.ID("discard-reason"), "duplicates of c2"),
		chromedp.Click(chromedp.ID("discard-ok")),
		chromedp.WaitVisible(chromedp.CSS(`#bulk-results-list li[data-id="`+strconv.FormatInt(a, 10)+`"][data-resolution=discarded]`)),
		chromedp.WaitVisible(chromedp.CSS(`#bulk-results-list li[data-id="`+strconv.FormatInt(b, 10)+`"][data-resolution=discarded]`)),
		chromedp.WaitVisible(chromedp.ID("dl-empty")),
	))
	for _, id := range []record.DeadLetterID{res.DeadLetters[0], res.DeadLetters[2]} {
		d, tl, err := q.DeadLetter(ctx, id)
		if err != nil || d.Status != record.DeadLetterDiscarded || len(tl) == 0 || !strings.Contains(tl[len(tl)-1].Reason, "duplicates of c2") {
			t.Errorf("letter %d after bulk discard: %+v, %+v, %v", id, d, tl, err)
		}
	}

	screenshot(t, tab, "dashboard-handler")
}
