package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/internal/pgtest"
	"github.com/switchboard-go/switchboard/durable/postgres"
)

// A DSN that reaches a server taking no writes (a standby first in a multi-host DSN without
// target_session_attrs=read-write, a primary fenced read-only) fails Open with an error that
// says so and names the setting, not with what reads as a broken migration; on a schema
// already migrated as well as on a new one.
func TestOpenOnAReadOnlyServerSaysSo(t *testing.T) {
	dsn := pgtest.DSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgtest.DSNEnv)
	}
	ctx := context.Background()
	migrated := pgtest.Schema(t, dsn, "readonly_")
	q, err := durable.Open(ctx, postgres.Open(migrated, postgres.Config{}), durable.Config{})
	if err != nil {
		t.Fatal(err)
	}
	q.Close()
	for name, base := range map[string]string{"migrated": migrated, "new": pgtest.Schema(t, dsn, "readonly_new_")} {
		readOnly, err := pgtest.WithParam(base, "default_transaction_read_only", "on")
		if err != nil {
			t.Fatal(err)
		}
		q, err := durable.Open(ctx, postgres.Open(readOnly, postgres.Config{}), durable.Config{})
		if err == nil {
			q.Close()
			t.Fatalf("%s schema: Open on a read-only server: no error", name)
		}
		for _, want := range []string{"read-only", "target_session_attrs=read-write"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s schema: Open on a read-only server: %q lacks %q", name, err, want)
			}
		}
	}
}
