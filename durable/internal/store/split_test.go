package store

import (
	"slices"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	cases := []struct {
		name   string
		syntax Syntax
		script string
		want   []string
	}{
		{"plain", SQLiteSyntax, "CREATE TABLE a (x INT);\nCREATE INDEX i ON a (x);\n",
			[]string{"CREATE TABLE a (x INT)", "CREATE INDEX i ON a (x)"}},
		{"no final semicolon", SQLiteSyntax, "SELECT 1; SELECT 2", []string{"SELECT 1", "SELECT 2"}},
		{"empty statements and comment-only tail", SQLiteSyntax, ";; SELECT 1;\n-- the end; really\n/* ; */",
			[]string{"SELECT 1"}},
		{"single quotes", SQLiteSyntax, "INSERT INTO a VALUES ('x;y', 'it''s; fine'); SELECT 2",
			[]string{"INSERT INTO a VALUES ('x;y', 'it''s; fine')", "SELECT 2"}},
		{"double-quoted identifier", PostgresSyntax, `CREATE TABLE "a;b" ("c""; d" INT); SELECT 1`,
			[]string{`CREATE TABLE "a;b" ("c""; d" INT)`, "SELECT 1"}},
		{"line comment", SQLiteSyntax, "-- first; not a statement\nSELECT 1; -- trailing; too\nSELECT 2;",
			[]string{"-- first; not a statement\nSELECT 1", "-- trailing; too\nSELECT 2"}},
		{"block comment", SQLiteSyntax, "/* a; b */ SELECT 1 /* ; */; SELECT 2",
			[]string{"/* a; b */ SELECT 1 /* ; */", "SELECT 2"}},
		{"nested block comment (PostgreSQL)", PostgresSyntax, "/* a /* b; */ c; */ SELECT 1; SELECT 2",
			[]string{"/* a /* b; */ c; */ SELECT 1", "SELECT 2"}},
		{"dollar quotes", PostgresSyntax,
			"CREATE FUNCTION f() RETURNS int AS $$ BEGIN RETURN 1; END; $$ LANGUAGE plpgsql; SELECT f();",
			[]string{"CREATE FUNCTION f() RETURNS int AS $$ BEGIN RETURN 1; END; $$ LANGUAGE plpgsql", "SELECT f()"}},
		{"tagged dollar quotes with $$ inside", PostgresSyntax,
			"DO $body$ BEGIN PERFORM $$;$$; END $body$; SELECT 1",
			[]string{"DO $body$ BEGIN PERFORM $$;$$; END $body$", "SELECT 1"}},
		{"positional parameters are not quotes", PostgresSyntax, "SELECT $1; SELECT $2",
			[]string{"SELECT $1", "SELECT $2"}},
		{"dollar inside an identifier", PostgresSyntax, "SELECT a$b$ FROM t; SELECT 2",
			[]string{"SELECT a$b$ FROM t", "SELECT 2"}},
		{"escape string", PostgresSyntax, `SELECT E'a\'; b'; SELECT 2`, []string{`SELECT E'a\'; b'`, "SELECT 2"}},
		{"SQLite trigger", SQLiteSyntax,
			"CREATE TRIGGER t AFTER INSERT ON a BEGIN\n  UPDATE b SET n = n + 1;\n  DELETE FROM c WHERE x = CASE WHEN 1 THEN 2 ELSE 3 END;\nEND;\nSELECT 1;",
			[]string{"CREATE TRIGGER t AFTER INSERT ON a BEGIN\n  UPDATE b SET n = n + 1;\n  DELETE FROM c WHERE x = CASE WHEN 1 THEN 2 ELSE 3 END;\nEND", "SELECT 1"}},
		{"SQLite temp trigger", SQLiteSyntax,
			"CREATE TEMP TRIGGER t BEFORE DELETE ON a BEGIN SELECT 1; SELECT 2; END; SELECT 3",
			[]string{"CREATE TEMP TRIGGER t BEFORE DELETE ON a BEGIN SELECT 1; SELECT 2; END", "SELECT 3"}},
		{"CASE outside a trigger", SQLiteSyntax, "SELECT CASE WHEN 1 THEN 2 END; SELECT 3",
			[]string{"SELECT CASE WHEN 1 THEN 2 END", "SELECT 3"}},
		{"BEGIN ATOMIC body (PostgreSQL)", PostgresSyntax,
			"CREATE FUNCTION g() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; SELECT CASE WHEN true THEN 2 END; END; SELECT g()",
			[]string{"CREATE FUNCTION g() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; SELECT CASE WHEN true THEN 2 END; END", "SELECT g()"}},
		{"transaction statements", PostgresSyntax, "BEGIN; SELECT 1; COMMIT;", []string{"BEGIN", "SELECT 1", "COMMIT"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Split(c.script, c.syntax)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("Split(%q)\n got %q\nwant %q", c.script, got, c.want)
			}
		})
	}
}

func TestSplitUnterminated(t *testing.T) {
	for _, c := range []struct {
		syntax Syntax
		script string
		want   string
	}{
		{SQLiteSyntax, "SELECT 1;\nSELECT 'abc", "unterminated string starting on line 2"},
		{SQLiteSyntax, `SELECT "abc`, "unterminated quoted identifier"},
		{SQLiteSyntax, "SELECT 1 /* no end", "unterminated /* comment"},
		{PostgresSyntax, "SELECT $x$ abc $y$", "unterminated dollar quote $x$"},
		{SQLiteSyntax, "CREATE TRIGGER t AFTER INSERT ON a BEGIN SELECT 1;", "unterminated BEGIN"},
	} {
		_, err := Split(c.script, c.syntax)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Split(%q) = %v, want an error containing %q", c.script, err, c.want)
		}
	}
}

// TestSplitMigrations: every embedded migration splits, into statements none of which is empty.
func TestSplitMigrations(t *testing.T) {
	for _, e := range []Engine{SQLite, Postgres} {
		ms := must[[]Migration](t)(Migrations(e))
		if len(ms) == 0 || ms[len(ms)-1].Version != SchemaVersion() {
			t.Fatalf("%v: migrations %+v, schema version %d", e, ms, SchemaVersion())
		}
		for _, m := range ms {
			stmts, err := Split(m.SQL, e.syntax())
			if err != nil || len(stmts) == 0 {
				t.Fatalf("%v %s: %d statements, %v", e, m.Name, len(stmts), err)
			}
		}
	}
}
