package admin_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/mediator"
)

var itemBulkRoutes = []struct{ method, path string }{
	{"POST", "/api/items/actions"}, {"GET", "/api/items/actions"},
	{"GET", "/api/items/actions/1"}, {"POST", "/api/items/actions/1/cancel"},
}

// itemBulkFixture is a queue whose running scheduler parked the items of blocked.example on
// that breaker key (tripped open for an hour), with other pending items due in an hour.
type itemBulkFixture struct {
	h       http.Handler
	q       *durable.Queue
	parked  []record.ItemID // on blocked.example
	later   []record.ItemID // due in an hour, not parked
	letters []record.DeadLetterID
}

// newItemBulkFixture parks nParked items; clock, when not nil, is the queue's.
func newItemBulkFixture(t *testing.T, nParked int, clock behaviors.Clock) *itemBulkFixture {
	t.Helper()
	ctx := context.Background()
	reg := breaker.NewRegistry(breaker.Config{OpenDuration: time.Hour, Key: func(req any) string {
		if c, ok := req.(*importContact); ok {
			if _, domain, ok := strings.Cut(c.Email, "@"); ok {
				return domain
			}
		}
		return "other"
	}})
	reg.Declare("blocked.example")
	if err := reg.Trip("blocked.example"); err != nil {
		t.Fatal(err)
	}
	settled := make(chan record.Settled, 100)
	q, err := durable.Open(ctx, sqlite.Open(filepath.Join(t.TempDir(), "queue.db")), durable.Config{Logger: zap.NewNop(), PollInterval: time.Hour, Clock: clock,
		OnSettled: []func(string, record.Settled){func(_ string, o record.Settled) { settled <- o }}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	durable.Register[*importContact](q, "crm.import-contact")
	m := mediator.New(nil, mediator.Config{})
	m.Use(breaker.New(reg))
	mediator.HandleFunc(m, func(ctx context.Context, r *importContact) (mediator.Void, error) {
		if r.Email == "" {
			return mediator.Void{}, errors.New("invalid email")
		}
		return mediator.Void{}, nil
	})
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	res, err := q.RunBatch(ctx, m, "crm-sync", []durable.BatchItem{{Key: "c0", Request: &importContact{}}})
	if err != nil || len(res.DeadLetters) != 1 {
		t.Fatalf("RunBatch = %+v, %v", res, err)
	}
	if err := q.Start(m); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = q.Shutdown(ctx)
	})
	f := &itemBulkFixture{q: q, letters: res.DeadLetters}
	for i := range nParked {
		e, err := q.Enqueue(ctx, &importContact{Email: fmt.Sprintf("c%d@blocked.example", i)})
		if err != nil {
			t.Fatal(err)
		}
		if o := <-settled; o != record.SettledRefused {
			t.Fatalf("item %d settled %s, want refused (parked)", e.ID, o)
		}
		f.parked = append(f.parked, e.ID)
	}
	for i := range 2 {
		e, err := q.Enqueue(ctx, &importContact{Email: fmt.Sprintf("l%d@fine.example", i)}, durable.WithDelay(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		f.later = append(f.later, e.ID)
	}
	if f.h, err = admin.New(admin.Config{Breakers: reg, Queue: q, Sender: m, Token: token}); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestItemBulkRoutesNeedAnAdmin(t *testing.T) {
	f := newItemBulkFixture(t, 1, nil)
	for _, rt := range itemBulkRoutes {
		if res := do(t, f.h, rt.method, rt.path, `{"kind":"run_now"}`); res.Code != http.StatusUnauthorized {
			t.Errorf("%s %s without a token: %d, want 401", rt.method, rt.path, res.Code)
		}
		if res := do(t, f.h, rt.method, rt.path, `{"kind":"run_now"}`, "Authorization", "Bearer wrong"); res.Code != http.StatusForbidden {
			t.Errorf("%s %s with a wrong token: %d, want 403", rt.method, rt.path, res.Code)
		}
	}
	if list, _ := f.q.ItemBulkActions(context.Background(), 0, 0); len(list) != 0 {
		t.Fatalf("an unauthorized request stored %+v", list)
	}
}

// The state-changing routes need the session's CSRF token.
func TestItemBulkRoutesNeedCSRF(t *testing.T) {
	f := newItemBulkFixture(t, 1, nil)
	res := auth(t, f.h, "POST", "/api/session", "")
	c := res.Result().Cookies()[0]
	cookie := c.Name + "=" + c.Value
	for _, rt := range itemBulkRoutes {
		if rt.method != "POST" {
			continue // reads need no token
		}
		want(t, do(t, f.h, rt.method, rt.path, `{"kind":"run_now"}`, "Cookie", cookie), http.StatusForbidden)
	}
	want(t, do(t, f.h, "GET", "/api/items/actions", "", "Cookie", cookie), http.StatusOK)
	if list, _ := f.q.ItemBulkActions(context.Background(), 0, 0); len(list) != 0 {
		t.Fatalf("a request without the CSRF token stored %+v", list)
	}
	res = do(t, f.h, "POST", "/api/items/actions", `{"kind":"run_now","dry_run":true}`, "Cookie", cookie, "X-CSRF-Token", res.body["csrf_token"].(string))
	want(t, res, http.StatusOK)
}

func TestItemBulkRoutesNotFound(t *testing.T) {
	f := newItemBulkFixture(t, 1, nil)
	res := auth(t, f.h, "GET", "/api/items/actions/7", "")
	want(t, res, http.StatusNotFound)
	if msg := res.body["error"].(string); msg != "unknown bulk action on items 7" {
		t.Fatalf("404 says %q", msg)
	}
	want(t, auth(t, f.h, "POST", "/api/items/actions/7/cancel", ""), http.StatusNotFound)
	// An action on dead letters is not one on items.
	letters := auth(t, f.h, "POST", "/api/dead-letters/actions", `{"kind":"discard","reason":"cleanup","rate":1000}`)
	want(t, letters, http.StatusCreated)
	id := int64(letters.body["action"].(map[string]any)["id"].(float64))
	want(t, auth(t, f.h, "GET", fmt.Sprintf("/api/items/actions/%d", id), ""), http.StatusNotFound)
	want(t, auth(t, f.h, "POST", fmt.Sprintf("/api/items/actions/%d/cancel", id), ""), http.StatusNotFound)
	// A queue that does not support them.
	h, err := admin.New(admin.Config{Queue: downQueue{}, Sender: nopSender{}, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range itemBulkRoutes {
		res := auth(t, h, rt.method, rt.path, "")
		want(t, res, http.StatusNotFound)
		if msg := res.body["error"].(string); !strings.Contains(msg, "does not support bulk actions on items") {
			t.Errorf("%s %s: 404 says %q", rt.method, rt.path, msg)
		}
	}
}

func TestItemBulkRoutesBadInput(t *testing.T) {
	f := newItemBulkFixture(t, 1, nil)
	for _, c := range []struct{ path, body, want string }{
		{"/api/items/actions", `{}`, "kind is required"},
		{"/api/items/actions", `{"kind":"replay"}`, `kind "replay": want cancel, run_now or set_priority`},
		{"/api/items/actions", `{"kind":"cancel"}`, "reason is required for a cancel"},
		{"/api/items/actions", `{"kind":"set_priority"}`, "priority is required for set_priority"},
		{"/api/items/actions", `{"kind":"set_priority","priority":10}`, "priority 10: want 0 to 9"},
		{"/api/items/actions", `{"kind":"run_now","priority":3}`, `priority goes with kind set_priority, not "run_now"`},
		{"/api/items/actions", `{"kind":"run_now","filter":{"state":"running"}}`, `filter.state "running": only pending items`},
		{"/api/items/actions", `{"kind":"run_now","filter":{"from":"yesterday"}}`, `filter.from "yesterday"`},
		{"/api/items/actions", `{"kind":"run_now","filter":{"from":"2026-01-02T00:00:00Z","to":"2026-01-01T00:00:00Z"}}`, "filter.from 2026-01-02T00:00:00Z is not before filter.to"},
		{"/api/items/actions", `{"kind":"run_now","rate":-1}`, "rate -1"},
		{"/api/items/actions", `{"kind":"run_now","rate":1e-9}`, "Rate 1e-09 is below one item a day"},
		{"/api/items/actions", `{"kind":"run_now","filter":{"fairness":"x"}}`, "fairness"},
		{"/api/items/actions/abc/cancel", `{}`, `bulk action id "abc"`},
	} {
		res := auth(t, f.h, "POST", c.path, c.body)
		want(t, res, http.StatusBadRequest)
		if msg, _ := res.body["error"].(string); !strings.Contains(msg, c.want) {
			t.Errorf("%s %s: error %q does not say %q", c.path, c.body, msg, c.want)
		}
	}
	res := auth(t, f.h, "GET", "/api/items/actions?limit=101", "")
	want(t, res, http.StatusBadRequest)
	if msg := res.body["error"].(string); !strings.Contains(msg, "limit") {
		t.Errorf("limit 101: %q", msg)
	}
	if list, _ := f.q.ItemBulkActions(context.Background(), 0, 0); len(list) != 0 {
		t.Fatalf("bad input stored %+v", list)
	}
}

// A cancel of the items parked on a key over the API: the dry run counts and samples them, the
// action cancels exactly those, its progress and totals read back, an identical action is
// refused while it runs, and a cancel of the finished action changes nothing.
func TestItemBulkRoutesCancelByKey(t *testing.T) {
	f := newItemBulkFixture(t, 3, nil)
	ctx := context.Background()
	body := `{"kind":"cancel","filter":{"state":"parked","key":"blocked.example"},"reason":"endpoint retired","rate":1000`
	dry := auth(t, f.h, "POST", "/api/items/actions", body+`,"dry_run":true}`)
	want(t, dry, http.StatusOK)
	if dry.body["matched"].(float64) != 3 || len(dry.body["sample"].([]any)) != 3 ||
		dry.body["sample"].([]any)[0].(map[string]any)["parked_key"] != "blocked.example" {
		t.Fatalf("dry run: %v", dry.body)
	}
	res := auth(t, f.h, "POST", "/api/items/actions", body+`}`)
	want(t, res, http.StatusCreated)
	a := res.body["action"].(map[string]any)
	id := int64(a["id"].(float64))
	if a["kind"] != "cancel" || a["matched"].(float64) != 3 || a["filter"].(map[string]any)["key"] != "blocked.example" || a["actor"] != "admin" {
		t.Fatalf("started: %v", a)
	}
	again := auth(t, f.h, "POST", "/api/items/actions", body+`}`)
	if again.Code != http.StatusConflict && again.Code != http.StatusCreated {
		t.Fatalf("identical action: %d %v", again.Code, again.body)
	}
	var got map[string]any
	deadline := time.Now().Add(30 * time.Second)
	for {
		res := auth(t, f.h, "GET", fmt.Sprintf("/api/items/actions/%d", id), "")
		want(t, res, http.StatusOK)
		got = res.body["action"].(map[string]any)
		if got["state"] == "done" || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline, as the dashboard does
	}
	if got["state"] != "done" || got["totals"].(map[string]any)["changed"].(float64) != 3 || got["settled"].(float64) != 3 ||
		got["cursor"].(float64) != float64(f.parked[2]) {
		t.Fatalf("action: %v", got)
	}
	for _, id := range f.parked {
		if it, _ := f.q.Item(ctx, id); it.State != record.StateCancelled {
			t.Errorf("parked item %d: %s", id, it.State)
		}
	}
	for _, id := range f.later {
		if it, _ := f.q.Item(ctx, id); it.State != record.StatePending {
			t.Errorf("other item %d: %s", id, it.State)
		}
	}
	list := auth(t, f.h, "GET", "/api/items/actions", "")
	want(t, list, http.StatusOK)
	if acts := list.body["actions"].([]any); len(acts) == 0 || int64(acts[len(acts)-1].(map[string]any)["id"].(float64)) != id {
		t.Fatalf("list: %v", list.body)
	}
	c := auth(t, f.h, "POST", fmt.Sprintf("/api/items/actions/%d/cancel", id), `{"reason":"late"}`)
	want(t, c, http.StatusOK)
	if c.body["action"].(map[string]any)["state"] != "done" {
		t.Fatalf("cancel of a finished action: %v", c.body)
	}
}
