package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
)

var bulkRoutes = []struct{ method, path string }{
	{"POST", "/api/dead-letters/actions"}, {"GET", "/api/dead-letters/actions"},
	{"GET", "/api/dead-letters/actions/1"}, {"POST", "/api/dead-letters/actions/1/cancel"},
	{"POST", "/api/breakers/payments/reset-and-replay"},
}

// startScheduler runs the fixture queue's scheduler until the end of the test.
func (f *fixture) startScheduler(t *testing.T) {
	t.Helper()
	if err := f.q.Start(f.m); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = f.q.Shutdown(ctx)
	})
}

func TestBulkActionRoutesNeedAnAdmin(t *testing.T) {
	f := newFixture(t, durableConfig())
	for _, rt := range bulkRoutes {
		if res := do(t, f.h, rt.method, rt.path, `{"kind":"replay"}`); res.Code != http.StatusUnauthorized {
			t.Errorf("%s %s without a token: %d, want 401", rt.method, rt.path, res.Code)
		}
		if res := do(t, f.h, rt.method, rt.path, `{"kind":"replay"}`, "Authorization", "Bearer wrong"); res.Code != http.StatusForbidden {
			t.Errorf("%s %s with a wrong token: %d, want 403", rt.method, rt.path, res.Code)
		}
	}
	if list, _ := f.q.BulkActions(context.Background(), 0, 0); len(list) != 0 {
		t.Fatalf("an unauthorized request stored %+v", list)
	}
}

// The state-changing routes need the session's CSRF token.
func TestBulkActionRoutesNeedCSRF(t *testing.T) {
	f := newFixture(t, durableConfig())
	res := auth(t, f.h, "POST", "/api/session", "")
	c := res.Result().Cookies()[0]
	cookie := c.Name + "=" + c.Value
	for _, rt := range bulkRoutes {
		if rt.method != "POST" {
			continue // reads need no token
		}
		want(t, do(t, f.h, rt.method, rt.path, `{"kind":"replay"}`, "Cookie", cookie), http.StatusForbidden)
	}
	want(t, do(t, f.h, "GET", "/api/dead-letters/actions", "", "Cookie", cookie), http.StatusOK)
	if list, _ := f.q.BulkActions(context.Background(), 0, 0); len(list) != 0 {
		t.Fatalf("a request without the CSRF token stored %+v", list)
	}
	// With the token, the same request is taken.
	res = do(t, f.h, "POST", "/api/dead-letters/actions", `{"kind":"replay","dry_run":true}`, "Cookie", cookie, "X-CSRF-Token", res.body["csrf_token"].(string))
	want(t, res, http.StatusOK)
}

func TestBulkActionRoutesNotFound(t *testing.T) {
	f := newFixture(t, durableConfig())
	res := auth(t, f.h, "GET", "/api/dead-letters/actions/7", "")
	want(t, res, http.StatusNotFound)
	if msg := res.body["error"].(string); msg != "unknown bulk action 7" {
		t.Fatalf("404 says %q", msg)
	}
	want(t, auth(t, f.h, "POST", "/api/dead-letters/actions/7/cancel", ""), http.StatusNotFound)
	res = auth(t, f.h, "POST", "/api/breakers/nowhere/reset-and-replay", "")
	want(t, res, http.StatusNotFound)
	if msg := res.body["error"].(string); !strings.Contains(msg, `"nowhere"`) {
		t.Fatalf("404 says %q", msg)
	}
	res = auth(t, f.h, "POST", "/api/dead-letters/actions", `{"kind":"replay","reset_breaker":"nowhere"}`)
	want(t, res, http.StatusNotFound)
	if msg := res.body["error"].(string); !strings.Contains(msg, `reset_breaker: unknown breaker "nowhere"`) {
		t.Fatalf("404 says %q", msg)
	}
	// A queue that does not support bulk actions.
	h, err := admin.New(admin.Config{Queue: downQueue{}, Sender: nopSender{}, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range bulkRoutes[:4] {
		res := auth(t, h, rt.method, rt.path, "")
		want(t, res, http.StatusNotFound)
		if msg := res.body["error"].(string); !strings.Contains(msg, "does not support bulk actions") {
			t.Errorf("%s %s: 404 says %q", rt.method, rt.path, msg)
		}
	}
}

func TestBulkActionRoutesBadInput(t *testing.T) {
	f := newFixture(t, durableConfig())
	for _, c := range []struct{ path, body, want string }{
		{"/api/dead-letters/actions", `{}`, "kind is required"},
		{"/api/dead-letters/actions", `{"kind":"rerun"}`, `kind "rerun"`},
		{"/api/dead-letters/actions", `{"kind":"discard"}`, "reason is required"},
		{"/api/dead-letters/actions", `{"kind":"replay","filter":{"status":"replayed"}}`, `filter.status "replayed"`},
		{"/api/dead-letters/actions", `{"kind":"replay","filter":{"from":"yesterday"}}`, `filter.from "yesterday"`},
		{"/api/dead-letters/actions", `{"kind":"replay","filter":{"from":"2026-01-02T00:00:00Z","to":"2026-01-01T00:00:00Z"}}`, "filter.from 2026-01-02T00:00:00Z is not before filter.to"},
		{"/api/dead-letters/actions", `{"kind":"replay","rate":-1}`, "rate -1"},
		{"/api/dead-letters/actions", `{"kind":"replay","max_in_flight":65}`, "max_in_flight 65"},
		{"/api/dead-letters/actions", `{"kind":"replay","filter":{"sauce":"x"}}`, "sauce"},
		{"/api/dead-letters/actions", `{"kind":"discard","reason":"x","reset_breaker":"payments"}`, "reset_breaker goes with a replay"},
		{"/api/dead-letters/actions", `{"kind":"replay","rate":"fast"}`, "rate"},
		{"/api/dead-letters/actions/x/cancel", ``, `bulk action id "x"`},
		{"/api/breakers/payments/reset-and-replay", `{"filter":{"to":"soon"}}`, `filter.to "soon"`},
		{"/api/breakers/payments/reset-and-replay", `{"kind":"discard"}`, "kind"},
	} {
		res := auth(t, f.h, "POST", c.path, c.body)
		if res.Code != http.StatusBadRequest {
			t.Errorf("POST %s %s: %d, want 400", c.path, c.body, res.Code)
			continue
		}
		if msg, _ := res.body["error"].(string); !strings.Contains(msg, c.want) {
			t.Errorf("POST %s %s: error %q does not name %q", c.path, c.body, msg, c.want)
		}
	}
	for _, c := range []struct{ path, want string }{
		{"/api/dead-letters/actions/0", `bulk action id "0"`},
		{"/api/dead-letters/actions?limit=101", "limit"},
		{"/api/dead-letters/actions?before=x", "before"},
		{"/api/dead-letters/actions?page=2", "page"},
	} {
		res := auth(t, f.h, "GET", c.path, "")
		if res.Code != http.StatusBadRequest {
			t.Errorf("GET %s: %d, want 400", c.path, res.Code)
			continue
		}
		if msg, _ := res.body["error"].(string); !strings.Contains(msg, c.want) {
			t.Errorf("GET %s: error %q does not name %q", c.path, msg, c.want)
		}
	}
	if list, _ := f.q.BulkActions(context.Background(), 0, 0); len(list) != 0 {
		t.Fatalf("bad requests stored %+v", list)
	}
	if s, _ := f.reg.Get("payments"); s.State != breaker.StateClosed {
		t.Fatal("unexpected breaker state")
	}
}

// A replay by filter through the API: a dry run counts and samples, the action runs on the
// queue's scheduler, its progress and totals are read back, its letters' timelines name it,
// and cancelling a finished action changes nothing. Reset-and-replay resets the breaker as
// part of the action.
func TestBulkActionRoutesReplayByFilter(t *testing.T) {
	f := newFixture(t, durableConfig())
	*f.fixed = true
	res := auth(t, f.h, "POST", "/api/dead-letters/actions", `{"kind":"replay","filter":{"source":"crm-sync","error":"EXAMPLE"},"dry_run":true}`)
	want(t, res, http.StatusOK)
	if res.body["matched"] != float64(2) || len(res.body["sample"].([]any)) != 2 {
		t.Fatalf("dry run: %v", res.body)
	}
	if list, _ := f.q.BulkActions(context.Background(), 0, 0); len(list) != 0 {
		t.Fatalf("a dry run stored %+v", list)
	}
	res = auth(t, f.h, "POST", "/api/dead-letters/actions", `{"kind":"replay","filter":{"source":"crm-sync","error":"EXAMPLE"},"reason":"fixed the validator","rate":100}`)
	want(t, res, http.StatusCreated)
	a := res.body["action"].(map[string]any)
	if a["state"] != "queued" || a["matched"] != float64(2) || a["actor"] != "admin" || a["rate"] != float64(100) || a["max_in_flight"] != float64(4) {
		t.Fatalf("started: %v", a)
	}
	// The same action again while the first has not finished (a second click): 409 naming it.
	res = auth(t, f.h, "POST", "/api/dead-letters/actions", `{"kind":"replay","filter":{"source":"crm-sync","error":"EXAMPLE"},"reason":"fixed the validator","rate":100}`)
	want(t, res, http.StatusConflict)
	if msg := res.body["error"].(string); !strings.Contains(msg, fmt.Sprintf("bulk action %v of the same kind and filter", a["id"])) || !strings.Contains(msg, "cancel it") {
		t.Fatalf("the same action again: %q", msg)
	}
	path := fmt.Sprintf("/api/dead-letters/actions/%v", a["id"])
	f.startScheduler(t)
	deadline := time.Now().Add(30 * time.Second)
	for a["state"] != "done" {
		if time.Now().After(deadline) {
			t.Fatalf("the action did not finish: %v", a)
		}
		res = auth(t, f.h, "GET", path, "")
		want(t, res, http.StatusOK)
		a = res.body["action"].(map[string]any)
	}
	totals := a["totals"].(map[string]any)
	if totals["replayed"] != float64(2) || a["settled"] != float64(2) || a["finished_at"] == nil {
		t.Fatalf("done: %v", a)
	}
	res = auth(t, f.h, "GET", fmt.Sprintf("/api/dead-letters/%d", f.letters[0]), "")
	want(t, res, http.StatusOK)
	tl := res.body["timeline"].([]any)
	if last := tl[len(tl)-1].(map[string]any); last["bulk_action"] != a["id"] || last["outcome"] != "succeeded" {
		t.Fatalf("timeline %v", tl)
	}
	res = auth(t, f.h, "POST", path+"/cancel", `{"reason":"too late"}`)
	want(t, res, http.StatusOK)
	if res.body["action"].(map[string]any)["state"] != "done" {
		t.Fatalf("cancel of a finished action: %v", res.body)
	}
	audit, _ := f.q.Audit(context.Background(), durable.AuditFilter{TargetKind: record.AuditTargetBulkAction})
	if len(audit) != 2 || audit[0].Outcome != record.AuditNoChange || audit[1].Action != record.AuditBulkReplay || !strings.Contains(audit[1].Detail, "fixed the validator") {
		t.Fatalf("audit %+v", audit)
	}

	if err := f.reg.Trip("payments"); err != nil {
		t.Fatal(err)
	}
	res = auth(t, f.h, "POST", "/api/breakers/payments/reset-and-replay", `{"filter":{"source":"crm-sync"},"reason":"payments back"}`)
	want(t, res, http.StatusCreated)
	b := res.body["action"].(map[string]any)
	if b["reset_breaker"] != "payments" || b["kind"] != "replay" || b["matched"] != float64(1) {
		t.Fatalf("reset and replay: %v", b)
	}
	if s, _ := f.reg.Get("payments"); s.State != breaker.StateClosed {
		t.Fatalf("the breaker was not reset: %v", s.State)
	}
	res = auth(t, f.h, "GET", "/api/dead-letters/actions?limit=1", "")
	want(t, res, http.StatusOK)
	if list := res.body["actions"].([]any); len(list) != 1 || list[0].(map[string]any)["id"] != b["id"] {
		t.Fatalf("list %v", res.body)
	}
}

// endedBulk is a queue whose bulk-action calls find the request's context ended.
type endedBulk struct{ downQueue }

func (endedBulk) StartBulkAction(ctx context.Context, _ durable.BulkActionSpec, _ string, _ ...durable.BulkActionOption) (durable.BulkAction, error) {
	return durable.BulkAction{}, fmt.Errorf("durable: count dead letters: %w", context.Canceled)
}

func (endedBulk) BulkAction(context.Context, record.BulkActionID) (durable.BulkAction, error) {
	return durable.BulkAction{}, fmt.Errorf("durable: bulk action 1: %w", context.DeadlineExceeded)
}

func (endedBulk) BulkActions(context.Context, record.BulkActionID, int) ([]durable.BulkAction, error) {
	return nil, fmt.Errorf("durable: bulk actions: %w", context.Canceled)
}

func (endedBulk) CancelBulkAction(context.Context, record.BulkActionID, string, string) (durable.BulkAction, error) {
	return durable.BulkAction{}, fmt.Errorf("durable: cancel bulk action 1: %w", context.Canceled)
}

// A request that ends before its bulk-action call returns is answered 503, saying so, and is
// not logged as a server error: the caller gave up, the server did not fail.
func TestBulkActionRoutesCallerGaveUp(t *testing.T) {
	core, logs := observer.New(zap.ErrorLevel)
	reg := breaker.NewRegistry(breaker.Config{})
	reg.Declare("https://api.example/v1/orders?x=1", "payments")
	h, err := admin.New(admin.Config{Queue: endedBulk{}, Sender: nopSender{}, Token: token, Breakers: reg, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	for i, rt := range bulkRoutes {
		body := ""
		if i == 0 {
			body = `{"kind":"replay"}`
		}
		res := auth(t, h, rt.method, rt.path, body)
		want(t, res, http.StatusServiceUnavailable)
		if msg := res.body["error"].(string); !strings.Contains(msg, "the request ended before") {
			t.Errorf("%s %s: 503 says %q", rt.method, rt.path, msg)
		}
	}
	if n := logs.Len(); n != 0 {
		t.Fatalf("requests the caller gave up on were logged as errors: %+v", logs.All())
	}
}
