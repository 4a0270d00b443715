package admin_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/switchboard-go/switchboard/durable/record"
)

func schedSel(name string) string { return `#sched-rows tr[data-key=` + css(name) + `]` }

func (d *dashboard) Schedule(t *testing.T, name string) record.ScheduleInfo {
	t.Helper()
	infos, err := d.q.Schedules(context.Background())
	must(t, err)
	for _, i := range infos {
		if i.Name == name {
			return i
		}
	}
	t.Fatalf("no schedule %q", name)
	return record.ScheduleInfo{}
}

// The schedule controls: pause (a badge, Resume in place of Pause), run now (pending until an
// instance claims it), add through the dialog (the server's message naming the wrong field
// kept in it), remove (offered only for a schedule added at run time).
func TestDashboardScheduleControls(t *testing.T) {
	d := startDashboard(t)
	tab := newBrowser(t, 1280, 800)
	login(t, tab, d.url)
	row := schedSel("crm-pull")
	must(t, chromedp.Do(tab,
		chromedp.WaitVisible(chromedp.CSS(row+` [data-act=pause]`)),
		poll(`document.querySelector(`+js(row+` [data-act=remove]`)+`).hidden`), // declared in code
		chromedp.Click(chromedp.CSS(row+` [data-act=pause]`)),
		chromedp.WaitVisible(chromedp.ID("confirm-dialog")),
		chromedp.Click(chromedp.ID("confirm-ok")),
		chromedp.WaitVisible(chromedp.CSS(row+` .badge.s-paused`)),
		chromedp.WaitVisible(chromedp.CSS(row+` [data-act=resume]`)),
		poll(`document.querySelector(`+js(row+` [data-act=pause]`)+`).hidden`),
	))
	if i := d.Schedule(t, "crm-pull"); !i.Paused || i.PausedBy != "admin" {
		t.Fatalf("after Pause: %+v", i)
	}
	screenshot(t, tab, "schedules-paused")

	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.CSS(row+` [data-act=run-now]`)),
		chromedp.WaitVisible(chromedp.CSS(row+` .badge.s-run_now_pending`)),
		poll(`document.querySelector(`+js(row+` [data-act=run-now]`)+`).disabled`),
	))
	if i := d.Schedule(t, "crm-pull"); i.RunNowBy != "admin" || i.RunNowAt.IsZero() {
		t.Fatalf("after Run now: %+v", i)
	}
	screenshot(t, tab, "schedules-run-now")

	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.CSS(row+` [data-act=resume]`)),
		chromedp.WaitNotPresent(chromedp.CSS(row+` .badge.s-paused`)),
	))
	if i := d.Schedule(t, "crm-pull"); i.Paused {
		t.Fatalf("after Resume: %+v", i)
	}

	// Add: a bad spec is refused, the dialog stays open with the message; then it is added.
	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.ID("sched-add")),
		chromedp.WaitVisible(chromedp.ID("sched-add-dialog")),
		chromedp.SendKeys(chromedp.ID("sched-add-name"), "weekly-import"),
		chromedp.SendKeys(chromedp.ID("sched-add-spec"), "61 * * * *"),
		chromedp.SendKeys(chromedp.ID("sched-add-location"), "Europe/Amsterdam"),
		chromedp.SendKeys(chromedp.ID("sched-add-request"), "crm.import-contact"),
		chromedp.SetValue(chromedp.ID("sched-add-payload"), `{"name": "Ann Lee"}`),
		chromedp.Click(chromedp.ID("sched-add-ok")),
		poll(`document.getElementById("sched-add-error").textContent.indexOf("Spec: invalid cron expression") >= 0`),
	))
	screenshot(t, tab, "schedules-add-refused")
	must(t, chromedp.Do(tab,
		chromedp.SetValue(chromedp.ID("sched-add-spec"), "0 6 * * 1"),
		chromedp.Click(chromedp.ID("sched-add-ok")),
		chromedp.WaitNotVisible(chromedp.ID("sched-add-dialog")),
		chromedp.WaitVisible(chromedp.CSS(schedSel("weekly-import")+` [data-act=remove]`)),
	))
	if i := d.Schedule(t, "weekly-import"); i.Request != "crm.import-contact" || string(i.Payload) != `{"name":"Ann Lee"}` ||
		i.Location != "Europe/Amsterdam" {
		t.Fatalf("added %+v (payload %s)", i, i.Payload)
	}
	screenshot(t, tab, "schedules-added")

	must(t, chromedp.Do(tab,
		chromedp.Click(chromedp.CSS(schedSel("weekly-import")+` [data-act=remove]`)),
		chromedp.WaitVisible(chromedp.ID("confirm-dialog")),
		chromedp.Click(chromedp.ID("confirm-ok")),
		chromedp.WaitVisible(chromedp.CSS(schedSel("weekly-import")+` .badge.s-removed`)),
		poll(`document.querySelector(`+js(schedSel("weekly-import")+` [data-act=run-now]`)+`).hidden`),
	))
	if i := d.Schedule(t, "weekly-import"); i.RemovedBy != "admin" {
		t.Fatalf("after Remove: %+v", i)
	}
	posts := d.Posts()
	for _, w := range []string{"POST /api/schedules/crm-pull/pause", "POST /api/schedules/crm-pull/run-now",
		"POST /api/schedules/crm-pull/resume", "POST /api/schedules", "DELETE /api/schedules/weekly-import"} {
		if !strings.Contains(posts, w) {
			t.Errorf("no %s among the requests:\n%s", w, posts)
		}
	}
}
