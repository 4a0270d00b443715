package main

import (
	"flag"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// globals are the connection and output settings: from the environment, then from the flags
// of the root, of a group and of the command, each overriding the one before.
type globals struct {
	url     string
	token   string
	db      string
	timeout time.Duration
	json    bool
}

// declare declares on fs the flags of the connection n, and --json, with the values set so far
// as defaults.
func (g *globals) declare(fs *flag.FlagSet, n needs) {
	if n == needsAPI || n == needsAll {
		fs.Var(setting{&g.url}, "url", "the admin API's `address`: where the admin handler is mounted, the dashboard's address (default $SWITCHBOARD_URL)")
		fs.Var(setting{&g.token}, "token", "the admin's bearer `token` (default $SWITCHBOARD_TOKEN; prefer the variable: a flag stays in the shell's history)")
		fs.DurationVar(&g.timeout, "timeout", g.timeout, "how long one request to the admin API may take")
	}
	if n == needsDB || n == needsAll {
		fs.Var(setting{&g.db}, "db", "the `database`: sqlite:PATH or a postgres:// URL (default $SWITCHBOARD_DB)")
	}
	if n != needsNothing {
		fs.BoolVar(&g.json, "json", g.json, "print JSON instead of a table")
	}
}

// setting is a string flag whose value --help does not print: a token (or a DSN with its
// password) from the environment would be shown as the flag's default otherwise.
type setting struct{ p *string }

func (s setting) String() string { return "" }

func (s setting) Set(v string) error {
	*s.p = v
	return nil
}

// session is what a command works with: its output, and the admin API's client when the
// command calls it.
type session struct {
	name string // the command, for usage errors: "switchboard items show"
	out  *printer
	api  *client
	db   string
}

// session checks the settings the command needs and returns its session.
func (g *globals) session(name string, n needs, stdout io.Writer) (*session, error) {
	s := &session{name: name, out: &printer{w: stdout, json: g.json}, db: g.db}
	if n != needsAPI {
		return s, nil
	}
	if g.url == "" {
		return nil, usagef(name, "no admin API address: set SWITCHBOARD_URL (or --url) to where the admin handler is mounted, such as https://ops.example/admin")
	}
	u, err := url.Parse(g.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, usagef(name, "the admin API address %q is not an http:// or https:// URL of a mount (such as https://ops.example/admin)", g.url)
	}
	if strings.TrimSpace(g.token) == "" {
		return nil, usagef(name, "no admin token: set SWITCHBOARD_TOKEN (or --token)")
	}
	if g.timeout <= 0 {
		return nil, usagef(name, "--timeout %v is not positive", g.timeout)
	}
	s.api = &client{
		base:    strings.TrimSuffix(u.String(), "/"),
		token:   strings.TrimSpace(g.token),
		timeout: g.timeout,
		http:    &http.Client{},
	}
	return s, nil
}
