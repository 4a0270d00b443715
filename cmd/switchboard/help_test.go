package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// Every command answers --help with its usage, on standard output, and exit status 0; every
// command that acts shows examples.
func TestHelpOfEveryCommand(t *testing.T) {
	var walk func(c *command, path []string)
	n := 0
	walk = func(c *command, path []string) {
		name := strings.Join(path, " ")
		r := runCLI(t, nil, append(path[1:], "--help")...)
		if r.code != 0 || r.stderr != "" {
			t.Errorf("%s --help: exit %d, stderr %q", name, r.code, r.stderr)
		}
		if !strings.HasPrefix(r.stdout, "Usage: "+name+" ") {
			t.Errorf("%s --help starts %q", name, firstLine(r.stdout))
		}
		if len(c.subs) == 0 && c.name != "down" && !strings.Contains(r.stdout, "Examples:\n  switchboard ") {
			t.Errorf("%s --help has no examples:\n%s", name, r.stdout)
		}
		for _, s := range c.subs {
			if !strings.Contains(r.stdout, "\n  "+s.name+" ") {
				t.Errorf("%s --help does not list %s:\n%s", name, s.name, r.stdout)
			}
		}
		n++
		for _, s := range c.subs {
			walk(s, append(path[:len(path):len(path)], s.name))
		}
	}
	walk(rootCommand(), []string{programName})
	if n < 30 {
		t.Fatalf("%d commands' help checked", n)
	}
	// "help" names a command too.
	r := runCLI(t, nil, "help", "letters", "replay")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "Usage: switchboard letters replay ") {
		t.Fatalf("switchboard help letters replay: %d %q", r.code, firstLine(r.stdout))
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// A command used wrongly exits 2 and says what is wrong, pointing at its help; the token is
// never shown by --help even when it is in the environment.
func TestUsageErrors(t *testing.T) {
	env := map[string]string{"SWITCHBOARD_URL": "http://127.0.0.1:1", "SWITCHBOARD_TOKEN": "do-not-print-me"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "no command given"},
		{[]string{"nope"}, `unknown command "nope"`},
		{[]string{"items"}, "no items command given"},
		{[]string{"items", "show"}, "want one item ID"},
		{[]string{"items", "show", "x1"}, `item ID "x1" is not a positive integer`},
		{[]string{"items", "ls", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"stats", "now"}, `unexpected argument "now"`},
		{[]string{"migrate", "status", "--db", "sqlite:x.db", "extra"}, `unexpected argument "extra"`},
		{[]string{"items", "cancel", "7"}, "--reason is required"},
		{[]string{"letters", "discard", "--source", "crm-sync"}, "--reason is required"},
		{[]string{"letters", "replay"}, "no filter: give --source"},
		{[]string{"letters", "replay", "4", "--source", "x"}, "not both"},
		{[]string{"pauses", "add", "--reason", "x"}, "give --name"},
		{[]string{"breakers", "trip"}, "want one breaker KEY"},
		{[]string{"stats", "--url", "ftp://example"}, `"ftp://example" is not an http:// or https:// URL`},
		{[]string{"migrate", "up"}, "no database: set SWITCHBOARD_DB"},
		{[]string{"migrate", "up", "--db", "mysql://u:hunter2@h/db"}, `"mysql://u:xxxxx@h/db" is neither sqlite:PATH nor a postgres:// URL`},
	} {
		r := runCLI(t, env, c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) || !strings.Contains(r.stderr, "--help)") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, r.code, r.stderr, c.want)
		}
	}
	if r := runCLI(t, map[string]string{"SWITCHBOARD_URL": "http://x.example"}, "stats"); r.code != exitUsage || !strings.Contains(r.stderr, "no admin token: set SWITCHBOARD_TOKEN") {
		t.Errorf("stats without a token: %d %q", r.code, r.stderr)
	}
	if r := runCLI(t, env, "stats", "--help"); strings.Contains(r.stdout, "do-not-print-me") {
		t.Errorf("--help shows the token:\n%s", r.stdout)
	}
}

// A wrong token, an address where nothing listens and an address that is not the admin API
// each fail with exit status 1 and a message that says which.
func TestRefusedTokenAndWrongURL(t *testing.T) {
	s := newServer(t, false)
	r := runCLI(t, map[string]string{"SWITCHBOARD_URL": s.url, "SWITCHBOARD_TOKEN": "wrong"}, "stats")
	if r.code != exitFailed || !strings.Contains(r.stderr, "switchboard: the admin API refused the token (403): forbidden") {
		t.Errorf("a wrong token: exit %d, stderr %q", r.code, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("a wrong token printed %q", r.stdout)
	}

	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	r = runCLI(t, map[string]string{"SWITCHBOARD_URL": gone.URL, "SWITCHBOARD_TOKEN": token}, "breakers", "ls")
	if r.code != exitFailed || !strings.Contains(r.stderr, "switchboard: cannot reach the admin API at "+gone.URL) {
		t.Errorf("an address where nothing listens: exit %d, stderr %q", r.code, r.stderr)
	}

	var status atomic.Int32 // set by the test, read by the server's handler
	status.Store(http.StatusNotFound)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(int(status.Load()))
		w.Write([]byte("<h1>not here</h1>"))
	}))
	defer other.Close()
	r = runCLI(t, map[string]string{"SWITCHBOARD_URL": other.URL + "/app", "SWITCHBOARD_TOKEN": token}, "stats")
	if r.code != exitFailed || !strings.Contains(r.stderr, "404 Not Found (text/html), not the admin API's JSON: is "+other.URL+"/app the address the admin handler is mounted at") {
		t.Errorf("an address that is not the admin API: exit %d, stderr %q", r.code, r.stderr)
	}

	// A proxy's own refusal is not the admin API judging the token.
	status.Store(http.StatusUnauthorized)
	r = runCLI(t, map[string]string{"SWITCHBOARD_URL": other.URL, "SWITCHBOARD_TOKEN": token}, "stats")
	if r.code != exitFailed || !strings.Contains(r.stderr, "with 401 Unauthorized (text/html) before the admin API could judge the token") {
		t.Errorf("a proxy's 401: exit %d, stderr %q", r.code, r.stderr)
	}
}
