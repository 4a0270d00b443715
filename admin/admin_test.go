package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/durabletest"
	"github.com/switchboard-go/switchboard/durable/postgres"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/mediator"
)

const token = "s3cret-token-for-tests"

type importContact struct {
	mediator.Command
	Email string `json:"email"`
}

// fixture is an admin handler over a registry and a queue holding three failed letters
// (ids in letters), whose handler fails until fixed is set.
type fixture struct {
	h       http.Handler
	reg     *breaker.Registry
	q       *durable.Queue
	letters []record.DeadLetterID
	fixed   *bool
	m       *mediator.Mediator
}

func newFixture(t *testing.T, qcfg durable.Config) *fixture {
	t.Helper()
	return newFixtureOn(t, sqlite.Open(filepath.Join(t.TempDir(), "queue.db")), qcfg)
}

// newFixtureOn is newFixture with the queue on driver's database.
func newFixtureOn(t *testing.T, driver durable.Driver, qcfg durable.Config) *fixture {
	t.Helper()
	ctx := context.Background()
	qcfg.Logger = zap.NewNop()
	q, err := durable.Open(ctx, driver, qcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	durable.Register[*importContact](q, "crm.import-contact")
	fixed := false
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, r *importContact) (mediator.Void, error) {
		if !fixed || r.Email == "" {
			return mediator.Void{}, errors.New("invalid email " + r.Email)
		}
		return mediator.Void{}, nil
	})
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	res, err := q.RunBatch(ctx, m, "crm-sync", []durable.BatchItem{
		{Key: "c1", Request: &importContact{Email: "bob@example"}},
		{Key: "c2", Request: &importContact{Email: "ann@example"}},
		{Key: "c3", Request: &importContact{}},
	})
	if err != nil || len(res.DeadLetters) != 3 {
		t.Fatalf("RunBatch = %+v, %v", res, err)
	}
	reg := breaker.NewRegistry(breaker.Config{})
	reg.Declare("https://api.example/v1/orders?x=1", "payments")
	h, err := admin.New(admin.Config{Breakers: reg, Queue: q, Sender: m, Token: token,
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "# metrics\n") })})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{h: h, reg: reg, q: q, letters: res.DeadLetters, fixed: &fixed, m: m}
}

type response struct {
	*httptest.ResponseRecorder
	body map[string]any
}

// do sends method path with body and the bearer token (when auth is true).
func do(t *testing.T, h http.Handler, method, path, body string, hdr ...string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, path, rd)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	res := response{ResponseRecorder: w}
	if strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(w.Body.Bytes(), &res.body); err != nil {
			t.Fatalf("%s %s: body %q is not a JSON object: %v", method, path, w.Body, err)
		}
	}
	return res
}

func auth(t *testing.T, h http.Handler, method, path, body string) response {
	t.Helper()
	return do(t, h, method, path, body, "Authorization", "Bearer "+token)
}

func want(t *testing.T, res response, status int) {
	t.Helper()
	if res.Code != status {
		t.Fatalf("status %d, want %d; body %s", res.Code, status, res.Body)
	}
	if status >= 400 {
		if msg, _ := res.body["error"].(string); msg == "" {
			t.Fatalf("status %d without a JSON error: %q", res.Code, res.Body)
		}
	}
}

func TestNewRefusesWithoutAuthorization(t *testing.T) {
	reg := breaker.NewRegistry(breaker.Config{})
	_, err := admin.New(admin.Config{Breakers: reg})
	if err == nil || !strings.Contains(err.Error(), "Token") {
		t.Fatalf("New without Token nor Authorizer: %v", err)
	}
	_, err = admin.New(admin.Config{Token: "x"})
	if err == nil || !strings.Contains(err.Error(), "Breakers") {
		t.Fatalf("New with nothing to administer: %v", err)
	}
	q, err := durable.Open(context.Background(), sqlite.Open(filepath.Join(t.TempDir(), "q.db")), durable.Config{Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	_, err = admin.New(admin.Config{Queue: q, Token: "x"})
	if err == nil || !strings.Contains(err.Error(), "Sender") {
		t.Fatalf("New with a queue and no sender: %v", err)
	}
}

func TestEveryRouteNeedsAnAdmin(t *testing.T) {
	f := newFixture(t, durable.Config{})
	routes := []struct{ method, path string }{
		{"GET", "/api/session"}, {"POST", "/api/session"}, {"DELETE", "/api/session"},
		{"GET", "/api/breakers"}, {"GET", "/api/breakers/payments"},
		{"POST", "/api/breakers/payments/trip"}, {"POST", "/api/breakers/payments/reset"},
		{"GET", "/api/dead-letters"}, {"GET", "/api/dead-letters/1"},
		{"POST", "/api/dead-letters/1/replay"}, {"POST", "/api/dead-letters/1/discard"},
		{"POST", "/api/dead-letters/replay"}, {"POST", "/api/dead-letters/discard"},
		{"GET", "/api/schedules"}, {"GET", "/api/schedules/x/runs"}, {"GET", "/api/queue"},
		{"GET", "/api/items"}, {"GET", "/api/items/1"}, {"POST", "/api/items/1/cancel"}, {"POST", "/api/items/1/run-now"},
		{"GET", "/metrics"},
	}
	for _, rt := range routes {
		// No credentials: 401 with a Bearer challenge.
		res := do(t, f.h, rt.method, rt.path, "")
		if res.Code != http.StatusUnauthorized || !strings.HasPrefix(res.Header().Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s %s without a token: %d (WWW-Authenticate %q), want 401 with a Bearer challenge", rt.method, rt.path, res.Code, res.Header().Get("WWW-Authenticate"))
		}
		if msg, _ := res.body["error"].(string); msg == "" {
			t.Errorf("%s %s: 401 without a JSON error", rt.method, rt.path)
		}
		// Credentials refused: 403.
		for _, hdr := range [][]string{{"Authorization", "Bearer wrong"}, {"Authorization", "Basic " + token}} {
			res := do(t, f.h, rt.method, rt.path, "", hdr...)
			if res.Code != http.StatusForbidden {
				t.Errorf("%s %s with %v: %d, want 403", rt.method, rt.path, hdr, res.Code)
			}
			if msg, _ := res.body["error"].(string); msg == "" {
				t.Errorf("%s %s: 403 without a JSON error", rt.method, rt.path)
			}
		}
	}
	// Nothing was done.
	if s, _ := f.reg.Get("payments"); s.State != breaker.StateClosed {
		t.Fatal("an unauthorized trip opened the breaker")
	}
}

func TestForbiddenPrincipal(t *testing.T) {
	reg := breaker.NewRegistry(breaker.Config{})
	h, err := admin.New(admin.Config{Breakers: reg, Authorizer: admin.AuthorizerFunc(func(r *http.Request) (admin.Principal, error) {
		switch r.Header.Get("X-User") {
		case "bob":
			return admin.Principal{}, fmt.Errorf("bob is not on the on-call rota: %w", admin.ErrForbidden)
		case "carol":
			return admin.Principal{}, errors.New("carol's session expired at 10:00: sign in again")
		case "dave":
			return admin.Principal{Name: "dave", Role: admin.RoleAdmin + 1}, nil
		}
		return admin.Principal{Name: r.Header.Get("X-User")}, nil // the zero Role: a viewer
	})})
	if err != nil {
		t.Fatal(err)
	}
	// The authorizer's own words reach the client, beside the status (they were replaced by
	// "forbidden: not an admin" and "unauthorized: send Authorization: …").
	res := do(t, h, "GET", "/api/breakers", "", "X-User", "bob")
	want(t, res, http.StatusForbidden)
	if msg := res.body["error"].(string); !strings.Contains(msg, "bob is not on the on-call rota") {
		t.Errorf("403 of the authorizer: %q", msg)
	}
	res = do(t, h, "GET", "/api/breakers", "", "X-User", "carol")
	want(t, res, http.StatusUnauthorized)
	if msg := res.body["error"].(string); !strings.Contains(msg, "carol's session expired at 10:00: sign in again") {
		t.Errorf("401 of the authorizer: %q", msg)
	}
	want(t, do(t, h, "GET", "/api/breakers", "", "X-User", "alice"), http.StatusOK)
	want(t, do(t, h, "GET", "/api/breakers", ""), http.StatusUnauthorized) // empty principal
	// An authorizer that forgot the role grants reading only; the 403 says who and why.
	res = do(t, h, "POST", "/api/breakers/payments/trip", "", "X-User", "alice")
	want(t, res, http.StatusForbidden)
	if msg := res.body["error"].(string); msg != "forbidden: alice is a viewer; tripping a breaker needs the operator role" {
		t.Errorf("403 of a viewer: %q", msg)
	}
	// A role that is none of the three is no role at all, not more than an admin.
	res = do(t, h, "GET", "/api/breakers", "", "X-User", "dave")
	want(t, res, http.StatusForbidden)
	if msg := res.body["error"].(string); !strings.Contains(msg, "dave the role Role(3), which is none of viewer, operator and admin") {
		t.Errorf("403 of an unknown role: %q", msg)
	}
}

func TestBreakerRoutes(t *testing.T) {
	f := newFixture(t, durable.Config{})
	key := "https://api.example/v1/orders?x=1"
	res := auth(t, f.h, "GET", "/api/breakers", "")
	want(t, res, http.StatusOK)
	if got := res.Header().Get("Cache-Control"); got != "no-store" {
		t.Fatalf("Cache-Control %q, want no-store", got)
	}
	list := res.body["breakers"].([]any)
	if len(list) != 2 || list[0].(map[string]any)["key"] != key || list[0].(map[string]any)["state"] != "closed" {
		t.Fatalf("breakers = %v", list)
	}

	// A declared, URL-shaped key, tripped before any traffic, as one escaped segment.
	path := "/api/breakers/" + url.PathEscape(key)
	res = auth(t, f.h, "POST", path+"/trip", "")
	want(t, res, http.StatusOK)
	if res.body["key"] != key || res.body["state"] != "open" || res.body["remaining_ms"].(float64) <= 0 ||
		res.body["probe_at"] == nil || res.body["opened_at"] == nil {
		t.Fatalf("trip answered %v", res.body)
	}
	if _, err := f.reg.Gate(key); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("the breaker is not open after trip: %v", err)
	}
	res = auth(t, f.h, "GET", path, "")
	want(t, res, http.StatusOK)
	if res.body["key"] != key || res.body["state"] != "open" {
		t.Fatalf("detail = %v", res.body)
	}
	res = auth(t, f.h, "POST", path+"/reset", "{}")
	want(t, res, http.StatusOK)
	if res.body["state"] != "closed" || res.body["failures"].(float64) != 0 || res.body["remaining_ms"].(float64) != 0 || res.body["probe_at"] != nil {
		t.Fatalf("reset answered %v", res.body)
	}

	// Other awkward keys: spaces, percent signs.
	for _, k := range []string{"a b", "100%", "x/y/z", "q?r#s"} {
		f.reg.Declare(k)
		res := auth(t, f.h, "POST", "/api/breakers/"+url.PathEscape(k)+"/trip", "")
		want(t, res, http.StatusOK)
		if res.body["key"] != k {
			t.Fatalf("key %q came back as %v", k, res.body["key"])
		}
	}

	for _, p := range []string{"/api/breakers/nope", "/api/breakers/nope/trip", "/api/breakers/nope/reset"} {
		method := "POST"
		if !strings.HasSuffix(p, "trip") && !strings.HasSuffix(p, "reset") {
			method = "GET"
		}
		want(t, auth(t, f.h, method, p, ""), http.StatusNotFound)
	}
	want(t, auth(t, f.h, "POST", path+"/trip", `{"force": true}`), http.StatusBadRequest)
	res = auth(t, f.h, "DELETE", path+"/trip", "")
	want(t, res, http.StatusMethodNotAllowed)
	if res.Header().Get("Allow") == "" {
		t.Fatal("405 without Allow")
	}
	res = auth(t, f.h, "PUT", "/api/breakers", "")
	want(t, res, http.StatusMethodNotAllowed)
	if !strings.Contains(res.Header().Get("Allow"), "GET") {
		t.Fatalf("Allow %q", res.Header().Get("Allow"))
	}
	want(t, auth(t, f.h, "GET", "/api/nothing", ""), http.StatusNotFound)
}

func TestMountedUnderAPrefix(t *testing.T) {
	f := newFixture(t, durable.Config{})
	mux := http.NewServeMux()
	mux.Handle("/ops/admin/", http.StripPrefix("/ops/admin", f.h))
	key := "https://api.example/v1/orders?x=1"
	res := auth(t, mux, "POST", "/ops/admin/api/breakers/"+url.PathEscape(key)+"/trip", "")
	want(t, res, http.StatusOK)
	if res.body["key"] != key {
		t.Fatalf("key through StripPrefix = %v", res.body["key"])
	}
	res = auth(t, mux, "POST", "/ops/admin/api/session", "")
	want(t, res, http.StatusOK)
	c := res.Result().Cookies()
	if len(c) != 1 || c[0].Path != "/ops/admin/" {
		t.Fatalf("session cookie %v, want Path /ops/admin/", c)
	}
}

func TestDeadLetterRoutes(t *testing.T) {
	testDeadLetterRoutes(t, sqlite.Open(filepath.Join(t.TempDir(), "queue.db")))
}

func TestDeadLetterRoutesPostgres(t *testing.T) {
	testDeadLetterRoutes(t, postgresDriver(t))
}

// postgresDriver opens a queue's driver on a schema of the test's own on the test server,
// skipping the test without one (failing it under CI=true).
func postgresDriver(t *testing.T) durable.Driver {
	t.Helper()
	dsn := os.Getenv("SWITCHBOARD_TEST_PG_DSN")
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("SWITCHBOARD_TEST_PG_DSN is not set under CI=true")
		}
		t.Skip("SWITCHBOARD_TEST_PG_DSN not set")
	}
	return postgres.Open(durabletest.PostgresSchema(t, dsn), postgres.Config{})
}

func testDeadLetterRoutes(t *testing.T, driver durable.Driver) {
	f := newFixtureOn(t, driver, durable.Config{})
	ctx := context.Background()
	id := func(i int) string { return fmt.Sprint(f.letters[i]) }

	res := auth(t, f.h, "GET", "/api/dead-letters?source=crm-sync&limit=2", "")
	want(t, res, http.StatusOK)
	if res.body["total"].(float64) != 3 || len(res.body["dead_letters"].([]any)) != 2 {
		t.Fatalf("list = %v", res.body)
	}
	first := res.body["dead_letters"].([]any)[0].(map[string]any)
	if first["status"] != "failed" || first["source"] != "crm-sync" || first["name"] != "crm.import-contact" {
		t.Fatalf("letter = %v", first)
	}
	for _, q := range []string{"status=lost", "limit=501", "limit=x", "offset=-1", "from=yesterday", "to=2026-13-01"} {
		want(t, auth(t, f.h, "GET", "/api/dead-letters?"+q, ""), http.StatusBadRequest)
	}

	res = auth(t, f.h, "GET", "/api/dead-letters/"+id(0), "")
	want(t, res, http.StatusOK)
	d := res.body["dead_letter"].(map[string]any)
	if d["payload"].(map[string]any)["email"] != "bob@example" || d["key"] != "c1" || d["error"] == "" {
		t.Fatalf("detail = %v", d)
	}
	if cause, ok := d["cause"]; !ok || cause != "" {
		t.Fatalf("a batch letter's cause = %v (present %v), want it present and empty (not known)", cause, ok)
	}
	for _, bad := range []string{"0", "-3", "abc", "1.5", "99999999999999999999"} {
		want(t, auth(t, f.h, "GET", "/api/dead-letters/"+bad, ""), http.StatusBadRequest)
	}
	want(t, auth(t, f.h, "GET", "/api/dead-letters/424242", ""), http.StatusNotFound)

	// A replay that fails again: 200, still_failed, with the error.
	res = auth(t, f.h, "POST", "/api/dead-letters/"+id(0)+"/replay", "")
	want(t, res, http.StatusOK)
	if res.body["resolution"] != "still_failed" || res.body["error"] == "" {
		t.Fatalf("replay = %v", res.body)
	}
	*f.fixed = true
	res = auth(t, f.h, "POST", "/api/dead-letters/"+id(0)+"/replay", "")
	want(t, res, http.StatusOK)
	if res.body["resolution"] != "replayed" {
		t.Fatalf("replay = %v", res.body)
	}
	res = auth(t, f.h, "POST", "/api/dead-letters/"+id(0)+"/replay", "")
	if res.Code != http.StatusConflict || res.body["resolution"] != "conflict" {
		t.Fatalf("second replay: %d %v", res.Code, res.body)
	}
	res = auth(t, f.h, "POST", "/api/dead-letters/424242/replay", "")
	if res.Code != http.StatusNotFound || res.body["resolution"] != "not_found" {
		t.Fatalf("replay unknown: %d %v", res.Code, res.body)
	}

	// Discard needs a reason, and records the principal as the actor.
	want(t, auth(t, f.h, "POST", "/api/dead-letters/"+id(1)+"/discard", ""), http.StatusBadRequest)
	want(t, auth(t, f.h, "POST", "/api/dead-letters/"+id(1)+"/discard", `{"reason": "  "}`), http.StatusBadRequest)
	want(t, auth(t, f.h, "POST", "/api/dead-letters/"+id(1)+"/discard", `{"reason": 5}`), http.StatusBadRequest)
	want(t, auth(t, f.h, "POST", "/api/dead-letters/"+id(1)+"/discard", `{"reason": "x", "why": "y"}`), http.StatusBadRequest)
	want(t, auth(t, f.h, "POST", "/api/dead-letters/"+id(1)+"/discard", `{"reason": "x"`), http.StatusBadRequest)
	res = auth(t, f.h, "POST", "/api/dead-letters/"+id(1)+"/discard", `{"reason": "duplicate record"}`)
	want(t, res, http.StatusOK)
	if res.body["resolution"] != "discarded" {
		t.Fatalf("discard = %v", res.body)
	}
	_, timeline, err := f.q.DeadLetter(ctx, f.letters[1])
	if err != nil {
		t.Fatal(err)
	}
	last := timeline[len(timeline)-1]
	if last.Kind != record.TimelineDiscard || last.Actor != "admin" || last.Reason != "duplicate record" {
		t.Fatalf("discard entry = %+v", last)
	}
	res = auth(t, f.h, "GET", "/api/dead-letters/"+id(1), "")
	want(t, res, http.StatusOK)
	tl := res.body["timeline"].([]any)
	if e := tl[len(tl)-1].(map[string]any); e["kind"] != "discard" || e["actor"] != "admin" || e["reason"] != "duplicate record" {
		t.Fatalf("timeline = %v", tl)
	}

	// Bulk: 200 with one outcome per id even when some fail.
	res = auth(t, f.h, "POST", "/api/dead-letters/replay", fmt.Sprintf(`{"ids": [%s, %s, %s, 424242]}`, id(0), id(1), id(2)))
	want(t, res, http.StatusOK)
	var got []string
	for _, r := range res.body["results"].([]any) {
		got = append(got, r.(map[string]any)["resolution"].(string))
	}
	if strings.Join(got, ",") != "conflict,conflict,still_failed,not_found" {
		t.Fatalf("bulk replay outcomes %v", got)
	}
	ids := make([]string, 101)
	for i := range ids {
		ids[i] = id(2)
	}
	want(t, auth(t, f.h, "POST", "/api/dead-letters/discard", `{"ids": [`+strings.Join(ids, ",")+`], "reason": "x"}`), http.StatusBadRequest)
	want(t, auth(t, f.h, "POST", "/api/dead-letters/replay", `{"ids": [`+strings.Join(ids, ",")+`]}`), http.StatusBadRequest)
	if d, _, _ := f.q.DeadLetter(ctx, f.letters[2]); d.Status != record.DeadLetterFailed || d.RetryCount != 1 {
		t.Fatalf("101 ids did something: %+v", d)
	}
	for _, body := range []string{`{}`, `{"ids": []}`, `{"ids": ["one"]}`, `{"ids": [0]}`, `{"ids": [1.5]}`, `{"ids": 1}`, `[1]`, `{"ids": [1]} {}`, `{"ids": [1], "reason": "x"}`} {
		res := auth(t, f.h, "POST", "/api/dead-letters/replay", body)
		if res.Code != http.StatusBadRequest {
			t.Fatalf("bulk replay %s: %d, want 400", body, res.Code)
		}
	}
	want(t, auth(t, f.h, "POST", "/api/dead-letters/discard", `{"ids": [`+id(2)+`]}`), http.StatusBadRequest)
	res = auth(t, f.h, "POST", "/api/dead-letters/discard", `{"ids": [`+id(2)+`, `+id(1)+`], "reason": "bad data"}`)
	want(t, res, http.StatusOK)
	got = nil
	for _, r := range res.body["results"].([]any) {
		got = append(got, r.(map[string]any)["resolution"].(string))
	}
	if strings.Join(got, ",") != "discarded,conflict" {
		t.Fatalf("bulk discard outcomes %v", got)
	}

	res = auth(t, f.h, "GET", "/api/queue", "")
	want(t, res, http.StatusOK)
	dl := res.body["dead_letters"].(map[string]any)
	if dl["failed"].(float64) != 0 || dl["replayed"].(float64) != 1 || dl["discarded"].(float64) != 2 {
		t.Fatalf("queue = %v", res.body)
	}
	if _, ok := res.body["items"].(map[string]any)["pending"]; !ok {
		t.Fatalf("queue = %v", res.body)
	}
	want(t, auth(t, f.h, "GET", "/api/dead-letters?status=discarded", ""), http.StatusOK)
}

func durableConfig() durable.Config { return durable.Config{} }
