package admin_test

import (
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/sqlite"
)

// TestRoutesRefuseUnstorableText: a NUL byte or invalid UTF-8 in a filter, a pause's target or
// a schedule's name, and a filter longer than any stored text, are refused with 400 naming the
// field, on SQLite and PostgreSQL alike. On PostgreSQL, whose text holds neither, each answered
// 500 and logged an error; on SQLite an error filter of 50,000 bytes answered 500 ("LIKE or
// GLOB pattern too complex").
func TestRoutesRefuseUnstorableText(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		testRoutesRefuseUnstorableText(t, sqlite.Open(filepath.Join(t.TempDir(), "queue.db")))
	})
	t.Run("postgres", func(t *testing.T) { testRoutesRefuseUnstorableText(t, postgresDriver(t)) })
}

func testRoutesRefuseUnstorableText(t *testing.T, driver durable.Driver) {
	f := newFixtureOn(t, driver, durable.Config{})
	long := strings.Repeat("x", 50_000)
	for _, c := range []struct{ method, path, body, want string }{
		{"GET", "/api/dead-letters?source=" + url.QueryEscape("crm\x00sync"), "", "source \"crm\\x00sync\" holds a NUL byte"},
		{"GET", "/api/dead-letters?source=" + url.QueryEscape("crm\xffsync"), "", "source \"crm\\xffsync\" is not valid UTF-8"},
		{"GET", "/api/dead-letters?error=" + long, "", "error is 50000 bytes, more than 1024"},
		{"GET", "/api/items?name=" + url.QueryEscape("crm\x00"), "", "name \"crm\\x00\" holds a NUL byte"},
		{"GET", "/api/items?state=parked&key=" + url.QueryEscape("host\xff"), "", "key \"host\\xff\" is not valid UTF-8"},
		{"POST", "/api/pauses", `{"kind": "breaker_key", "target": "host\u0000a", "reason": "maintenance"}`, `field "target" "host\x00a" holds a NUL byte`},
		{"POST", "/api/dead-letters/actions", `{"kind": "replay", "filter": {"source": "crm\u0000"}, "dry_run": true}`, `filter.source "crm\x00" holds a NUL byte`},
		{"POST", "/api/dead-letters/actions", `{"kind": "replay", "filter": {"error": "` + long + `"}, "dry_run": true}`, "filter.error is 50000 bytes, more than 1024"},
		{"POST", "/api/schedules/" + url.PathEscape("nightly\x00") + "/pause", `{}`, `schedule name "nightly\x00" holds a NUL byte`},
		{"GET", "/api/schedules/" + url.PathEscape("nightly\xff") + "/runs", "", `schedule name "nightly\xff" is not valid UTF-8`},
		{"POST", "/api/schedules", `{"name": "n\u0000", "spec": "@hourly", "request": "crm.import-contact"}`, `field "name" "n\x00" holds a NUL byte`},
	} {
		res := auth(t, f.h, c.method, c.path, c.body)
		if res.Code != http.StatusBadRequest {
			t.Errorf("%s %s: status %d, want 400; body %v", c.method, shortPath(c.path), res.Code, res.body)
			continue
		}
		if msg, _ := res.body["error"].(string); !strings.Contains(msg, c.want) {
			t.Errorf("%s %s: %q, want %q", c.method, shortPath(c.path), msg, c.want)
		}
	}
}

// shortPath is path cut for a message.
func shortPath(path string) string {
	if len(path) > 80 {
		return path[:80] + "…"
	}
	return path
}
