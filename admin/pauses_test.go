package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/durable"
)

var _ admin.Pauses = (*durable.Queue)(nil)

func TestPauseRoutes(t *testing.T) {
	f := newFixture(t, durableConfig())
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	res := auth(t, f.h, "POST", "/api/pauses", `{"kind":"breaker_key","target":"smtp.example.com","until":"`+until+`","reason":"rate limited"}`)
	want(t, res, http.StatusOK)
	p, _ := res.body["pause"].(map[string]any)
	if p["kind"] != "breaker_key" || p["target"] != "smtp.example.com" || p["until"] != until || p["actor"] != "admin" || p["reason"] != "rate limited" || p["expired"] != false {
		t.Fatalf("pause = %v", res.body)
	}
	want(t, auth(t, f.h, "POST", "/api/pauses", `{"kind":"name","target":"crm.import-contact","reason":"bad deploy"}`), http.StatusOK)

	res = auth(t, f.h, "GET", "/api/pauses", "")
	want(t, res, http.StatusOK)
	list, _ := res.body["pauses"].([]any)
	if len(list) != 2 {
		t.Fatalf("pauses = %v", res.body)
	}
	if n, _ := list[1].(map[string]any); n["kind"] != "name" || n["until"] != nil {
		t.Fatalf("name pause = %v; want until null", n)
	}
	ps, err := f.q.Pauses(context.Background())
	if err != nil || len(ps) != 2 {
		t.Fatalf("queue's pauses %+v, %v", ps, err)
	}

	res = auth(t, f.h, "POST", "/api/pauses/resume", `{"kind":"name","target":"crm.import-contact"}`)
	want(t, res, http.StatusOK)
	if res.body["resumed"] != true {
		t.Fatalf("resume = %v", res.body)
	}
	res = auth(t, f.h, "POST", "/api/pauses/resume", `{"kind":"name","target":"crm.import-contact"}`)
	want(t, res, http.StatusOK)
	if res.body["resumed"] != false {
		t.Fatalf("second resume = %v; want resumed false", res.body)
	}

	// The audit log, newest first, paged with before.
	res = auth(t, f.h, "GET", "/api/audit", "")
	want(t, res, http.StatusOK)
	entries, _ := res.body["entries"].([]any)
	var got []string
	for _, e := range entries {
		m := e.(map[string]any)
		got = append(got, fmt.Sprint(m["action"], " ", m["target_kind"], " ", m["target"], " ", m["actor"], " ", m["outcome"]))
	}
	wantLog := "resume name crm.import-contact admin no_change|resume name crm.import-contact admin done|pause name crm.import-contact admin done|pause breaker_key smtp.example.com admin done"
	if strings.Join(got, "|") != wantLog || res.body["next_before"] != nil {
		t.Fatalf("audit = %v\nwant %s and no next page", res.body, wantLog)
	}
	res = auth(t, f.h, "GET", "/api/audit?limit=2", "")
	want(t, res, http.StatusOK)
	next, _ := res.body["next_before"].(float64)
	if entries, _ := res.body["entries"].([]any); len(entries) != 2 || next == 0 {
		t.Fatalf("page 1 = %v", res.body)
	}
	res = auth(t, f.h, "GET", fmt.Sprintf("/api/audit?limit=2&before=%d", int64(next)), "")
	want(t, res, http.StatusOK)
	if entries, _ := res.body["entries"].([]any); len(entries) != 2 || entries[1].(map[string]any)["target"] != "smtp.example.com" {
		t.Fatalf("page 2 = %v", res.body)
	}
	res = auth(t, f.h, "GET", "/api/audit?target_kind=breaker_key&target=smtp.example.com", "")
	want(t, res, http.StatusOK)
	if entries, _ := res.body["entries"].([]any); len(entries) != 1 {
		t.Fatalf("filtered = %v", res.body)
	}
}

// Bad input answers 400 naming each bad field, and nothing is paused.
func TestPauseRoutesRefuseBadInput(t *testing.T) {
	f := newFixture(t, durableConfig())
	past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	for _, c := range []struct{ method, path, body, want string }{
		{"POST", "/api/pauses", `{"kind":"queue","target":"x","reason":"r"}`, `field "kind" "queue"`},
		{"POST", "/api/pauses", `{"target":"x","reason":"r"}`, `field "kind" is required`},
		{"POST", "/api/pauses", `{"kind":"name","target":" ","reason":"r"}`, `field "target" is required`},
		{"POST", "/api/pauses", `{"kind":"name","target":"x","until":"` + past + `","reason":"r"}`, `field "until" "` + past + `" is not in the future`},
		{"POST", "/api/pauses", `{"kind":"name","target":"x","until":"tomorrow","reason":"r"}`, `field "until" "tomorrow": want an RFC 3339 time`},
		{"POST", "/api/pauses", `{"kind":"name","target":"x"}`, `field "reason" is required`},
		{"POST", "/api/pauses", `{"kind":"name","target":"x","reason":"r","queue":"q"}`, `unknown field "queue"`},
		{"POST", "/api/pauses", `{"kind":"name","target":5,"reason":"r"}`, `field "target"`},
		{"POST", "/api/pauses/resume", `{"kind":"nam","target":"x"}`, `field "kind" "nam"`},
		{"POST", "/api/pauses/resume", `{"kind":"name"}`, `field "target" is required`},
		{"GET", "/api/audit?target=x", "", "target is given without target_kind"},
		{"GET", "/api/audit?before=-3", "", `before "-3"`},
		{"GET", "/api/audit?limit=501", "", `limit "501"`},
		{"GET", "/api/audit?limt=5", "", `unknown query parameter "limt"`},
		{"GET", "/api/audit?target_kind=planet", "", `target_kind "planet": want one of`},
		{"GET", "/api/pauses?x=1", "", `unknown query parameter "x"`},
		{"POST", "/api/pauses", `{"kind":"breaker_key","target":"` + strings.Repeat("k", 2000) + `","reason":"r"}`, `field "target" is 2000 bytes, more than 1024`},
	} {
		res := auth(t, f.h, c.method, c.path, c.body)
		want(t, res, http.StatusBadRequest)
		if msg, _ := res.body["error"].(string); !strings.Contains(msg, c.want) {
			t.Errorf("%s %s %s: error %q, want it to say %s", c.method, c.path, c.body, msg, c.want)
		}
	}
	// Several problems are all named.
	res := auth(t, f.h, "POST", "/api/pauses", `{"kind":"q","until":"x"}`)
	want(t, res, http.StatusBadRequest)
	for _, field := range []string{`"kind"`, `"target"`, `"until"`, `"reason"`} {
		if msg, _ := res.body["error"].(string); !strings.Contains(msg, field) {
			t.Errorf("error %q does not name %s", msg, field)
		}
	}
	if ps, err := f.q.Pauses(context.Background()); err != nil || len(ps) != 0 {
		t.Fatalf("pauses after refusals: %+v, %v", ps, err)
	}
}

// The routes need an admin, and the state changes a session's CSRF token.
func TestPauseRoutesNeedAnAdminAndCSRF(t *testing.T) {
	f := newFixture(t, durableConfig())
	for _, rt := range []struct{ method, path string }{
		{"GET", "/api/pauses"}, {"POST", "/api/pauses"}, {"POST", "/api/pauses/resume"}, {"GET", "/api/audit"},
	} {
		if res := do(t, f.h, rt.method, rt.path, ""); res.Code != http.StatusUnauthorized {
			t.Errorf("%s %s without a token: %d, want 401", rt.method, rt.path, res.Code)
		}
		if res := do(t, f.h, rt.method, rt.path, "", "Authorization", "Bearer wrong"); res.Code != http.StatusForbidden {
			t.Errorf("%s %s with a wrong token: %d, want 403", rt.method, rt.path, res.Code)
		}
	}
	res := auth(t, f.h, "POST", "/api/session", "")
	want(t, res, http.StatusOK)
	csrf, _ := res.body["csrf_token"].(string)
	c := res.Result().Cookies()[0]
	cookie := c.Name + "=" + c.Value
	body := `{"kind":"name","target":"crm.import-contact","reason":"r"}`
	want(t, do(t, f.h, "POST", "/api/pauses", body, "Cookie", cookie), http.StatusForbidden)
	want(t, do(t, f.h, "POST", "/api/pauses", body, "Cookie", cookie, "X-CSRF-Token", csrf+"x"), http.StatusForbidden)
	// A cross-origin request is refused even with the token.
	want(t, do(t, f.h, "POST", "/api/pauses", body, "Cookie", cookie, "X-CSRF-Token", csrf, "Sec-Fetch-Site", "cross-site"), http.StatusForbidden)
	if ps, _ := f.q.Pauses(context.Background()); len(ps) != 0 {
		t.Fatalf("a refused request paused: %+v", ps)
	}
	want(t, do(t, f.h, "POST", "/api/pauses", body, "Cookie", cookie, "X-CSRF-Token", csrf), http.StatusOK)
	want(t, do(t, f.h, "POST", "/api/pauses/resume", `{"kind":"name","target":"crm.import-contact"}`, "Cookie", cookie), http.StatusForbidden)
	if ps, _ := f.q.Pauses(context.Background()); len(ps) != 1 {
		t.Fatalf("a resume without the CSRF token resumed: %+v", ps)
	}
	want(t, do(t, f.h, "GET", "/api/audit", "", "Cookie", cookie), http.StatusOK)
}

// A queue that is not an admin.Pauses (a stand-in of Operations alone) answers 404 naming
// what it lacks; so does a handler without a queue.
func TestPauseRoutesNeedAPausingQueue(t *testing.T) {
	h, err := admin.New(admin.Config{Queue: downQueue{}, Sender: nopSender{}, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range []struct{ method, path, body, want string }{
		{"GET", "/api/pauses", "", "does not support pauses"},
		{"POST", "/api/pauses", `{"kind":"name","target":"x","reason":"r"}`, "does not support pauses"},
		{"POST", "/api/pauses/resume", `{"kind":"name","target":"x"}`, "does not support pauses"},
		{"GET", "/api/audit", "", "has no audit log"},
	} {
		res := auth(t, h, rt.method, rt.path, rt.body)
		want(t, res, http.StatusNotFound)
		if msg, _ := res.body["error"].(string); !strings.Contains(msg, rt.want) {
			t.Errorf("%s %s: %q, want it to say %s", rt.method, rt.path, msg, rt.want)
		}
	}
	reg := newFixture(t, durableConfig()).reg
	h, err = admin.New(admin.Config{Breakers: reg, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	res := auth(t, h, "GET", "/api/pauses", "")
	want(t, res, http.StatusNotFound)
	if msg, _ := res.body["error"].(string); !strings.Contains(msg, "no durable queue") {
		t.Errorf("without a queue: %q", msg)
	}
}
