package admin_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
)

func TestSessionCookieAndCSRF(t *testing.T) {
	f := newFixture(t, durableConfig())
	res := auth(t, f.h, "POST", "/api/session", "")
	want(t, res, http.StatusOK)
	csrf, _ := res.body["csrf_token"].(string)
	if csrf == "" || res.body["principal"] != "admin" {
		t.Fatalf("session = %v", res.body)
	}
	cookies := res.Result().Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies %v", cookies)
	}
	c := cookies[0]
	if c.Name != "switchboard_admin" || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure {
		t.Fatalf("cookie %+v", c)
	}
	cookie := c.Name + "=" + c.Value

	res = do(t, f.h, "GET", "/api/session", "", "Cookie", cookie)
	want(t, res, http.StatusOK)
	if res.body["principal"] != "admin" || res.body["csrf_token"] != csrf {
		t.Fatalf("GET session = %v", res.body)
	}
	want(t, do(t, f.h, "GET", "/api/breakers", "", "Cookie", cookie), http.StatusOK)
	// State changes with the cookie need the CSRF token.
	want(t, do(t, f.h, "POST", "/api/breakers/payments/trip", "", "Cookie", cookie), http.StatusForbidden)
	want(t, do(t, f.h, "POST", "/api/breakers/payments/trip", "", "Cookie", cookie, "X-CSRF-Token", csrf+"x"), http.StatusForbidden)
	if s, _ := f.reg.Get("payments"); s.State != breaker.StateClosed {
		t.Fatal("a request without the CSRF token tripped the breaker")
	}
	want(t, do(t, f.h, "POST", "/api/breakers/payments/trip", "", "Cookie", cookie, "X-CSRF-Token", csrf), http.StatusOK)
	// A cookie alone makes no new session.
	want(t, do(t, f.h, "POST", "/api/session", "", "Cookie", cookie), http.StatusUnauthorized)
	// Ending the session needs the token too, and then the cookie is worthless.
	want(t, do(t, f.h, "DELETE", "/api/session", "", "Cookie", cookie), http.StatusForbidden)
	res = do(t, f.h, "DELETE", "/api/session", "", "Cookie", cookie, "X-CSRF-Token", csrf)
	want(t, res, http.StatusOK)
	if c := res.Result().Cookies(); len(c) != 1 || c[0].MaxAge >= 0 {
		t.Fatalf("DELETE session cookies %v", c)
	}
	want(t, do(t, f.h, "GET", "/api/breakers", "", "Cookie", cookie), http.StatusUnauthorized)
	want(t, do(t, f.h, "GET", "/api/breakers", "", "Cookie", "switchboard_admin=forged"), http.StatusUnauthorized)
}

func TestSessionCookieIsSecureOverTLS(t *testing.T) {
	f := newFixture(t, durableConfig())
	r := httptest.NewRequest("POST", "https://ops.example/api/session", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	if c := w.Result().Cookies(); w.Code != 200 || len(c) != 1 || !c[0].Secure {
		t.Fatalf("%d %v", w.Code, c)
	}
}

func TestCrossOriginPostRefused(t *testing.T) {
	f := newFixture(t, durableConfig())
	for _, hdr := range [][]string{
		{"Sec-Fetch-Site", "cross-site"},
		{"Origin", "https://evil.example"},
	} {
		res := do(t, f.h, "POST", "/api/breakers/payments/trip", "", append([]string{"Authorization", "Bearer " + token}, hdr...)...)
		want(t, res, http.StatusForbidden)
	}
	if s, _ := f.reg.Get("payments"); s.State != breaker.StateClosed {
		t.Fatal("a cross-origin request tripped the breaker")
	}
	// Same origin, and reads, pass.
	want(t, do(t, f.h, "POST", "/api/breakers/payments/trip", "", "Authorization", "Bearer "+token, "Sec-Fetch-Site", "same-origin"), http.StatusOK)
	want(t, do(t, f.h, "GET", "/api/breakers", "", "Authorization", "Bearer "+token, "Sec-Fetch-Site", "cross-site"), http.StatusOK)
}

func TestOversizeBodyRefused(t *testing.T) {
	f := newFixture(t, durableConfig())
	big := `{"ids": [1], "reason": "` + strings.Repeat("x", 70<<10) + `"}`
	res := auth(t, f.h, "POST", "/api/dead-letters/discard", big)
	want(t, res, http.StatusRequestEntityTooLarge)
	if d, _, _ := f.q.DeadLetter(t.Context(), f.letters[0]); d.Status != "failed" {
		t.Fatal("an oversize request discarded a letter")
	}
}

func TestSchedulesQueueMetricsAndPage(t *testing.T) {
	f := newFixture(t, durableConfig())
	res := auth(t, f.h, "GET", "/api/schedules", "")
	want(t, res, http.StatusOK)
	if s, ok := res.body["schedules"].([]any); !ok || len(s) != 0 {
		t.Fatalf("schedules = %v", res.body)
	}
	want(t, auth(t, f.h, "GET", "/api/schedules/nightly/runs", ""), http.StatusNotFound)
	want(t, auth(t, f.h, "GET", "/api/schedules/nightly/runs?limit=0", ""), http.StatusBadRequest)
	want(t, auth(t, f.h, "GET", "/api/queue", ""), http.StatusOK)
	res = auth(t, f.h, "GET", "/metrics", "")
	if res.Code != http.StatusOK || res.Body.String() != "# metrics\n" {
		t.Fatalf("metrics: %d %q", res.Code, res.Body)
	}
	// The page holds no data: it loads without credentials, then asks for the token.
	res = do(t, f.h, "GET", "/", "")
	if res.Code != http.StatusOK || !strings.HasPrefix(res.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("dashboard: %d %q", res.Code, res.Header().Get("Content-Type"))
	}
	if res.Header().Get("X-Frame-Options") != "DENY" {
		t.Fatal("the dashboard may be framed")
	}
}

// A refusal says what was wrong with what was sent: a scheme other than Bearer, a session
// cookie this server does not know (sessions live in one process), a number past an int's
// range.
func TestRefusalsSayWhatWasWrong(t *testing.T) {
	h, err := admin.New(admin.Config{Queue: bigQueue{}, Sender: nopSender{}, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		path   string
		hdr    []string
		status int
		says   string
	}{
		{"basic credentials", "/api/dead-letters", []string{"Authorization", "Basic dXNlcjpwYXNz"}, http.StatusForbidden,
			`the Authorization header uses the "Basic" scheme, not Bearer`},
		{"a scheme alone", "/api/dead-letters", []string{"Authorization", "Basic"}, http.StatusForbidden,
			`the Authorization header uses the "Basic" scheme, not Bearer`},
		{"an unknown session", "/api/dead-letters", []string{"Cookie", "switchboard_admin=made-by-another-instance"}, http.StatusUnauthorized,
			"the session cookie names no session of this server"},
		{"an offset past an int", "/api/dead-letters?offset=99999999999999999999", []string{"Authorization", "Bearer " + token}, http.StatusBadRequest,
			`offset "99999999999999999999": the number is past what an integer holds`},
		{"a wrong token", "/api/dead-letters", []string{"Authorization", "Bearer nope"}, http.StatusForbidden,
			"the credentials were refused (wrong token)"},
	} {
		res := do(t, h, "GET", c.path, "", c.hdr...)
		if msg, _ := res.body["error"].(string); res.Code != c.status || !strings.Contains(msg, c.says) {
			t.Errorf("%s: %d %q; want %d saying %q", c.name, res.Code, msg, c.status, c.says)
		}
	}
}
