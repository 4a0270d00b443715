package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The tour's answers: the application's login guards /ops/, the admin's Authorizer lets in
// only the staff, each with their role: the viewer reads and is refused a trip, the operator's
// reads, trip and discard work under the prefix and a configuration change is refused, the
// dashboard and its assets are served there, and a cross-site state change is refused.
func TestRun(t *testing.T) {
	var out strings.Builder
	sum, err := run(context.Background(), &out, filepath.Join(t.TempDir(), "queue.db"), options{addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log("\n" + out.String())

	want := []struct {
		who, method, path string
		status            int
	}{
		{"nobody", "GET", "/ops/api/queue", http.StatusUnauthorized},
		{"nobody", "GET", "/ops/", http.StatusSeeOther},
		{"bob", "POST", "/login", http.StatusSeeOther},
		{"bob", "GET", "/ops/api/queue", http.StatusForbidden},
		{"carol", "POST", "/login", http.StatusSeeOther},
		{"carol", "GET", "/ops/api/queue", http.StatusOK},
		{"carol", "POST", "/ops/api/breakers/https:%2F%2Fsms.example:443/trip", http.StatusForbidden},
		{"ada", "GET", "/ops/api/queue", http.StatusOK},
		{"ada", "GET", "/ops/api/breakers", http.StatusOK},
		{"ada", "POST", "/ops/api/breakers/https:%2F%2Fsms.example:443/trip", http.StatusOK},
		{"ada", "POST", "/ops/api/dead-letters/1/discard", http.StatusOK},
		{"ada", "GET", "/ops/api/dead-letters/1", http.StatusOK},
		{"ada", "PUT", "/ops/api/concurrency-limits/https:%2F%2Fsms.example:443", http.StatusForbidden},
		{"ada", "GET", "/ops/", http.StatusOK},
		{"ada", "GET", "/ops/assets/app.js", http.StatusOK},
		{"ada", "POST", "/ops/api/session", http.StatusOK},
		{"ada", "POST", "/ops/api/breakers/https:%2F%2Fsms.example:443/reset", http.StatusForbidden},
	}
	for _, w := range want {
		a, ok := sum.find(w.who, w.method, w.path)
		if !ok || a.status != w.status {
			t.Errorf("%s: %s %s answered %d, want %d", w.who, w.method, w.path, a.status, w.status)
		}
	}
	if a, _ := sum.find("nobody", "GET", "/ops/"); a.location != "/login" {
		t.Errorf("the dashboard page without a login redirects to %q, want /login", a.location)
	}

	var q struct {
		Items       map[string]int `json:"items"`
		DeadLetters map[string]int `json:"dead_letters"`
	}
	decode(t, sum, "GET", "/ops/api/queue", &q)
	if q.Items["pending"] != 3 || q.DeadLetters["failed"] != 1 {
		t.Errorf("/ops/api/queue: %+v, want 3 pending items and 1 failed letter", q)
	}
	// The last breaker list is after the trip: sms open, smtp closed.
	var last []breaker.Snapshot
	for _, a := range sum.answers {
		if a.path == "/ops/api/breakers" {
			var v struct {
				Breakers []breaker.Snapshot `json:"breakers"`
			}
			if err := json.Unmarshal(a.body, &v); err != nil {
				t.Fatal(err)
			}
			last = v.Breakers
		}
	}
	states := map[string]breaker.State{}
	for _, b := range last {
		states[b.Key] = b.State
	}
	if len(states) != 2 || states[smsEndpoint] != breaker.StateOpen || states[smtpEndpoint] != breaker.StateClosed {
		t.Errorf("the breakers after the trip: %v", states)
	}
	var d struct {
		DeadLetter struct {
			Status string `json:"status"`
		} `json:"dead_letter"`
		Timeline []struct {
			Kind, Actor string
		} `json:"timeline"`
	}
	decode(t, sum, "GET", "/ops/api/dead-letters/1", &d)
	if n := len(d.Timeline); d.DeadLetter.Status != "discarded" || n == 0 || d.Timeline[n-1].Kind != "discard" || d.Timeline[n-1].Actor != "ada" {
		t.Errorf("the discarded letter: %+v", d)
	}
	var s struct {
		Principal string `json:"principal"`
		Role      string `json:"role"`
		CSRF      string `json:"csrf_token"`
	}
	decode(t, sum, "POST", "/ops/api/session", &s)
	if s.Principal != "ada" || s.Role != "operator" || s.CSRF == "" {
		t.Errorf("the dashboard's session: %+v", s)
	}

	page, _ := sum.find("ada", "GET", "/ops/")
	if !strings.HasPrefix(page.contentType, "text/html") || !strings.Contains(string(page.body), "<title>switchboard admin</title>") {
		t.Errorf("/ops/ is not the dashboard: %s %.200s", page.contentType, page.body)
	}
	if js, _ := sum.find("ada", "GET", "/ops/assets/app.js"); !strings.Contains(js.contentType, "javascript") || len(js.body) == 0 {
		t.Errorf("/ops/assets/app.js: %s, %d bytes", js.contentType, len(js.body))
	}
	for _, w := range []struct{ who, method, path, msg string }{
		{"carol", "POST", "/ops/api/breakers/https:%2F%2Fsms.example:443/trip", "forbidden: carol is a viewer; tripping a breaker needs the operator role"},
		{"ada", "PUT", "/ops/api/concurrency-limits/https:%2F%2Fsms.example:443", "forbidden: ada is an operator; setting a concurrency limit needs the admin role"},
		{"bob", "GET", "/ops/api/queue", "forbidden: bob is not on the staff"},
	} {
		a, _ := sum.find(w.who, w.method, w.path)
		if !strings.Contains(string(a.body), w.msg) {
			t.Errorf("%s: %s %s: %s; want the message %q", w.who, w.method, w.path, a.body, w.msg)
		}
	}
	if !strings.Contains(out.String(), "cross-origin request detected") {
		t.Errorf("the cross-site refusal is not printed")
	}
}

// With serve, run keeps the application up until its context ends, the passwords printed. The
// dashboard's flow in a browser works under the prefix: the login page, the sign-in that
// exchanges whatever token for a session of the logged-in operator, and a state change made
// with the session's cookie, refused without its CSRF token and done with it.
func TestServeUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out strings.Builder
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	reached := false
	_, err := run(ctx, &out, filepath.Join(t.TempDir(), "queue.db"), options{addr: "127.0.0.1:0", serve: true,
		served: func(base string, passwords map[string]string) {
			defer cancel()
			jar, _ := cookiejar.New(nil)
			browser := &http.Client{Transport: tr, Jar: jar}
			send := func(method, path, body string, h http.Header) (int, []byte) {
				t.Helper()
				req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
				for k, v := range h {
					req.Header[k] = v
				}
				res, err := browser.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				b, _ := io.ReadAll(res.Body)
				return res.StatusCode, b
			}
			if code, _ := send("GET", "login", "", nil); code != http.StatusOK {
				t.Errorf("GET /login: %d", code)
			}
			form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
			// The login redirects to /ops/, which the client follows: the dashboard page.
			if code, page := send("POST", "login", "user=ada&password="+passwords["ada"], form); code != http.StatusOK || !strings.Contains(string(page), "<title>switchboard admin</title>") {
				t.Fatalf("the login did not lead to the dashboard: %d %.200s", code, page)
			}
			code, body := send("POST", "ops/api/session", "", http.Header{"Authorization": {"Bearer typed-in-the-token-box"}})
			var s struct {
				CSRF      string `json:"csrf_token"`
				Principal string `json:"principal"`
			}
			if err := json.Unmarshal(body, &s); err != nil || code != http.StatusOK || s.Principal != "ada" || s.CSRF == "" {
				t.Fatalf("the dashboard's sign-in: %d %s", code, body)
			}
			trip := "ops/api/breakers/" + url.PathEscape(smtpEndpoint) + "/trip"
			if code, body := send("POST", trip, "", nil); code != http.StatusForbidden || !strings.Contains(string(body), "CSRF") {
				t.Errorf("a trip with the session cookie and no CSRF token: %d %s", code, body)
			}
			if code, body := send("POST", trip, "", http.Header{"X-Csrf-Token": {s.CSRF}}); code != http.StatusOK || !strings.Contains(string(body), `"open"`) {
				t.Errorf("a trip with the session's CSRF token: %d %s", code, body)
			}
			reached = true
		}})
	if err != nil {
		t.Fatal(err)
	}
	if !reached || !strings.Contains(out.String(), "serving until Ctrl-C: sign in at http://127.0.0.1:") || !strings.Contains(out.String(), "as ada (password ") {
		t.Errorf("serve mode: reached %v, output:\n%s", reached, out.String())
	}
}

// decode unmarshals the body of ada's answer to method path into v.
func decode(t *testing.T, sum *summary, method, path string, v any) {
	t.Helper()
	a, ok := sum.find("ada", method, path)
	if !ok {
		t.Fatalf("ada made no %s %s", method, path)
	}
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("%s %s: %v in %s", method, path, err, a.body)
	}
}

// A login lasts loginTTL: past it, the session cookie is refused (an API request 401 saying
// the login expired, a page sent to the login form) and forgotten.
func TestLoginExpires(t *testing.T) {
	now := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	a := newApp()
	a.now = func() time.Time { return now }
	h := a.routes(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := userKey.Get(r.Context())
		io.WriteString(w, "admin for "+u.name)
	}))
	send := func(method, path, cookie, body string) *httptest.ResponseRecorder {
		t.Helper()
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		if body != "" {
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if cookie != "" {
			r.Header.Set("Cookie", cookie)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	res := send("POST", "/login", "", "user=carol&password="+a.users["carol"].password)
	cookies := res.Result().Cookies()
	if res.Code != http.StatusSeeOther || len(cookies) != 1 || !cookies[0].Expires.Equal(now.Add(loginTTL)) || cookies[0].MaxAge != int(loginTTL/time.Second) {
		t.Fatalf("login: %d, cookies %+v", res.Code, cookies)
	}
	cookie := cookies[0].Name + "=" + cookies[0].Value
	now = now.Add(loginTTL - time.Second)
	if res := send("GET", "/ops/api/queue", cookie, ""); res.Code != http.StatusOK || res.Body.String() != "admin for carol" {
		t.Fatalf("a second before the login expires: %d %s", res.Code, res.Body)
	}
	now = now.Add(time.Second)
	if res := send("GET", "/ops/api/queue", cookie, ""); res.Code != http.StatusUnauthorized || !strings.Contains(res.Body.String(), "your login expired") {
		t.Errorf("when the login expires: %d %s", res.Code, res.Body)
	}
	if res := send("GET", "/ops/", cookie, ""); res.Code != http.StatusSeeOther || res.Header().Get("Location") != "/login" {
		t.Errorf("the page after the login expired: %d to %q", res.Code, res.Header().Get("Location"))
	}
	a.mu.Lock()
	left := len(a.sessions)
	a.mu.Unlock()
	if left != 0 {
		t.Errorf("%d sessions kept after they expired", left)
	}
}
