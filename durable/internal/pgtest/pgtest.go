package pgtest

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"testing"

	"github.com/switchboard-go/switchboard/durable/internal/pgxconn"
)

// DSNEnv names the environment variable holding the DSN of the PostgreSQL server the tests use.
const DSNEnv = "SWITCHBOARD_TEST_PG_DSN"

// DSN returns the DSN in DSNEnv, or "" when it is unset, so a suite may skip; under CI=true an
// unset DSN fails the test instead, so the PostgreSQL suites never skip in CI.
func DSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(DSNEnv)
	if dsn == "" && os.Getenv("CI") == "true" {
		t.Fatalf("%s is not set under CI=true: the PostgreSQL suite must run (use scripts/with-postgres.sh)", DSNEnv)
	}
	return dsn
}

// Schema creates a schema of its own on the server of dsn, dropped (with everything in it) when
// the test ends, and returns dsn with that schema as its search_path. prefix starts the
// schema's name, so that a leftover says which suite made it.
func Schema(t testing.TB, dsn, prefix string) string {
	t.Helper()
	target, err := WithSearchPath(dsn, NewSchema(t, dsn, prefix))
	if err != nil {
		t.Fatalf("PostgreSQL schema: %v", err)
	}
	return target
}

// NewSchema creates a schema of its own on the server of dsn, dropped when the test ends, and
// returns its name (for a test that reaches the server by more than one DSN).
func NewSchema(t testing.TB, dsn, prefix string) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := prefix + hex.EncodeToString(b[:])
	admin, err := pgxconn.Open(dsn)
	if err != nil {
		t.Fatalf("PostgreSQL schema: %v", err)
	}
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		_ = admin.Close()
		t.Fatalf("PostgreSQL schema: create schema: %v", err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			t.Errorf("PostgreSQL schema: drop schema %s: %v", schema, err)
		}
		_ = admin.Close()
	})
	return schema
}

// WithSearchPath returns dsn (a URL or key=value DSN) with schema as its search_path.
func WithSearchPath(dsn, schema string) (string, error) {
	return WithParam(dsn, "search_path", schema)
}

// Open opens a pool on dsn, closed when the test ends.
func Open(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := pgxconn.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}
