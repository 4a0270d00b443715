package durabletest_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/durabletest"
	"github.com/switchboard-go/switchboard/durable/internal/pgtest"
	"github.com/switchboard-go/switchboard/durable/postgres"
)

// PostgresSchema gives the test a schema of its own, selected by the DSN it returns, and drops
// it when the test ends.
func TestPostgresSchema(t *testing.T) {
	dsn := pgtest.DSN(t)
	if dsn == "" {
		t.Skipf("%s not set", durabletest.PostgresDSNEnv)
	}
	var schema string
	t.Run("inside", func(t *testing.T) {
		target := durabletest.PostgresSchema(t, dsn)
		q, err := durable.Open(context.Background(), postgres.Open(target, postgres.Config{}), durable.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer q.Close()
		db, err := sql.Open("pgx", target)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var n int
		if err := db.QueryRow("SELECT current_schema(), (SELECT COUNT(*) FROM switchboard_items)").Scan(&schema, &n); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(schema, "durabletest_") || n != 0 {
			t.Fatalf("schema %q with %d items; want a fresh durabletest_ schema", schema, n)
		}
	})
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var left int
	if err := db.QueryRow("SELECT COUNT(*) FROM pg_namespace WHERE nspname = $1", schema).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if schema == "" || left != 0 {
		t.Fatalf("schema %q still exists after its test (%d)", schema, left)
	}
}
