package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-go/switchboard/admin"
)

// PUT sets (and replaces) a limit, GET lists it with its slots in use, DELETE removes it; each
// change is audited under the principal; bad input is refused naming every problem.
func TestConcurrencyLimitRoutes(t *testing.T) {
	f := newFixture(t, durableConfig())
	res := auth(t, f.h, "PUT", "/api/concurrency-limits/smtp.example.com", `{"max":4,"reason":"their connection limit"}`)
	want(t, res, http.StatusOK)
	l, _ := res.body["limit"].(map[string]any)
	if l["key"] != "smtp.example.com" || l["max"] != 4.0 || l["in_use"] != 0.0 || l["actor"] != "admin" || l["reason"] != "their connection limit" {
		t.Fatalf("limit = %v", res.body)
	}
	want(t, auth(t, f.h, "PUT", "/api/concurrency-limits/smtp.example.com", `{"max":6}`), http.StatusOK) // a reason is optional, as in the Go API
	res = auth(t, f.h, "GET", "/api/concurrency-limits", "")
	want(t, res, http.StatusOK)
	list, _ := res.body["limits"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["max"] != 6.0 {
		t.Fatalf("limits = %v", res.body)
	}
	if ls, err := f.q.ConcurrencyLimits(context.Background()); err != nil || len(ls) != 1 || ls[0].Max != 6 {
		t.Fatalf("queue's limits %+v, %v", ls, err)
	}
	for _, bad := range []struct{ path, body, want string }{
		{"/api/concurrency-limits/k", `{"reason":"r"}`, `field "max" is required`},
		{"/api/concurrency-limits/k", `{"max":0}`, `field "max" 0 is outside [1, 1000000]`},
		{"/api/concurrency-limits/a%00b", `{"max":1}`, "holds a NUL byte"},
		{"/api/concurrency-limits/a%FFb", `{"max":1}`, "is not valid UTF-8"},
		{"/api/concurrency-limits/k", `{"max":1,"reason":"` + strings.Repeat("r", 1025) + `"}`, `field "reason" is 1025 bytes, more than 1024`},
		{"/api/concurrency-limits/" + strings.Repeat("k", 1025), `{"max":1,"reason":"r"}`, "the key is 1025 bytes"},
		{"/api/concurrency-limits/k", `{"max":"four","reason":"r"}`, "max"},
	} {
		res := auth(t, f.h, "PUT", bad.path, bad.body)
		want(t, res, http.StatusBadRequest)
		if msg, _ := res.body["error"].(string); !strings.Contains(msg, bad.want) {
			t.Errorf("PUT %s %s: %q, want it to say %s", bad.path[:min(len(bad.path), 40)], bad.body, msg, bad.want)
		}
	}
	res = auth(t, f.h, "DELETE", "/api/concurrency-limits/smtp.example.com", "")
	want(t, res, http.StatusOK)
	if res.body["removed"] != true {
		t.Fatalf("remove = %v", res.body)
	}
	res = auth(t, f.h, "DELETE", "/api/concurrency-limits/smtp.example.com", "")
	want(t, res, http.StatusOK)
	if res.body["removed"] != false {
		t.Fatalf("second remove = %v", res.body)
	}
	res = auth(t, f.h, "GET", "/api/audit?target_kind=breaker_key&target=smtp.example.com", "")
	want(t, res, http.StatusOK)
	var got []string
	for _, e := range res.body["entries"].([]any) {
		m := e.(map[string]any)
		got = append(got, fmt.Sprint(m["action"], " ", m["actor"], " ", m["outcome"]))
	}
	wantLog := "remove_concurrency_limit admin no_change|remove_concurrency_limit admin done|set_concurrency_limit admin done|set_concurrency_limit admin done"
	if strings.Join(got, "|") != wantLog {
		t.Fatalf("audit %v\nwant %s", got, wantLog)
	}
}

// A queue that is not an admin.ConcurrencyLimits answers 404 naming what it lacks.
func TestConcurrencyLimitRoutesNeedALimitingQueue(t *testing.T) {
	h, err := admin.New(admin.Config{Queue: downQueue{}, Sender: nopSender{}, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range []struct{ method, path, body string }{
		{"GET", "/api/concurrency-limits", ""},
		{"PUT", "/api/concurrency-limits/k", `{"max":1,"reason":"r"}`},
		{"DELETE", "/api/concurrency-limits/k", ""},
	} {
		res := auth(t, h, rt.method, rt.path, rt.body)
		want(t, res, http.StatusNotFound)
		if msg, _ := res.body["error"].(string); !strings.Contains(msg, "does not support concurrency limits") {
			t.Errorf("%s %s: %q", rt.method, rt.path, msg)
		}
	}
}
