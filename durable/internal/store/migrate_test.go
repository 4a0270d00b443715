package store

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestApplyPostgresFunctionBody applies a migration set (made for this test; the schema has
// no function) whose migration creates a plpgsql function, with semicolons inside its $$ body,
// and a trigger using it.
func TestApplyPostgresFunctionBody(t *testing.T) {
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	db := postgresBackend(t, dsn).pool(t)
	ctx := context.Background()
	ms := []Migration{
		{Version: 1, Name: "0001_counter.sql", SQL: "CREATE TABLE counter (n INTEGER NOT NULL); INSERT INTO counter VALUES (0);"},
		{Version: 2, Name: "0002_bump.sql", SQL: `
-- A function whose body holds statements: the semicolons inside $$ do not end the migration's
-- statement.
CREATE FUNCTION bump() RETURNS trigger AS $$
BEGIN
    UPDATE counter SET n = n + 1; -- one; two
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TABLE things (id INTEGER);
CREATE TRIGGER things_bump AFTER INSERT ON things FOR EACH ROW EXECUTE FUNCTION bump();
`},
	}
	if err := Apply(ctx, db, Postgres, ms, nil); err != nil {
		t.Fatal(err)
	}
	if err := Apply(ctx, db, Postgres, ms, nil); err != nil { // applied once
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO things VALUES (1), (2)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow("SELECT n FROM counter").Scan(&n); err != nil || n != 2 {
		t.Fatalf("counter %d, %v", n, err)
	}
	if v := must[int](t)(Version(ctx, db, Postgres)); v != 2 {
		t.Fatalf("version %d", v)
	}
}

// TestApplySQLiteTrigger is the same for a SQLite trigger, whose BEGIN … END body holds
// statements.
func TestApplySQLiteTrigger(t *testing.T) {
	db := sqliteBackend(t).pool(t)
	ctx := context.Background()
	ms := []Migration{{Version: 1, Name: "0001_trigger.sql", SQL: `
CREATE TABLE counter (n INTEGER NOT NULL);
INSERT INTO counter VALUES (0);
CREATE TABLE things (id INTEGER);
CREATE TRIGGER things_bump AFTER INSERT ON things BEGIN
    UPDATE counter SET n = n + 1;
    UPDATE counter SET n = n + CASE WHEN NEW.id > 10 THEN 100 ELSE 0 END;
END;
`}}
	if err := Apply(ctx, db, SQLite, ms, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO things VALUES (1), (20)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow("SELECT n FROM counter").Scan(&n); err != nil || n != 102 {
		t.Fatalf("counter %d, %v", n, err)
	}
}

// TestApplyErrorNamesMigrationAndStatement: a failing statement is reported with its migration
// and its text, and its migration is not recorded.
func TestApplyErrorNamesMigrationAndStatement(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		db := b.pool(t)
		ms := []Migration{
			{Version: 1, Name: "0001_ok.sql", SQL: "CREATE TABLE ok (x INTEGER);"},
			{Version: 2, Name: "0002_broken.sql", SQL: "CREATE TABLE fine (x INTEGER);\nSELEKT nonsense;"},
		}
		err := Apply(context.Background(), db, b.engine, ms, nil)
		if err == nil {
			t.Fatal("no error")
		}
		for _, want := range []string{"migration 2 (0002_broken.sql)", "statement 2 (SELEKT nonsense)"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not contain %q", err, want)
			}
		}
		if v := must[int](t)(Version(context.Background(), db, b.engine)); v != 1 {
			t.Fatalf("version %d after the failure, want 1", v)
		}
	})
}

// TestScriptMatchesMigrate: the script of every migration, applied by the database's own
// command-line client (psql, sqlite3; by this package's Split when the client is missing),
// leaves the schema and version table Migrate leaves, and Migrate then has nothing to do.
func TestScriptMatchesMigrate(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		script := must[string](t)(Script(b.engine, must[[]Migration](t)(Migrations(b.engine))))
		for _, m := range must[[]Migration](t)(Migrations(b.engine)) {
			if !strings.Contains(script, "-- Migration "+strconv.Itoa(m.Version)+": "+m.Name+"\n") {
				t.Fatalf("script lacks the header of %s:\n%s", m.Name, script)
			}
		}
		db := b.pool(t)
		applied := false
		switch b.engine {
		case SQLite:
			if bin, err := exec.LookPath("sqlite3"); err == nil {
				var path string
				if err := db.QueryRow("SELECT file FROM pragma_database_list WHERE name = 'main'").Scan(&path); err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command(bin, "-bail", filepath.Clean(path))
				cmd.Stdin = strings.NewReader(script)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("sqlite3: %v\n%s", err, out)
				}
				applied = true
			}
		case Postgres:
			if bin, err := exec.LookPath("psql"); err == nil {
				var schema string
				if err := db.QueryRow("SELECT current_schema()").Scan(&schema); err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command(bin, "-v", "ON_ERROR_STOP=1", "-q", "-X", pgDSN(t))
				cmd.Stdin = strings.NewReader("SET search_path TO " + schema + ";\n" + script)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("psql: %v\n%s", err, out)
				}
				applied = true
			}
		}
		if !applied {
			t.Logf("no %v client: applying the script statement by statement", b.engine)
			stmts := must[[]string](t)(Split(script, b.engine.syntax()))
			for _, s := range stmts {
				if _, err := db.Exec(s); err != nil {
					t.Fatalf("%s: %v", s, err)
				}
			}
		}
		if v := must[int](t)(Version(ctx, db, b.engine)); v != SchemaVersion() {
			t.Fatalf("version %d after the script, want %d", v, SchemaVersion())
		}
		var rows int
		if err := db.QueryRow("SELECT COUNT(*) FROM switchboard_schema_migrations WHERE applied_at > 1600000000000000").Scan(&rows); err != nil || rows != len(must[[]Migration](t)(Migrations(b.engine))) {
			t.Fatalf("%d version rows with a plausible time, %v", rows, err)
		}
		if err := Migrate(ctx, db, b.engine, nil); err != nil {
			t.Fatal(err)
		}
		s := New(db, b.engine, false)
		if _, _, err := s.Enqueue(ctx, NewItem{Name: "test.work", Payload: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	})
}
