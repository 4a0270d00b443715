package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/durable"
)

func TestMigrateSQLite(t *testing.T)   { testMigrate(t, false) }
func TestMigratePostgres(t *testing.T) { testMigrate(t, true) }

// migrate up brings an empty database to the schema a queue accepts with SkipMigrations; status
// lists each migration, missing before and applied after; down refuses, changing nothing.
func testMigrate(t *testing.T, postgres bool) {
	dsn := dsnOf(t, postgres)
	env := map[string]string{"SWITCHBOARD_DB": dsn}
	type status struct {
		Version       int   `json:"version"`
		SchemaVersion int   `json:"schema_version"`
		Missing       []int `json:"missing"`
		Migrations    []struct {
			Version int    `json:"version"`
			Name    string `json:"name"`
			Applied bool   `json:"applied"`
		} `json:"migrations"`
	}
	statusOf := func() status {
		t.Helper()
		r := runCLI(t, env, "migrate", "status", "--json")
		if r.code != 0 {
			t.Fatalf("migrate status: exit %d: %s", r.code, r.stderr)
		}
		var st status
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			t.Fatalf("migrate status --json printed %q: %v", r.stdout, err)
		}
		return st
	}
	if !postgres {
		// status changes nothing: it does not create the file.
		r := runCLI(t, env, "migrate", "status")
		if r.code != exitFailed || !strings.Contains(r.stderr, "no SQLite database at ") {
			t.Fatalf("status of a missing file: exit %d, stderr %q", r.code, r.stderr)
		}
	} else {
		st := statusOf()
		if st.Version != 0 || len(st.Missing) != len(st.Migrations) || st.SchemaVersion < 25 {
			t.Fatalf("status of an empty schema: %+v", st)
		}
	}

	r := runCLI(t, env, "migrate", "up", "--json")
	if r.code != 0 {
		t.Fatalf("migrate up: exit %d: %s", r.code, r.stderr)
	}
	var up struct {
		Applied []struct {
			Version int    `json:"version"`
			Name    string `json:"name"`
		} `json:"applied"`
		Version int `json:"version"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &up); err != nil {
		t.Fatalf("migrate up --json printed %q: %v", r.stdout, err)
	}
	if len(up.Applied) < 25 || up.Applied[0].Name != "0001_init.sql" || up.Version != up.Applied[len(up.Applied)-1].Version {
		t.Fatalf("migrate up applied %+v, version %d", up.Applied, up.Version)
	}

	st := statusOf()
	if st.Version != st.SchemaVersion || len(st.Missing) != 0 || len(st.Migrations) != len(up.Applied) {
		t.Fatalf("status after up: %+v", st)
	}
	for i, m := range st.Migrations {
		if !m.Applied || m.Version != up.Applied[i].Version || !strings.HasSuffix(m.Name, ".sql") {
			t.Fatalf("migration %d after up: %+v", i+1, m)
		}
	}
	r = runCLI(t, env, "migrate", "status")
	if r.code != 0 || !strings.Contains(r.stdout, "0001_init.sql") || !strings.Contains(r.stdout, "the schema is up to date") {
		t.Fatalf("migrate status: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A second up applies nothing.
	r = runCLI(t, env, "migrate", "up")
	if r.code != 0 || !strings.Contains(r.stdout, "the schema is up to date") || strings.Contains(r.stdout, "applied 0") {
		t.Fatalf("second migrate up: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	r = runCLI(t, env, "migrate", "down")
	if r.code != exitFailed || !strings.Contains(r.stderr, "has no down migrations") || !strings.Contains(r.stderr, "nothing was changed") {
		t.Fatalf("migrate down: exit %d, stderr %q", r.code, r.stderr)
	}
	if st := statusOf(); len(st.Missing) != 0 {
		t.Fatalf("migrate down changed the schema: %+v", st)
	}

	// The queue accepts the schema without migrating it.
	q, err := durable.Open(context.Background(), driverOf(dsn), durable.Config{SkipMigrations: true, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("a queue with SkipMigrations on the migrated database: %v", err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
}
