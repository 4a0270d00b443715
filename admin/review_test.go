package admin_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/mediator"
)

// A token with white space around it (a newline read from a secrets file) is refused by New:
// it used to be accepted, and then no request could ever authenticate.
func TestNewRefusesAPaddedToken(t *testing.T) {
	reg := breaker.NewRegistry(breaker.Config{})
	for _, tok := range []string{" padded ", "secret\n", "   "} {
		if _, err := admin.New(admin.Config{Breakers: reg, Token: tok}); err == nil {
			t.Errorf("New accepted the token %q", tok)
		}
	}
}

// A typed nil in an interface field (a nil *durable.Queue, *breaker.Registry or
// *mediator.Mediator) is refused by New, naming the field: it used to count as set, and the
// first request that used it panicked.
func TestNewRefusesTypedNils(t *testing.T) {
	reg := breaker.NewRegistry(breaker.Config{})
	var (
		noQueue    *durable.Queue
		noRegistry *breaker.Registry
		noSender   *mediator.Mediator
	)
	for field, cfg := range map[string]admin.Config{
		"Config.Queue is a nil *durable.Queue":       {Breakers: reg, Queue: noQueue, Sender: mediator.New(nil, mediator.Config{}), Token: token},
		"Config.Breakers is a nil *breaker.Registry": {Breakers: noRegistry, Token: token},
		"Config.Sender is a nil *mediator.Mediator":  {Breakers: reg, Queue: noQueue, Sender: noSender, Token: token},
	} {
		if _, err := admin.New(cfg); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("New: %v; want an error saying %q", err, field)
		}
	}
}

// Behind a proxy that terminates TLS, SecureCookies marks the session cookie Secure though the
// request the handler sees is plain HTTP; without it, such a cookie was never Secure.
func TestSecureCookiesBehindATLSProxy(t *testing.T) {
	reg := breaker.NewRegistry(breaker.Config{})
	for _, secure := range []bool{false, true} {
		h, err := admin.New(admin.Config{Breakers: reg, Token: token, SecureCookies: secure})
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("POST", "http://ops.internal/api/session", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		c := w.Result().Cookies()
		if w.Code != 200 || len(c) != 1 || c[0].Secure != secure {
			t.Fatalf("SecureCookies %v: %d %v", secure, w.Code, c)
		}
	}
}

// A wrong method on a bulk route is a 405 with Allow: POST; it used to be read as the detail
// route of a letter whose id is "replay", and answered 400. Repeated ids in a bulk body are a
// 400 before anything runs (they used to replay a letter twice). /metrics is not cached.
func TestBulkRouteMethodsRepeatedIdsAndMetricsCaching(t *testing.T) {
	f := newFixture(t, durableConfig())
	for _, path := range []string{"/api/dead-letters/replay", "/api/dead-letters/discard"} {
		res := do(t, f.h, "GET", path, "", "Authorization", "Bearer "+token)
		if res.Code != http.StatusMethodNotAllowed || res.Header().Get("Allow") != "POST" {
			t.Errorf("GET %s: %d, Allow %q; want 405 with Allow: POST", path, res.Code, res.Header().Get("Allow"))
		}
	}
	res := do(t, f.h, "POST", "/api/dead-letters/replay", `{"ids": [4, 2, 4]}`, "Authorization", "Bearer "+token)
	if msg, _ := res.body["error"].(string); res.Code != http.StatusBadRequest || !strings.Contains(msg, "4 appears more than once") {
		t.Errorf("repeated ids: %d %v", res.Code, res.body)
	}
	res = do(t, f.h, "GET", "/metrics", "", "Authorization", "Bearer "+token)
	if res.Header().Get("Cache-Control") != "no-store" {
		t.Errorf("/metrics Cache-Control %q", res.Header().Get("Cache-Control"))
	}
}

// The dead-letter listing refuses what it would otherwise ignore: an unknown (misspelt)
// parameter, a repeated one, and a from that is not before to. They used to answer 200 with
// letters the operator did not ask for, or none.
func TestDeadLetterListingRefusesIgnoredQueries(t *testing.T) {
	f := newFixture(t, durableConfig())
	for query, want := range map[string]string{
		"stauts=replayed": `unknown query parameter "stauts"`,
		"limit=1&limit=2": `"limit" is given 2 times`,
		"from=2030-01-01T00:00:00Z&to=2020-01-01T00:00:00Z": "is not before to",
	} {
		res := do(t, f.h, "GET", "/api/dead-letters?"+query, "", "Authorization", "Bearer "+token)
		if msg, _ := res.body["error"].(string); res.Code != http.StatusBadRequest || !strings.Contains(msg, want) {
			t.Errorf("?%s: %d %v; want 400 naming %s", query, res.Code, res.body, want)
		}
	}
	want(t, do(t, f.h, "GET", "/api/dead-letters?status=failed&limit=10", "", "Authorization", "Bearer "+token), http.StatusOK)
}
