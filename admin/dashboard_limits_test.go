package admin_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

func limitRowSel(key string) string { return `#limits-rows tr[data-key=` + css(key) + `]` }

// An operator sets a concurrency limit on a breaker key through the dashboard (a bad limit is
// refused in the dialog, naming the field, and nothing is sent), sees it with its slots in use,
// changes it, and removes it; the audit log shows each change.
func TestDashboardConcurrencyLimits(t *testing.T) {
	f := startDashboard(t)
	tab := newBrowser(t, 1280, 900)
	login(t, tab, f.url)
	key := "https://api.payments.example/v1/charge?region=eu"
	must(t, chromedp.Do(tab,
		chromedp.WaitVisible(chromedp.ID("limits-title")),
		chromedp.WaitVisible(chromedp.ID("limits-empty")),
	))

	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.ID("limit-open")),
		chromedp.WaitVisible(chromedp.ID("limit-dialog")),
		chromedp.SendKeys(chromedp.ID("limit-key"), key),
		chromedp.SendKeys(chromedp.ID("limit-max"), "0"),
		chromedp.SendKeys(chromedp.ID("limit-reason"), "the processor allows 4 connections"),
		chromedp.Click(chromedp.ID("limit-ok")),
		poll(`document.getElementById("limit-error").textContent.indexOf("whole number from 1") >= 0`),
		poll(`document.getElementById("limit-max").getAttribute("aria-invalid") === "true"`),
	))
	if strings.Contains(f.Posts(), "/api/concurrency-limits") {
		t.Fatalf("a refused limit was sent: %s", f.Posts())
	}
	must(t, chromedp.Do(tab,
		chromedp.SetValue(chromedp.ID("limit-max"), "4"),
		chromedp.Click(chromedp.ID("limit-ok")),
		chromedp.WaitNotVisible(chromedp.ID("limit-dialog")),
		chromedp.WaitVisible(chromedp.CSS(limitRowSel(key))),
	))
	running, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS(limitRowSel(key)+` td:nth-child(2)`)))
	must(t, err)
	if running != "0 of 4" {
		t.Errorf("the running cell reads %q, want 0 of 4", running)
	}
	screenshot(t, tab, "limited")

	// Change it: the dialog opens on the key, which it keeps.
	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.CSS(limitRowSel(key)+` [data-act=change]`)),
		chromedp.WaitVisible(chromedp.ID("limit-dialog")),
		poll(`document.getElementById("limit-key").value === `+js(key)+` && document.getElementById("limit-key").readOnly`),
		chromedp.SetValue(chromedp.ID("limit-max"), "6"),
		chromedp.SendKeys(chromedp.ID("limit-reason"), "raised after their upgrade"),
		chromedp.Click(chromedp.ID("limit-ok")),
		chromedp.WaitNotVisible(chromedp.ID("limit-dialog")),
		poll(`document.querySelector(`+js(limitRowSel(key))+`).dataset.max === "6"`),
	))
	ls, err := f.q.ConcurrencyLimits(context.Background())
	must(t, err)
	if len(ls) != 1 || ls[0].Key != key || ls[0].Max != 6 || ls[0].Actor != "admin" || ls[0].Reason != "raised after their upgrade" {
		t.Fatalf("the queue's limits: %+v", ls)
	}

	// Remove it: confirmed, then gone, and every change in the audit log.
	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.CSS(limitRowSel(key)+` [data-act=remove]`)),
		chromedp.WaitVisible(chromedp.ID("confirm-dialog")),
		chromedp.Click(chromedp.ID("confirm-ok")),
		chromedp.WaitNotVisible(chromedp.ID("confirm-dialog")),
		poll(`!document.querySelector(`+js(limitRowSel(key))+`)`),
		chromedp.WaitVisible(chromedp.ID("limits-empty")),
		poll(`document.querySelectorAll("#audit-rows tr").length === 3`),
		poll(`document.querySelector("#audit-rows tr").textContent.indexOf("remove_concurrency_limit") >= 0`),
	))
	if ls, err := f.q.ConcurrencyLimits(context.Background()); err != nil || len(ls) != 0 {
		t.Fatalf("after the removal the queue's limits are %+v, %v", ls, err)
	}
	if posts := f.Posts(); !strings.Contains(posts, "PUT /api/concurrency-limits/") || !strings.Contains(posts, "DELETE /api/concurrency-limits/") {
		t.Fatalf("posts: %s", posts)
	}
}
