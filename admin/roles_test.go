package admin_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
)

// The tokens of the role tests, one per role.
var roleTokens = []admin.BearerToken{
	{Token: "viewer-token-for-tests", Name: "vera", Role: admin.RoleViewer},
	{Token: "operator-token-for-tests", Name: "otto", Role: admin.RoleOperator},
	{Token: "admin-token-for-tests", Name: "ada", Role: admin.RoleAdmin},
}

// routeCase is one route of the role table: the request to send and the role it needs.
type routeCase struct {
	path, body string
	need       admin.Role
}

// routeTable is every route of the handler with a request that reaches it and the role it
// needs: docs/operations.md's table. TestRouteRoles fails when a route is registered without
// a line here, or with another role.
func routeTable(letter string) map[string]routeCase {
	v, o, a := admin.RoleViewer, admin.RoleOperator, admin.RoleAdmin
	return map[string]routeCase{
		"POST /api/session":                          {"/api/session", "", v},
		"GET /api/session":                           {"/api/session", "", v},
		"DELETE /api/session":                        {"/api/session", "", v},
		"GET /api/breakers":                          {"/api/breakers", "", v},
		"GET /api/breakers/{key}":                    {"/api/breakers/payments", "", v},
		"POST /api/breakers/{key}/trip":              {"/api/breakers/payments/trip", "", o},
		"POST /api/breakers/{key}/reset":             {"/api/breakers/payments/reset", "", o},
		"GET /api/hedges":                            {"/api/hedges", "", v},
		"GET /api/dead-letters":                      {"/api/dead-letters", "", v},
		"GET /api/dead-letters/{id}":                 {"/api/dead-letters/" + letter, "", v},
		"POST /api/dead-letters/{id}/replay":         {"/api/dead-letters/" + letter + "/replay", "", o},
		"POST /api/dead-letters/{id}/discard":        {"/api/dead-letters/" + letter + "/discard", `{"reason": "test"}`, o},
		"POST /api/dead-letters/replay":              {"/api/dead-letters/replay", `{"ids": [` + letter + `]}`, o},
		"POST /api/dead-letters/discard":             {"/api/dead-letters/discard", `{"ids": [` + letter + `], "reason": "test"}`, o},
		"POST /api/dead-letters/actions":             {"/api/dead-letters/actions", `{"kind": "replay", "dry_run": true}`, o},
		"GET /api/dead-letters/actions":              {"/api/dead-letters/actions", "", v},
		"GET /api/dead-letters/actions/{id}":         {"/api/dead-letters/actions/1", "", v},
		"POST /api/dead-letters/actions/{id}/cancel": {"/api/dead-letters/actions/1/cancel", "", o},
		"POST /api/breakers/{key}/reset-and-replay":  {"/api/breakers/payments/reset-and-replay", `{"dry_run": true}`, o},
		"GET /api/schedules":                         {"/api/schedules", "", v},
		"GET /api/schedules/{name}/runs":             {"/api/schedules/nightly/runs", "", v},
		"POST /api/schedules":                        {"/api/schedules", `{"name": "nightly", "spec": "0 2 * * *", "request": "crm.import-contact", "payload": {"email": "a@example"}}`, a},
		"DELETE /api/schedules/{name}":               {"/api/schedules/nightly", "", a},
		"POST /api/schedules/{name}/pause":           {"/api/schedules/nightly/pause", "", o},
		"POST /api/schedules/{name}/resume":          {"/api/schedules/nightly/resume", "", o},
		"POST /api/schedules/{name}/run-now":         {"/api/schedules/nightly/run-now", "", o},
		"GET /api/queue":                             {"/api/queue", "", v},
		"GET /api/pauses":                            {"/api/pauses", "", v},
		"POST /api/pauses":                           {"/api/pauses", `{"kind": "name", "target": "crm.import-contact", "reason": "test"}`, o},
		"POST /api/pauses/resume":                    {"/api/pauses/resume", `{"kind": "name", "target": "crm.import-contact"}`, o},
		"GET /api/audit":                             {"/api/audit", "", v},
		"GET /api/concurrency-limits":                {"/api/concurrency-limits", "", v},
		"PUT /api/concurrency-limits/{key}":          {"/api/concurrency-limits/payments", `{"max": 2}`, a},
		"DELETE /api/concurrency-limits/{key}":       {"/api/concurrency-limits/payments", "", a},
		"GET /api/retry-budgets":                     {"/api/retry-budgets", "", v},
		"GET /api/rate-limits":                       {"/api/rate-limits", "", v},
		"GET /api/busiest-keys":                      {"/api/busiest-keys", "", v},
		"GET /api/history":                           {"/api/history", "", v},
		"GET /api/find":                              {"/api/find?q=n-1", "", v},
		"GET /api/items":                             {"/api/items", "", v},
		"GET /api/items/{id}":                        {"/api/items/1", "", v},
		"POST /api/items/{id}/cancel":                {"/api/items/1/cancel", `{"reason": "test"}`, o},
		"POST /api/items/{id}/run-now":               {"/api/items/1/run-now", "", o},
		"POST /api/items/actions":                    {"/api/items/actions", `{"kind": "cancel", "dry_run": true}`, o},
		"GET /api/items/actions":                     {"/api/items/actions", "", v},
		"GET /api/items/actions/{id}":                {"/api/items/actions/1", "", v},
		"POST /api/items/actions/{id}/cancel":        {"/api/items/actions/1/cancel", "", o},
		"GET /metrics":                               {"/metrics", "", v},
	}
}

// rolesHandler is the handler of f's registry and queue with the role tokens.
func rolesHandler(t *testing.T, f *fixture) http.Handler {
	t.Helper()
	h, err := admin.New(admin.Config{Breakers: f.reg, Queue: f.q, Sender: f.m, Tokens: roleTokens,
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "# metrics\n") })})
	must(t, err)
	return h
}

// Every route × every role: a principal whose role is the route's or above gets past the
// authorization (neither 401 nor 403), one below gets 403 naming their role and what the route
// needs, a request without credentials 401. The table must name every registered route.
func TestRouteRoles(t *testing.T) {
	registered, err := admin.RouteRoles(admin.Config{Breakers: breaker.NewRegistry(breaker.Config{}), Token: token})
	must(t, err)
	table := routeTable("1")
	for pattern, role := range registered {
		c, ok := table[pattern]
		switch {
		case !ok:
			t.Errorf("route %q (needs %v) has no line in routeTable (nor in docs/operations.md's table?)", pattern, role)
		case c.need != role:
			t.Errorf("route %q needs %v; routeTable says %v", pattern, role, c.need)
		}
	}
	for pattern := range table {
		if _, ok := registered[pattern]; !ok {
			t.Errorf("routeTable's %q is no route of the handler", pattern)
		}
	}
	patterns := slices.Sorted(func(yield func(string) bool) {
		for p := range table {
			if !yield(p) {
				return
			}
		}
	})
	for _, who := range append([]admin.BearerToken{{Name: "nobody", Role: -1}}, roleTokens...) {
		t.Run(who.Name, func(t *testing.T) {
			// A fresh queue for each principal: what one did (a replay) does not change what
			// the next one's request finds.
			f := newFixture(t, durable.Config{})
			h := rolesHandler(t, f)
			table := routeTable(fmt.Sprint(f.letters[0]))
			for _, pattern := range patterns {
				c := table[pattern]
				method, _, _ := strings.Cut(pattern, " ")
				var hdr []string
				if who.Token != "" {
					hdr = []string{"Authorization", "Bearer " + who.Token}
				}
				if c.body != "" {
					hdr = append(hdr, "Content-Type", "application/json")
				}
				res := do(t, h, method, c.path, c.body, hdr...)
				msg, _ := res.body["error"].(string)
				switch {
				case who.Token == "":
					if res.Code != http.StatusUnauthorized {
						t.Errorf("%s without credentials: %d %s; want 401", pattern, res.Code, res.Body)
					}
				case who.Role < c.need:
					want := fmt.Sprintf("forbidden: %s is a%s %v; ", who.Name, map[bool]string{true: "n", false: ""}[who.Role == admin.RoleOperator], who.Role)
					if res.Code != http.StatusForbidden || !strings.HasPrefix(msg, want) || !strings.HasSuffix(msg, " needs the "+c.need.String()+" role") {
						t.Errorf("%s as %v: %d %q; want 403 %q… needs the %v role", pattern, who.Role, res.Code, msg, want, c.need)
					}
				default:
					if res.Code == http.StatusUnauthorized || res.Code == http.StatusForbidden || res.Code >= 500 {
						t.Errorf("%s as %v: %d %s; want it let through", pattern, who.Role, res.Code, res.Body)
					}
				}
			}
		})
	}
}

// A session keeps the role of the token it was made with: the session routes answer it, a
// write with the cookie still needs the CSRF token, and the role is checked after it.
func TestSessionKeepsRole(t *testing.T) {
	f := newFixture(t, durable.Config{})
	h := rolesHandler(t, f)
	login := func(tok string) (cookie, csrf string) {
		t.Helper()
		res := do(t, h, "POST", "/api/session", "", "Authorization", "Bearer "+tok)
		want(t, res, http.StatusOK)
		csrf, _ = res.body["csrf_token"].(string)
		if res.body["role"] == nil || csrf == "" {
			t.Fatalf("POST session = %v", res.body)
		}
		c := res.Result().Cookies()[0]
		return c.Name + "=" + c.Value, csrf
	}
	vc, vcsrf := login("viewer-token-for-tests")
	res := do(t, h, "GET", "/api/session", "", "Cookie", vc)
	want(t, res, http.StatusOK)
	if res.body["principal"] != "vera" || res.body["role"] != "viewer" || res.body["csrf_token"] != vcsrf {
		t.Fatalf("GET session of a viewer = %v", res.body)
	}
	want(t, do(t, h, "GET", "/api/breakers", "", "Cookie", vc), http.StatusOK)
	// Without the CSRF token the write is refused for that first, whatever the role.
	res = do(t, h, "POST", "/api/breakers/payments/trip", "", "Cookie", vc)
	want(t, res, http.StatusForbidden)
	if msg := res.body["error"].(string); !strings.Contains(msg, "X-CSRF-Token") {
		t.Errorf("403 without CSRF token: %q", msg)
	}
	res = do(t, h, "POST", "/api/breakers/payments/trip", "", "Cookie", vc, "X-CSRF-Token", vcsrf)
	want(t, res, http.StatusForbidden)
	if msg := res.body["error"].(string); msg != "forbidden: vera is a viewer; tripping a breaker needs the operator role" {
		t.Errorf("403 of a viewer's session: %q", msg)
	}
	if s, _ := f.reg.Get("payments"); s.State != breaker.StateClosed {
		t.Fatal("a viewer tripped the breaker")
	}
	// A viewer may end their own session.
	want(t, do(t, h, "DELETE", "/api/session", "", "Cookie", vc, "X-CSRF-Token", vcsrf), http.StatusOK)
	want(t, do(t, h, "GET", "/api/session", "", "Cookie", vc), http.StatusUnauthorized)

	oc, ocsrf := login("operator-token-for-tests")
	want(t, do(t, h, "POST", "/api/breakers/payments/trip", "", "Cookie", oc), http.StatusForbidden)
	want(t, do(t, h, "POST", "/api/breakers/payments/trip", "", "Cookie", oc, "X-CSRF-Token", ocsrf), http.StatusOK)
	res = do(t, h, "PUT", "/api/concurrency-limits/payments", `{"max": 2}`, "Cookie", oc, "X-CSRF-Token", ocsrf, "Content-Type", "application/json")
	want(t, res, http.StatusForbidden)
	if msg := res.body["error"].(string); msg != "forbidden: otto is an operator; setting a concurrency limit needs the admin role" {
		t.Errorf("403 of an operator's session: %q", msg)
	}
	// Config.Token's principal is an admin.
	want(t, auth(t, h, "GET", "/api/session", ""), http.StatusForbidden) // this handler has no Config.Token
	res = auth(t, f.h, "GET", "/api/session", "")
	want(t, res, http.StatusOK)
	if res.body["principal"] != "admin" || res.body["role"] != "admin" {
		t.Errorf("GET session of Config.Token = %v", res.body)
	}
}

func TestConfigTokensAreValidated(t *testing.T) {
	reg := breaker.NewRegistry(breaker.Config{})
	for _, c := range []struct {
		name   string
		cfg    admin.Config
		errors []string
	}{
		{"none", admin.Config{}, []string{"Config.Authorizer, Config.Token or Config.Tokens is required"}},
		{"empty", admin.Config{Tokens: []admin.BearerToken{{}}}, []string{"Config.Tokens[0].Token is empty", "Config.Tokens[0].Name is empty"}},
		{"white space", admin.Config{Tokens: []admin.BearerToken{{Token: "abc\n", Name: " eve"}}}, []string{
			"Config.Tokens[0].Token has leading or trailing white space", `Config.Tokens[0].Name " eve" has leading or trailing white space`}},
		{"unknown role", admin.Config{Tokens: []admin.BearerToken{{Token: "abc", Name: "eve", Role: 7}}}, []string{"Config.Tokens[0].Role is Role(7), not a role"}},
		{"duplicates", admin.Config{Token: "abc", Tokens: []admin.BearerToken{{Token: "def", Name: "admin"}, {Token: "abc", Name: "eve"}, {Token: "def", Name: "eve"}}}, []string{
			"Config.Tokens[0].Name \"admin\" is the name of Config.Token", "Config.Tokens[1].Token is the token of Config.Token",
			"Config.Tokens[2].Token is the token of Config.Tokens[0]", `Config.Tokens[2].Name "eve" is the name of Config.Tokens[1]`}},
		{"with an authorizer", admin.Config{Tokens: roleTokens, Authorizer: admin.AuthorizerFunc(func(*http.Request) (admin.Principal, error) { return admin.Principal{}, nil })},
			[]string{"Config.Tokens is set with Config.Authorizer"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.Breakers = reg
			_, err := admin.New(c.cfg)
			if err == nil {
				t.Fatal("New accepted it")
			}
			for _, w := range c.errors {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), `"abc`) || strings.Contains(err.Error(), `"def`) {
				t.Errorf("error %q quotes a token", err)
			}
		})
	}
}

func TestParseRole(t *testing.T) {
	for _, r := range []admin.Role{admin.RoleViewer, admin.RoleOperator, admin.RoleAdmin} {
		got, err := admin.ParseRole(r.String())
		if err != nil || got != r {
			t.Errorf("ParseRole(%q) = %v, %v", r, got, err)
		}
	}
	for _, s := range []string{"", "Admin", " viewer", "root"} {
		if _, err := admin.ParseRole(s); err == nil || !strings.Contains(err.Error(), "want viewer, operator or admin") {
			t.Errorf("ParseRole(%q): %v", s, err)
		}
	}
	var r admin.Role
	if err := r.UnmarshalText([]byte("operator")); err != nil || r != admin.RoleOperator {
		t.Errorf("UnmarshalText(operator) = %v, %v", r, err)
	}
	if _, err := admin.Role(9).MarshalText(); err == nil {
		t.Error("MarshalText of Role(9) gave no error")
	}
}

// docs/operations.md's route table gives each route the role routeTable (and so the handler)
// gives it.
func TestRouteRolesDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "operations.md"))
	must(t, err)
	documented := map[string]string{}
	for _, line := range strings.Split(string(doc), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 6 || !strings.HasPrefix(strings.TrimSpace(cells[2]), "`/") {
			continue
		}
		documented[strings.TrimSpace(cells[1])+" "+strings.Trim(strings.TrimSpace(cells[2]), "`")] = strings.Trim(strings.TrimSpace(cells[3]), "*")
	}
	for pattern, c := range routeTable("1") {
		if got, ok := documented[pattern]; !ok {
			t.Errorf("docs/operations.md's route table has no line for %s", pattern)
		} else if got != c.need.String() {
			t.Errorf("docs/operations.md gives %s the role %q; the handler %q", pattern, got, c.need)
		}
	}
}
