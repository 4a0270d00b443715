package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/mediator"
)

// itemsFixture is an admin handler over a queue whose scheduler runs: one item is running (its
// handler waits for release), one pending and due in an hour, one succeeded.
type itemsFixture struct {
	h                           http.Handler
	q                           *durable.Queue
	running, pending, succeeded record.ItemID
	release                     chan struct{}
}

func newItemsFixture(t *testing.T) *itemsFixture {
	t.Helper()
	ctx := context.Background()
	started, settled := make(chan struct{}), make(chan record.Settled, 10)
	q, err := durable.Open(ctx, sqlite.Open(filepath.Join(t.TempDir(), "queue.db")), durable.Config{Logger: zap.NewNop(),
		Workers: 2, PollInterval: time.Hour, OnSettled: []func(string, record.Settled){
			func(_ string, outcome record.Settled) { settled <- outcome }}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	durable.Register[*importContact](q, "crm.import-contact")
	f := &itemsFixture{q: q, release: make(chan struct{})}
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, r *importContact) (mediator.Void, error) {
		if r.Email == "slow@example" {
			close(started)
			<-f.release
		}
		return mediator.Void{}, nil
	})
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	enqueue := func(email string, opts ...durable.EnqueueOption) record.ItemID {
		t.Helper()
		e, err := q.Enqueue(ctx, &importContact{Email: email}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return e.ID
	}
	f.succeeded = enqueue("bob@example")
	f.running = enqueue("slow@example")
	f.pending = enqueue("later@example", durable.WithDelay(time.Hour))
	if err := q.Start(m); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-f.release:
		default:
			close(f.release)
		}
		_ = q.Shutdown(context.Background())
	})
	<-started
	if o := <-settled; o != "succeeded" { // bob's
		t.Fatalf("first item settled %s", o)
	}
	f.h, err = admin.New(admin.Config{Queue: q, Sender: m, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func itemsOf(t *testing.T, res response) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, v := range res.body["items"].([]any) {
		out = append(out, v.(map[string]any))
	}
	return out
}

func TestItemRoutes(t *testing.T) {
	f := newItemsFixture(t)
	id := func(i record.ItemID) string { return fmt.Sprint(i) }

	// Listing by state, a page at a time.
	res := auth(t, f.h, "GET", "/api/items?state=pending", "")
	want(t, res, http.StatusOK)
	if items := itemsOf(t, res); len(items) != 1 || items[0]["id"] != float64(f.pending) || items[0]["next_at"] == nil || res.body["next"] != "" {
		t.Fatalf("pending = %v", res.body)
	}
	res = auth(t, f.h, "GET", "/api/items?state=running&name=crm.import-contact", "")
	want(t, res, http.StatusOK)
	if items := itemsOf(t, res); len(items) != 1 || items[0]["id"] != float64(f.running) || items[0]["lease_owner"] == "" {
		t.Fatalf("running = %v", res.body)
	}
	res = auth(t, f.h, "GET", "/api/items?state=succeeded&limit=1", "")
	want(t, res, http.StatusOK)
	if items := itemsOf(t, res); len(items) != 1 || res.body["next"] != "" {
		t.Fatalf("succeeded = %v", res.body)
	}
	var later []record.ItemID
	for range 3 {
		later = append(later, got[durable.Enqueued](t)(f.q.Enqueue(context.Background(), &importContact{Email: "x@example"}, durable.WithDelay(time.Hour))).ID)
	}
	res = auth(t, f.h, "GET", "/api/items?limit=3", "")
	want(t, res, http.StatusOK)
	next, _ := res.body["next"].(string)
	if len(itemsOf(t, res)) != 3 || next == "" {
		t.Fatalf("first page = %v", res.body)
	}
	res = auth(t, f.h, "GET", "/api/items?limit=3&after="+next, "")
	want(t, res, http.StatusOK)
	if len(itemsOf(t, res)) != 1 || res.body["next"] != "" {
		t.Fatalf("second page = %v", res.body)
	}
	want(t, auth(t, f.h, "GET", "/api/items?state=parked&key=breaker:x", ""), http.StatusOK)

	// Inspect: the item with its payload, and its attempts.
	res = auth(t, f.h, "GET", "/api/items/"+id(f.succeeded), "")
	want(t, res, http.StatusOK)
	it := res.body["item"].(map[string]any)
	attempts := res.body["attempts"].([]any)
	if it["state"] != "succeeded" || it["payload"].(map[string]any)["email"] != "bob@example" || len(attempts) != 1 ||
		attempts[0].(map[string]any)["outcome"] != "succeeded" {
		t.Fatalf("item = %v", res.body)
	}

	// Cancel: running answers 409 and is not interrupted; pending is cancelled; finished is 409.
	res = auth(t, f.h, "POST", "/api/items/"+id(f.running)+"/cancel", `{"reason":"stuck?"}`)
	want(t, res, http.StatusConflict)
	if res.body["result"] != "running" || res.body["state"] != "running" || !strings.Contains(errorOf(res), "not interrupted") {
		t.Fatalf("cancel running = %v", res.body)
	}
	res = auth(t, f.h, "POST", "/api/items/"+id(f.running)+"/run-now", `{}`)
	want(t, res, http.StatusConflict)
	if res.body["result"] != "running" {
		t.Fatalf("run now running = %v", res.body)
	}
	res = auth(t, f.h, "POST", "/api/items/"+id(f.pending)+"/run-now", "")
	want(t, res, http.StatusOK)
	if res.body["result"] != "due" || res.body["state"] == "" { // the woken scheduler may have run it already
		t.Fatalf("run now = %v", res.body)
	}
	res = auth(t, f.h, "POST", "/api/items/"+id(f.succeeded)+"/cancel", `{"reason":"late"}`)
	want(t, res, http.StatusConflict)
	if res.body["result"] != "finished" || !strings.Contains(errorOf(res), "succeeded") {
		t.Fatalf("cancel finished = %v", res.body)
	}
	res = auth(t, f.h, "POST", "/api/items/"+id(later[0])+"/cancel", `{"reason":"duplicate import"}`)
	want(t, res, http.StatusOK)
	if res.body["result"] != "cancelled" || res.body["state"] != "cancelled" {
		t.Fatalf("cancel = %v", res.body)
	}
	log := got[[]record.AuditEntry](t)(f.q.Audit(context.Background(), durable.AuditFilter{TargetKind: record.AuditTargetItem}))
	if len(log) != 5 || log[0].Actor != "admin" || log[0].Detail != "reason: duplicate import" || log[0].Outcome != record.AuditDone {
		t.Fatalf("audit = %+v", log)
	}
	res = auth(t, f.h, "GET", "/api/queue", "")
	if res.body["items"].(map[string]any)["cancelled"] != float64(1) {
		t.Fatalf("queue = %v", res.body)
	}
}

// An item's view names its debounce key beside its dedupe key.
func TestItemShowsDebounceKey(t *testing.T) {
	f := newItemsFixture(t)
	res := got[durable.Enqueued](t)(f.q.Enqueue(context.Background(), &importContact{Email: "ann@example"},
		durable.WithDebounce("contact:ann", time.Hour, 2*time.Hour)))
	body := auth(t, f.h, "GET", fmt.Sprintf("/api/items/%d", res.ID), "")
	want(t, body, http.StatusOK)
	if it := body.body["item"].(map[string]any); it["debounce_key"] != "contact:ann" || it["dedupe_key"] != "" {
		t.Fatalf("item = %v", it)
	}
}

// got returns v, failing the test on err.
func got[T any](t *testing.T) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// Bad input is 400 naming what is wrong; an unknown item 404.
func TestItemRoutesRefuseBadInput(t *testing.T) {
	f := newItemsFixture(t)
	for q, msg := range map[string]string{
		"state=paused":   `state "paused"`,
		"from=yesterday": `from "yesterday"`,
		"to=2026-13-01":  `to "2026-13-01"`,
		"from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z": "the range is empty",
		"limit=0":                     `limit "0"`,
		"limit=501":                   `limit "501"`,
		"after=bogus":                 `after "bogus"`,
		"state=dead&key=breaker:x":    `key "breaker:x" with state "dead"`,
		"status=pending":              `unknown query parameter "status"`,
		"state=pending&state=running": `"state" is given 2 times`,
	} {
		res := auth(t, f.h, "GET", "/api/items?"+q, "")
		want(t, res, http.StatusBadRequest)
		if !strings.Contains(errorOf(res), msg) {
			t.Errorf("%s: error %q does not name %s", q, errorOf(res), msg)
		}
	}
	for _, rt := range []struct{ method, path, body, msg string }{
		{"GET", "/api/items/abc", "", `item id "abc"`},
		{"GET", "/api/items/0", "", `item id "0"`},
		{"POST", "/api/items/-1/cancel", `{"reason":"x"}`, `item id "-1"`},
		{"POST", "/api/items/1/cancel", `{}`, `"reason" is required`},
		{"POST", "/api/items/1/cancel", `{"reason":"x","force":true}`, "force"},
		{"POST", "/api/items/1/run-now", `[`, ""},
	} {
		res := auth(t, f.h, rt.method, rt.path, rt.body)
		want(t, res, http.StatusBadRequest)
		if !strings.Contains(errorOf(res), rt.msg) {
			t.Errorf("%s %s: error %q does not name %s", rt.method, rt.path, errorOf(res), rt.msg)
		}
	}
	for _, rt := range []struct{ method, path, body string }{
		{"GET", "/api/items/987654", ""}, {"POST", "/api/items/987654/cancel", `{"reason":"x"}`}, {"POST", "/api/items/987654/run-now", ""},
	} {
		res := auth(t, f.h, rt.method, rt.path, rt.body)
		want(t, res, http.StatusNotFound)
		if !strings.Contains(errorOf(res), "unknown item 987654") {
			t.Errorf("%s %s: %q", rt.method, rt.path, errorOf(res))
		}
	}
	if log := got[[]record.AuditEntry](t)(f.q.Audit(context.Background(), durable.AuditFilter{})); len(log) != 0 {
		t.Errorf("bad requests were audited: %+v", log)
	}
}

// A state change through a session cookie needs the CSRF token; without it nothing changes.
func TestItemRoutesNeedCSRF(t *testing.T) {
	f := newItemsFixture(t)
	res := auth(t, f.h, "POST", "/api/session", "")
	want(t, res, http.StatusOK)
	csrf, _ := res.body["csrf_token"].(string)
	c := res.Result().Cookies()[0]
	cookie := c.Name + "=" + c.Value
	path := "/api/items/" + fmt.Sprint(f.pending)
	want(t, do(t, f.h, "GET", "/api/items", "", "Cookie", cookie), http.StatusOK)
	want(t, do(t, f.h, "POST", path+"/cancel", `{"reason":"x"}`, "Cookie", cookie), http.StatusForbidden)
	want(t, do(t, f.h, "POST", path+"/run-now", "", "Cookie", cookie, "X-CSRF-Token", csrf+"x"), http.StatusForbidden)
	if it := got[record.Item](t)(f.q.Item(context.Background(), f.pending)); it.State != record.StatePending || it.NextAt.Before(time.Now().Add(30*time.Minute)) {
		t.Fatalf("a request without the CSRF token changed the item: %+v", it)
	}
	want(t, do(t, f.h, "POST", path+"/cancel", `{"reason":"x"}`, "Cookie", cookie, "X-CSRF-Token", csrf), http.StatusOK)
}

// A queue that is not an admin.Items (a stand-in for Operations) gets 404 naming what it lacks.
func TestItemRoutesNeedItems(t *testing.T) {
	h, err := admin.New(admin.Config{Queue: downQueue{}, Sender: nopSender{}, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range []struct{ method, path, body string }{
		{"GET", "/api/items", ""}, {"GET", "/api/items/1", ""}, {"POST", "/api/items/1/cancel", `{"reason":"x"}`}, {"POST", "/api/items/1/run-now", ""},
	} {
		res := auth(t, h, rt.method, rt.path, rt.body)
		want(t, res, http.StatusNotFound)
		if !strings.Contains(errorOf(res), "admin.Items") {
			t.Errorf("%s %s: %q", rt.method, rt.path, errorOf(res))
		}
	}
}
