package main

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

// Flags may follow the positional arguments; after "--" everything is positional.
func TestParseInterleaved(t *testing.T) {
	for _, c := range []struct {
		args, want []string
		json       bool
	}{
		{[]string{"42", "--json"}, []string{"42"}, true},
		{[]string{"--json", "42", "43"}, []string{"42", "43"}, true},
		{[]string{"42", "--", "--json"}, []string{"42", "--json"}, false},
		{nil, nil, false},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		j := fs.Bool("json", false, "")
		got, err := parseInterleaved(fs, c.args)
		if err != nil || !slices.Equal(got, c.want) || *j != c.json {
			t.Errorf("%q: %q, json %v, %v; want %q, json %v", c.args, got, *j, err, c.want, c.json)
		}
	}
}

// A table's cell is one line of at most maxCell runes; an empty one shows "-".
func TestCell(t *testing.T) {
	long := strings.Repeat("é", 100)
	for in, want := range map[string]string{
		"":                "-",
		"  a\n\tb  ":      "a b",
		long:              strings.Repeat("é", maxCell-1) + "…",
		"timeout after 3": "timeout after 3",
	} {
		if got := cell(in); got != want {
			t.Errorf("cell(%q) = %q, want %q", in, got, want)
		}
	}
}

// The password of a DSN the tool cannot use is not printed back.
func TestRedact(t *testing.T) {
	if got := redact("mysql://app:hunter2@db.internal/x"); got != "mysql://app:xxxxx@db.internal/x" {
		t.Fatalf("redact = %q", got)
	}
	if got := redact("sqlite3:var/q.db"); got != "sqlite3:var/q.db" {
		t.Fatalf("redact = %q", got)
	}
}
