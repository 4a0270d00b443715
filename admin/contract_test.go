package admin_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/switchboard-go/switchboard/durable/record"
)

func bearer(t *testing.T, f *fixture, method, path, body string) response {
	t.Helper()
	return do(t, f.h, method, path, body, "Authorization", "Bearer "+token)
}

func errorOf(res response) string { msg, _ := res.body["error"].(string); return msg }

// A query net/url cannot parse (more than 10,000 parameters, a bad escape, a semicolon) is a
// 400 naming the problem. r.URL.Query() used to drop the parse error and with it every
// filter: the listing answered 200 with letters of every status.
func TestQueryThatCannotBeParsedIsRefused(t *testing.T) {
	f := newFixture(t, durableConfig())
	many := "status=replayed" + strings.Repeat("&limit=1", 10_000)
	for _, path := range []string{
		"/api/dead-letters?" + many,
		"/api/dead-letters?status=replayed&source=%zz",
		"/api/dead-letters?status=replayed;limit=1",
		"/api/schedules/nightly/runs?" + strings.Repeat("limit=1&", 10_001),
		"/api/schedules/nightly/runs?limit=%zz",
	} {
		res := bearer(t, f, "GET", path, "")
		if res.Code != http.StatusBadRequest || !strings.Contains(errorOf(res), "query") {
			t.Errorf("GET %.60s…: %d %.300s; want 400 saying the query cannot be parsed", path, res.Code, res.Body)
		}
	}
	res := bearer(t, f, "GET", "/api/dead-letters?"+many, "")
	if msg := errorOf(res); !strings.Contains(msg, "10000") {
		t.Errorf("the error %q does not give the limit", msg)
	}
}

// Every error body is bounded: 9,990 unknown parameters used to be listed one by one, an
// 828 KB body. The answer names a few and says how many more there are.
func TestErrorBodiesAreBounded(t *testing.T) {
	f := newFixture(t, durableConfig())
	var q strings.Builder
	q.WriteString("status=failed")
	for i := range 9_990 {
		fmt.Fprintf(&q, "&unknown%d=1", i)
	}
	res := bearer(t, f, "GET", "/api/dead-letters?"+q.String(), "")
	msg := errorOf(res)
	if res.Code != http.StatusBadRequest || res.Body.Len() > 2048 {
		t.Fatalf("9,990 unknown parameters: %d with a %d-byte body; want 400 with at most 2 KiB", res.Code, res.Body.Len())
	}
	if !strings.Contains(msg, `unknown query parameter "unknown0"`) || !strings.Contains(msg, "and 9985 more") {
		t.Errorf("the error %q does not name the first problems and count the rest", msg)
	}

	// A long value or name is cut in the message, not echoed whole.
	long := strings.Repeat("x", 100_000)
	for _, path := range []string{
		"/api/dead-letters?status=" + long,
		"/api/dead-letters?" + long + "=1",
		"/api/dead-letters/" + long,
		"/api/schedules/" + long + "/runs",
	} {
		res := bearer(t, f, "GET", path, "")
		if res.Code < 400 || res.Body.Len() > 2048 || errorOf(res) == "" {
			t.Errorf("GET %.40s…: %d with a %d-byte body; want an error of at most 2 KiB", path, res.Code, res.Body.Len())
		}
	}
}

// "Authorization: Bearer" with no token presents no credentials: 401 with the Bearer
// challenge, as the docs say. It used to be 403, as a wrong token is.
func TestEmptyBearerIsUnauthorized(t *testing.T) {
	f := newFixture(t, durableConfig())
	for _, hdr := range []string{"Bearer", "Bearer ", "Bearer    ", "bearer "} {
		for _, rt := range []struct{ method, path string }{{"GET", "/api/breakers"}, {"POST", "/api/session"}, {"POST", "/api/dead-letters/replay"}} {
			res := do(t, f.h, rt.method, rt.path, "", "Authorization", hdr)
			if res.Code != http.StatusUnauthorized || !strings.HasPrefix(res.Header().Get("WWW-Authenticate"), "Bearer") || errorOf(res) == "" {
				t.Errorf("%s %s with Authorization %q: %d (WWW-Authenticate %q) %s; want 401 with a Bearer challenge",
					rt.method, rt.path, hdr, res.Code, res.Header().Get("WWW-Authenticate"), res.Body)
			}
		}
	}
	want(t, do(t, f.h, "GET", "/api/breakers", "", "Authorization", "Bearer wrong"), http.StatusForbidden)

	// An empty bearer carries no credentials, so a session cookie beside it still counts.
	login := bearer(t, f, "POST", "/api/session", "")
	want(t, login, http.StatusOK)
	cookie := login.Result().Cookies()[0]
	want(t, do(t, f.h, "GET", "/api/breakers", "", "Authorization", "Bearer ", "Cookie", cookie.Name+"="+cookie.Value), http.StatusOK)
}

// Bulk ids are numbers or decimal strings (the operator contract has ids: string[]); they
// used to have to be numbers, and a string was a 400.
func TestBulkIDsAcceptStringsAndNumbers(t *testing.T) {
	f := newFixture(t, durableConfig())
	a, b := strconv.FormatInt(int64(f.letters[0]), 10), strconv.FormatInt(int64(f.letters[1]), 10)
	res := bearer(t, f, "POST", "/api/dead-letters/discard", `{"ids": ["`+a+`", `+b+`], "reason": "duplicates"}`)
	want(t, res, http.StatusOK)
	results, _ := res.body["results"].([]any)
	if len(results) != 2 {
		t.Fatalf("results %v", res.body)
	}
	for i, r := range results {
		m := r.(map[string]any)
		if m["resolution"] != "discarded" || m["id"] != float64(f.letters[i]) {
			t.Errorf("result %d: %v", i, m)
		}
	}
	for _, id := range f.letters[:2] {
		if d, _, err := f.q.DeadLetter(t.Context(), id); err != nil || d.Status != record.DeadLetterDiscarded {
			t.Errorf("letter %d: %+v, %v", id, d, err)
		}
	}
	c := strconv.FormatInt(int64(f.letters[2]), 10)
	for body, wantMsg := range map[string]string{
		`{"ids": ["abc"]}`:                  `"abc" is not a dead letter id`,
		`{"ids": ["` + c + `x"]}`:           `"` + c + `x" is not a dead letter id`,
		`{"ids": ["-3"]}`:                   `"-3" is not a dead letter id`,
		`{"ids": [" 3"]}`:                   `" 3" is not a dead letter id`,
		`{"ids": [""]}`:                     `"" is not a dead letter id`,
		`{"ids": ["1.5"]}`:                  `"1.5" is not a dead letter id`,
		`{"ids": [1.5]}`:                    `1.5 is not a dead letter id`,
		`{"ids": [0]}`:                      `0 is not a dead letter id`,
		`{"ids": [true]}`:                   `true is not a dead letter id`,
		`{"ids": [null]}`:                   `null is not a dead letter id`,
		`{"ids": ["99999999999999999999"]}`: `"99999999999999999999" is not a dead letter id`,
		`{"ids": ["` + c + `", ` + c + `]}`: c + ` appears more than once`,
	} {
		res := bearer(t, f, "POST", "/api/dead-letters/replay", body)
		if res.Code != http.StatusBadRequest || !strings.Contains(errorOf(res), wantMsg) {
			t.Errorf("%s: %d %s; want 400 naming %s", body, res.Code, res.Body, wantMsg)
		}
	}
	if d, _, err := f.q.DeadLetter(t.Context(), f.letters[2]); err != nil || d.Status != record.DeadLetterFailed || d.RetryCount != 0 {
		t.Errorf("a refused bulk request touched letter %d: %+v, %v", f.letters[2], d, err)
	}
}

// An unknown file under the dashboard's asset path is a JSON 404 like every other answer; it
// used to be net/http's plain-text "404 page not found". The directory is not listed.
func TestAssetNotFoundIsJSON(t *testing.T) {
	f := newFixture(t, durableConfig())
	for _, path := range []string{"/assets/nope.js", "/assets/", "/assets/sub/x.css"} {
		res := do(t, f.h, "GET", path, "")
		if res.Code != http.StatusNotFound || !strings.HasPrefix(res.Header().Get("Content-Type"), "application/json") || errorOf(res) == "" {
			t.Errorf("GET %s: %d %q %q; want a JSON 404", path, res.Code, res.Header().Get("Content-Type"), res.Body)
		}
	}
	for _, path := range []string{"/assets/app.js", "/assets/app.css"} {
		if res := do(t, f.h, "GET", path, ""); res.Code != http.StatusOK {
			t.Errorf("GET %s: %d", path, res.Code)
		}
	}
}

// Every route refuses a query parameter it does not take, those that take none too: a
// misspelt filter would otherwise be ignored and show what was not asked for.
func TestRoutesWithoutParametersRefuseOne(t *testing.T) {
	f := newFixture(t, durableConfig())
	for _, path := range []string{
		"/api/queue", "/api/schedules", "/api/breakers/k", "/api/dead-letters/1", "/api/dead-letters/actions/1",
		"/api/items/1", "/api/items/actions/1",
	} {
		res := bearer(t, f, "GET", path+"?state=dead", "")
		if res.Code != http.StatusBadRequest || !strings.Contains(errorOf(res), `unknown query parameter "state"`) {
			t.Errorf("GET %s?state=dead: %d %.200s; want 400 naming the parameter", path, res.Code, res.Body)
		}
	}
}
