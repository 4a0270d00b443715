package admin_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

var scheduleControlRoutes = []struct{ method, path, body string }{
	{"POST", "/api/schedules", `{"name": "nightly", "spec": "@daily", "request": "crm.import-contact", "payload": {"email": "a@example"}}`},
	{"POST", "/api/schedules/nightly/pause", ""},
	{"POST", "/api/schedules/nightly/resume", ""},
	{"POST", "/api/schedules/nightly/run-now", ""},
	{"DELETE", "/api/schedules/nightly", ""},
}

func TestScheduleControlRoutesNeedAnAdmin(t *testing.T) {
	f := newFixture(t, durableConfig())
	for _, rt := range scheduleControlRoutes {
		res := do(t, f.h, rt.method, rt.path, rt.body)
		if res.Code != http.StatusUnauthorized || !strings.HasPrefix(res.Header().Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s %s without a token: %d, want 401 with a challenge", rt.method, rt.path, res.Code)
		}
		if res := do(t, f.h, rt.method, rt.path, rt.body, "Authorization", "Bearer wrong"); res.Code != http.StatusForbidden {
			t.Errorf("%s %s with a wrong token: %d, want 403", rt.method, rt.path, res.Code)
		}
	}
	if infos, _ := f.q.Schedules(context.Background()); len(infos) != 0 {
		t.Fatalf("an unauthorized request added a schedule: %+v", infos)
	}
}

// Every route that changes a schedule needs the session's CSRF token, and refuses a
// cross-origin request.
func TestScheduleControlRoutesNeedCSRF(t *testing.T) {
	f := newFixture(t, durableConfig())
	res := auth(t, f.h, "POST", "/api/session", "")
	want(t, res, http.StatusOK)
	csrf, _ := res.body["csrf_token"].(string)
	c := res.Result().Cookies()[0]
	cookie := c.Name + "=" + c.Value
	for _, rt := range scheduleControlRoutes {
		want(t, do(t, f.h, rt.method, rt.path, rt.body, "Cookie", cookie), http.StatusForbidden)
		want(t, do(t, f.h, rt.method, rt.path, rt.body, "Authorization", "Bearer "+token, "Sec-Fetch-Site", "cross-site"), http.StatusForbidden)
	}
	if infos, _ := f.q.Schedules(context.Background()); len(infos) != 0 {
		t.Fatalf("a request without the CSRF token added a schedule: %+v", infos)
	}
	for i, rt := range scheduleControlRoutes {
		status := []int{http.StatusCreated, http.StatusOK, http.StatusOK, http.StatusAccepted, http.StatusOK}[i]
		want(t, do(t, f.h, rt.method, rt.path, rt.body, "Cookie", cookie, "X-CSRF-Token", csrf), status)
	}
}

func TestScheduleControlRoutes(t *testing.T) {
	f := newFixture(t, durableConfig())
	ctx := context.Background()
	res := auth(t, f.h, "POST", "/api/schedules", `{"name": "nightly", "spec": "0 2 * * *", "location": "Europe/Paris",
		"request": "crm.import-contact", "payload": {"email": "a@example"}}`)
	want(t, res, http.StatusCreated)
	s, _ := res.body["schedule"].(map[string]any)
	if s["name"] != "nightly" || s["location"] != "Europe/Paris" || s["request"] != "crm.import-contact" || s["declared_in_code"] != false ||
		s["paused"] != false || s["payload"].(map[string]any)["email"] != "a@example" {
		t.Fatalf("added %v", res.body)
	}

	res = auth(t, f.h, "POST", "/api/schedules/nightly/pause", `{"until": "2099-01-01T00:00:00Z"}`)
	want(t, res, http.StatusOK)
	if s := res.body["schedule"].(map[string]any); s["paused"] != true || s["paused_by"] != "admin" || s["paused_until"] != "2099-01-01T00:00:00Z" {
		t.Fatalf("paused %v", res.body)
	}
	res = auth(t, f.h, "GET", "/api/schedules", "")
	want(t, res, http.StatusOK)
	if l := res.body["schedules"].([]any); len(l) != 1 || l[0].(map[string]any)["paused"] != true {
		t.Fatalf("list %v", res.body)
	}
	res = auth(t, f.h, "POST", "/api/schedules/nightly/resume", "")
	want(t, res, http.StatusOK)
	if s := res.body["schedule"].(map[string]any); s["paused"] != false || s["paused_at"] != nil {
		t.Fatalf("resumed %v", res.body)
	}
	res = auth(t, f.h, "POST", "/api/schedules/nightly/run-now", "")
	want(t, res, http.StatusAccepted)
	if s := res.body["schedule"].(map[string]any); s["run_now_by"] != "admin" || s["run_now_at"] == nil {
		t.Fatalf("run now %v", res.body)
	}
	res = auth(t, f.h, "DELETE", "/api/schedules/nightly", "")
	want(t, res, http.StatusOK)
	if s := res.body["schedule"].(map[string]any); s["removed_by"] != "admin" || s["removed_at"] == nil || s["run_now_at"] != nil {
		t.Fatalf("removed %v", res.body)
	}
	audit, err := f.q.Audit(ctx, durable.AuditFilter{TargetKind: record.AuditTargetSchedule, Target: "nightly"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range audit {
		got = append(got, e.Actor+" "+string(e.Action))
	}
	if strings.Join(got, ", ") != "admin remove, admin run_now, admin resume, admin pause, admin add" {
		t.Fatalf("audit %v", got)
	}
	// A removed schedule: 404 for its changes, its run log still shown.
	want(t, auth(t, f.h, "POST", "/api/schedules/nightly/pause", ""), http.StatusNotFound)
	want(t, auth(t, f.h, "GET", "/api/schedules/nightly/runs", ""), http.StatusOK)
}

func TestScheduleControlRoutesNotFound(t *testing.T) {
	f := newFixture(t, durableConfig())
	for _, rt := range scheduleControlRoutes[1:] {
		res := auth(t, f.h, rt.method, rt.path, rt.body)
		want(t, res, http.StatusNotFound)
		if msg := res.body["error"].(string); msg != `unknown schedule "nightly"` {
			t.Errorf("%s %s: %q", rt.method, rt.path, msg)
		}
	}
	// A queue that is an Operations but no ScheduleControls: the routes say what it lacks.
	h, err := admin.New(admin.Config{Queue: struct{ admin.Operations }{f.q}, Sender: nopSender{}, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range scheduleControlRoutes {
		res := auth(t, h, rt.method, rt.path, rt.body)
		want(t, res, http.StatusNotFound)
		if msg := res.body["error"].(string); !strings.Contains(msg, "admin.ScheduleControls") {
			t.Errorf("%s %s: %q", rt.method, rt.path, msg)
		}
	}
}

func TestScheduleControlRoutesRefuseBadInput(t *testing.T) {
	f := newFixture(t, durableConfig())
	durable.Schedule(f.q, "declared", "@hourly", func() *importContact { return &importContact{} })
	add := func(fields string) string {
		return `{"name": "s", "spec": "@hourly", "request": "crm.import-contact", ` + fields + `}`
	}
	for _, c := range []struct{ method, path, body, want string }{
		{"POST", "/api/schedules", `{"name": "s", "spec": "61 * * * *", "request": "crm.import-contact"}`, `Spec: invalid cron expression "61 * * * *"`},
		{"POST", "/api/schedules", `{"name": "s", "spec": "@hourly", "location": "Mars/Olympus", "request": "crm.import-contact"}`, `Location "Mars/Olympus" is not a known time zone`},
		{"POST", "/api/schedules", `{"name": "s", "spec": "@hourly", "request": "crm.nope"}`, `Request "crm.nope" is not a registered request name`},
		{"POST", "/api/schedules", add(`"payload": {"email": 5}`), "Payload does not decode as a crm.import-contact request"},
		{"POST", "/api/schedules", `{"spec": "@hourly", "request": "crm.import-contact"}`, "Name is empty"},
		{"POST", "/api/schedules", `{"name": "s", "color": "red"}`, `unknown field "color"`},
		{"POST", "/api/schedules", `{"name": 5}`, `wrong JSON type for field "name"`},
		{"POST", "/api/schedules/declared/pause", `{"until": "tomorrow"}`, `field "until": "tomorrow" is not an RFC 3339 time`},
		{"POST", "/api/schedules/declared/run-now", `{"now": true}`, `unknown field "now"`},
	} {
		res := auth(t, f.h, c.method, c.path, c.body)
		want(t, res, http.StatusBadRequest)
		if msg := res.body["error"].(string); !strings.Contains(msg, c.want) {
			t.Errorf("%s %s %s: %q, want %q", c.method, c.path, c.body, msg, c.want)
		}
	}
	// Conflicts: a name the code declares, a name taken.
	res := auth(t, f.h, "POST", "/api/schedules", `{"name": "declared", "spec": "@daily", "request": "crm.import-contact"}`)
	want(t, res, http.StatusConflict)
	if msg := res.body["error"].(string); !strings.Contains(msg, "declared in code") {
		t.Errorf("declared: %q", msg)
	}
	want(t, auth(t, f.h, "POST", "/api/schedules", add(`"payload": {}`)), http.StatusCreated)
	want(t, auth(t, f.h, "POST", "/api/schedules", add(`"payload": {}`)), http.StatusConflict)
	res = auth(t, f.h, "POST", "/api/schedules/s/pause", `{"until": "`+time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)+`"}`)
	want(t, res, http.StatusBadRequest)
	if msg := res.body["error"].(string); !strings.Contains(msg, "is not in the future") {
		t.Errorf("a pause that ended: %q", msg)
	}
	// The zero time is a time in the past too, not "until resumed" (it paused the schedule
	// for ever), as the pauses of keys and names answer.
	res = auth(t, f.h, "POST", "/api/schedules/s/pause", `{"until": "0001-01-01T00:00:00Z"}`)
	want(t, res, http.StatusBadRequest)
	if msg := res.body["error"].(string); !strings.Contains(msg, "is not in the future: leave it out to pause until resumed") {
		t.Errorf("a pause until the zero time: %q", msg)
	}
}
