package admin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

// Run now of an item its request name's pause holds back answers 409 with the result
// "paused", naming the pause, and changes nothing.
func TestRunNowOfAPausedItemAnswersConflict(t *testing.T) {
	f := newItemsFixture(t)
	ctx := context.Background()
	id := got[durable.Enqueued](t)(f.q.Enqueue(ctx, &importContact{Email: "held@example"}, durable.WithDelay(time.Hour))).ID
	before := got[record.Item](t)(f.q.Item(ctx, id))
	got[record.Pause](t)(f.q.Pause(ctx, durable.NameTarget("crm.import-contact"), "alice", durable.PauseReason("import frozen")))
	res := auth(t, f.h, "POST", "/api/items/"+itoa(id)+"/run-now", `{}`)
	want(t, res, http.StatusConflict)
	if res.body["result"] != string(durable.ItemPaused) || res.body["state"] != "pending" ||
		!strings.Contains(errorOf(res), "name crm.import-contact by alice until resumed; reason: import frozen") {
		t.Fatalf("run now of a paused item = %v", res.body)
	}
	if after := got[record.Item](t)(f.q.Item(ctx, id)); !after.NextAt.Equal(before.NextAt) {
		t.Fatalf("the paused item changed: due %v, was %v", after.NextAt, before.NextAt)
	}
	e := got[[]record.AuditEntry](t)(f.q.Audit(ctx, durable.AuditFilter{TargetKind: record.AuditTargetItem, Limit: 1}))[0]
	if e.Action != record.AuditRunNow || e.Outcome != record.AuditNoChange || !strings.Contains(e.Detail, "name crm.import-contact") {
		t.Fatalf("audit = %+v", e)
	}
}

func itoa(id record.ItemID) string { return strconv.FormatInt(int64(id), 10) }

// A caller that went away before a pause, audit or schedule route finished is answered 503,
// saying so, and logged as no server error.
func TestPauseAndScheduleRoutesAnswerACallerThatLeft(t *testing.T) {
	f := newFixture(t, durableConfig())
	core, logs := observer.New(zapcore.ErrorLevel)
	h, err := admin.New(admin.Config{Queue: f.q, Sender: f.m, Token: token, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	got[record.ScheduleInfo](t)(f.q.AddSchedule(context.Background(), durable.ScheduleSpec{Name: "s", Spec: "@hourly", Request: "crm.import-contact",
		Payload: []byte(`{"email":"x@example"}`)}, "ops"))
	left, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/pauses", ""},
		{"POST", "/api/pauses", `{"kind":"name","target":"crm.import-contact","reason":"outage"}`},
		{"POST", "/api/pauses/resume", `{"kind":"name","target":"crm.import-contact"}`},
		{"GET", "/api/audit", ""},
		{"POST", "/api/schedules", `{"name":"t","spec":"@hourly","request":"crm.import-contact","payload":{"email":"y@example"}}`},
		{"POST", "/api/schedules/s/pause", `{}`},
		{"POST", "/api/schedules/s/resume", `{}`},
		{"POST", "/api/schedules/s/run-now", `{}`},
		{"DELETE", "/api/schedules/s", ""},
	} {
		r := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body)).WithContext(left)
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "the request ended") {
			t.Errorf("%s %s by a caller that left: %d %s; want 503 saying the request ended", c.method, c.path, w.Code, w.Body)
		}
	}
	for _, e := range logs.All() {
		t.Errorf("logged %s: %s %v", e.Level, e.Message, e.ContextMap())
	}
}

// The dashboard's run-now of an item a pause holds back shows, as an error notice, that the
// pause holds it and nothing changed.
func TestDashboardRunNowOfAPausedItem(t *testing.T) {
	f := newItemsFixture(t)
	ctx := context.Background()
	got[record.Pause](t)(f.q.Pause(ctx, durable.NameTarget("crm.import-contact"), "alice", durable.PauseReason("import frozen")))
	srv := httptest.NewServer(f.h)
	t.Cleanup(srv.Close)
	tab := newBrowser(t, 1280, 900)
	must(t, chromedp.Do(tab,
		signIn(srv.URL),
		chromedp.WaitVisible(chromedp.CSS(itemRowSel(f.pending, "run-now"))),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("items-title").scrollIntoView()`),
		poll(`(b => b ? (b.click(), true) : false)(document.querySelector(`+js(itemRowSel(f.pending, "run-now"))+`))`),
		chromedp.WaitVisible(chromedp.ID("confirm-dialog")),
		chromedp.Click(chromedp.ID("confirm-ok")),
		poll(`document.getElementById("notice").textContent.indexOf("held back by the pause of name crm.import-contact by alice") >= 0`),
	))
	screenshot(t, tab, "item-run-now-paused")
	wantErrorNotice(t, tab, "the refused run-now")
	if it := got[record.Item](t)(f.q.Item(ctx, f.pending)); it.State != record.StatePending || !it.NextAt.After(time.Now()) {
		t.Errorf("the paused item changed: %+v", it)
	}
}
