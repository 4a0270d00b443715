package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable/internal/pgxconn"
)

// BouncerDSNEnv names the environment variable holding the DSN of a PgBouncer in transaction
// pooling mode in front of the server of DSNEnv, any database name passed through to the
// server's database of that name (scripts/with-postgres.sh starts one; scripts/dev-pgbouncer.sh
// starts one in front of a server of your own).
const BouncerDSNEnv = "SWITCHBOARD_TEST_PGBOUNCER_DSN"

// BouncerDSN returns the DSN in BouncerDSNEnv, or "" when it is unset, so a test may skip; under
// CI=true an unset DSN fails the test instead, so the PgBouncer tests never skip in CI.
//
// In transaction pooling mode consecutive transactions of one client connection may run on
// different server connections: pgx must not rely on prepared statements kept across them (its
// default, cache_statement): add default_query_exec_mode=exec (or simple_protocol) to the DSN.
// PgBouncer 1.18 also rejects search_path as a startup parameter (Schema cannot isolate a test
// behind it; BouncerDatabase does) and does not deliver LISTEN's notifications.
func BouncerDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(BouncerDSNEnv)
	if dsn == "" && os.Getenv("CI") == "true" {
		t.Fatalf("%s is not set under CI=true: the PgBouncer tests must run (use scripts/with-postgres.sh)", BouncerDSNEnv)
	}
	return dsn
}

// databaseName is what BouncerDatabase accepts as a prefix: an unquoted identifier.
var databaseName = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// BouncerDatabase creates a database of its own on the server of directDSN (connecting to it
// directly, not through PgBouncer) and returns bouncerDSN, a PgBouncer in front of that same
// server, with that database as its database name: a test isolates itself behind PgBouncer by
// database, since PgBouncer 1.18 cannot pass a search_path. prefix (lower case letters, digits,
// underscores) starts the database's name, so that a leftover says which suite made it.
//
// The database is dropped when the test ends, WITH (FORCE): PgBouncer keeps the server
// connections it pooled to it, which the drop terminates (PgBouncer notices and closes them;
// the empty pool itself is freed after PgBouncer's autodb_idle_timeout). Close the test's own
// pools on the returned DSN before that, with t.Cleanup registered after this call.
func BouncerDatabase(t testing.TB, directDSN, bouncerDSN, prefix string) string {
	t.Helper()
	if !databaseName.MatchString(prefix) {
		t.Fatalf("pgtest.BouncerDatabase: prefix %q is not a lower case identifier", prefix)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := prefix + hex.EncodeToString(b[:])
	if len(name) > 63 {
		t.Fatalf("pgtest.BouncerDatabase: prefix %q is too long for a database name", prefix)
	}
	target, err := WithDatabase(bouncerDSN, name)
	if err != nil {
		t.Fatalf("pgtest.BouncerDatabase: PgBouncer DSN: %v", err)
	}
	admin, err := pgxconn.Open(directDSN)
	if err != nil {
		t.Fatalf("pgtest.BouncerDatabase: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// template0: nobody is ever connected to it, unlike template1, which a concurrent
	// CREATE DATABASE would then fail to copy.
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name+" TEMPLATE template0"); err != nil {
		_ = admin.Close()
		t.Fatalf("pgtest.BouncerDatabase: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest.BouncerDatabase: drop database %s: %v", name, err)
		}
		_ = admin.Close()
	})
	// The database must be the one just created, on the same server: its system identifier
	// tells clusters apart.
	direct, via, err := systemIDs(ctx, admin, target, name)
	if err != nil {
		t.Fatalf("pgtest.BouncerDatabase: database %s through PgBouncer: %v", name, err)
	}
	if direct != via {
		t.Fatalf("pgtest.BouncerDatabase: the PgBouncer of %s is in front of another server than %s (system identifier %d, not %d)",
			redact(bouncerDSN), redact(directDSN), via, direct)
	}
	return target
}

// systemIDs returns the system identifier of admin's server and that of the server target
// reaches (checking that target's database is name), over one connection closed before it
// returns.
func systemIDs(ctx context.Context, admin *sql.DB, target, name string) (direct, via int64, err error) {
	const q = "SELECT system_identifier FROM pg_control_system()"
	if err := admin.QueryRowContext(ctx, q).Scan(&direct); err != nil {
		return 0, 0, fmt.Errorf("directly: %w", err)
	}
	// The simple protocol: no prepared statement, whatever the server connection.
	dsn, err := WithParam(target, "default_query_exec_mode", "simple_protocol")
	if err != nil {
		return 0, 0, err
	}
	db, err := pgxconn.Open(dsn)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = db.Close() }()
	var current string
	if err := db.QueryRowContext(ctx, "SELECT system_identifier, current_database() FROM pg_control_system()").Scan(&via, &current); err != nil {
		return 0, 0, err
	}
	if current != name {
		return 0, 0, fmt.Errorf("connected to database %q", current)
	}
	return direct, via, nil
}

// BouncerAdminDSN returns the DSN of the admin console of the PgBouncer of bouncerDSN (its
// database pgbouncer, where SHOW POOLS, SHOW SERVERS and the like answer), in pgx's simple
// protocol mode, the only one the console speaks. Only a user in PgBouncer's admin_users (the
// PgBouncers of this package and of the scripts admit postgres) may use it.
func BouncerAdminDSN(bouncerDSN string) (string, error) {
	dsn, err := WithDatabase(bouncerDSN, "pgbouncer")
	if err != nil {
		return "", err
	}
	return WithParam(dsn, "default_query_exec_mode", "simple_protocol")
}

// WithDatabase returns dsn (a URL or key=value DSN) with database as its database name.
func WithDatabase(dsn, database string) (string, error) {
	if strings.Contains(dsn, "://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", err
		}
		u.Path = "/" + database
		u.RawPath = ""
		return u.String(), nil
	}
	return dsn + " dbname=" + database, nil
}

// WithParam returns dsn (a URL or key=value DSN) with the parameter key set to value (a value
// without spaces or quotes in the key=value form).
func WithParam(dsn, key, value string) (string, error) {
	if strings.Contains(dsn, "://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", err
		}
		v := u.Query()
		v.Set(key, value)
		u.RawQuery = v.Encode()
		return u.String(), nil
	}
	return dsn + " " + key + "=" + value, nil
}

// redact returns dsn without its password, for a message.
func redact(dsn string) string {
	if strings.Contains(dsn, "://") {
		if u, err := url.Parse(dsn); err == nil {
			return u.Redacted()
		}
		return "(a DSN that is not a URL)"
	}
	var out []string
	for _, f := range strings.Fields(dsn) {
		if strings.HasPrefix(f, "password=") {
			f = "password=xxxxx"
		}
		out = append(out, f)
	}
	return strings.Join(out, " ")
}
