package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// connect opens a pgx connection on dsn, closed when the test ends.
func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", redact(dsn), err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// withParam is WithParam, failing the test on a malformed dsn.
func withParam(t *testing.T, dsn, key, value string) string {
	t.Helper()
	out, err := WithParam(dsn, key, value)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// execMode is dsn in pgx's exec mode: the unnamed statement, parsed, bound and executed in one
// round trip, so that nothing outlives the transaction that PgBouncer gives its server
// connection to.
func execMode(t *testing.T, dsn string) string {
	t.Helper()
	return withParam(t, dsn, "default_query_exec_mode", "exec")
}

// eventually polls cond until it holds, failing the test after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// adminRows runs a SHOW command on PgBouncer's admin console and returns its rows, each a map
// from column name to value.
func adminRows(t *testing.T, admin *pgx.Conn, show string) []map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := admin.Query(ctx, show)
	if err != nil {
		t.Fatalf("%s: %v", show, err)
	}
	defer rows.Close()
	var out []map[string]any
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatalf("%s: %v", show, err)
		}
		row := map[string]any{}
		for i, f := range rows.FieldDescriptions() {
			row[f.Name] = vals[i]
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", show, err)
	}
	return out
}

// pool returns the SHOW POOLS row of database db, or nil.
func pool(t *testing.T, admin *pgx.Conn, db string) map[string]any {
	t.Helper()
	for _, r := range adminRows(t, admin, "SHOW POOLS") {
		if r["database"] == db {
			return r
		}
	}
	return nil
}

// count reads an integer column of an admin console row (its type varies by column).
func count(row map[string]any, col string) int64 {
	switch v := row[col].(type) {
	case int64:
		return v
	case int32:
		return int64(v)
	case string:
		var n int64
		_, _ = fmt.Sscan(v, &n)
		return n
	}
	return -1
}

// clientBackends counts the server's client backends other than the one asking.
func clientBackends(t *testing.T, c *pgx.Conn) int {
	t.Helper()
	var n int
	if err := c.QueryRow(context.Background(),
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestServerWithBouncer: a throwaway server with max_connections 20 and a PgBouncer in front.
func TestServerWithBouncer(t *testing.T) {
	t.Parallel()
	s := StartServer(t, ServerConfig{MaxConnections: 20, PgBouncer: true})
	ctx := context.Background()

	t.Run("max_connections", func(t *testing.T) {
		// postgres is a superuser: the three superuser_reserved_connections are its too, so
		// it opens exactly max_connections, and the next is refused with 53300.
		var conns []*pgx.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close(ctx)
			}
		}()
		var refused error
		for range 25 {
			c, err := pgx.Connect(ctx, s.DSN)
			if err != nil {
				refused = err
				break
			}
			conns = append(conns, c)
		}
		pgErr, ok := errors.AsType[*pgconn.PgError](refused)
		if !ok || pgErr.Code != "53300" {
			t.Fatalf("connection %d: %v, want SQLSTATE 53300 (too many connections)", len(conns)+1, refused)
		}
		if len(conns) != 20 {
			t.Fatalf("%d connections opened before the server refused one, want max_connections (20)", len(conns))
		}
		var setting string
		if err := conns[0].QueryRow(ctx, "SHOW max_connections").Scan(&setting); err != nil || setting != "20" {
			t.Fatalf("max_connections = %q (%v), want 20", setting, err)
		}
	})

	t.Run("exec mode", func(t *testing.T) {
		c := connect(t, execMode(t, s.BouncerDSN))
		var sum int
		for i := range 20 { // autocommit: each statement may run on another server connection
			if err := c.QueryRow(ctx, "SELECT $1::int + $2::int", i, 1).Scan(&sum); err != nil || sum != i+1 {
				t.Fatalf("SELECT %d + 1 = %d (%v)", i, sum, err)
			}
		}
		if _, err := c.Exec(ctx, "CREATE TABLE IF NOT EXISTS items (id int PRIMARY KEY, body text)"); err != nil {
			t.Fatal(err)
		}
		tx, err := c.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if _, err := tx.Exec(ctx, "INSERT INTO items VALUES ($1, $2)", i, fmt.Sprint("item ", i)); err != nil {
				t.Fatal(err)
			}
		}
		var n int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM items WHERE id >= $1", 0).Scan(&n); err != nil || n != 3 {
			t.Fatalf("count in the transaction = %d (%v), want 3", n, err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRow(ctx, "SELECT count(*) FROM items WHERE id >= $1", 0).Scan(&n); err != nil || n != 0 {
			t.Fatalf("count after the rollback = %d (%v), want 0", n, err)
		}
		err = pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO items VALUES ($1, $2)", 7, "seven")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		var body string
		if err := c.QueryRow(ctx, "SELECT body FROM items WHERE id = $1", 7).Scan(&body); err != nil || body != "seven" {
			t.Fatalf("after the commit: %q (%v)", body, err)
		}
	})

	t.Run("startup parameters", func(t *testing.T) {
		// search_path is refused (FATAL, 08P01), which is why BouncerDatabase isolates a test
		// by database; application_name is one PgBouncer tracks, set on whichever server
		// connection runs the client's transaction.
		_, err := pgx.Connect(ctx, withParam(t, execMode(t, s.BouncerDSN), "search_path", "elsewhere"))
		if pgErr, ok := errors.AsType[*pgconn.PgError](err); !ok || pgErr.Code != "08P01" || !strings.Contains(pgErr.Message, "search_path") {
			t.Fatalf("search_path through PgBouncer: %v, want FATAL unsupported startup parameter (08P01)", err)
		}
		c := connect(t, withParam(t, execMode(t, s.BouncerDSN), "application_name", "pgtest-app"))
		var app string
		if err := c.QueryRow(ctx, "SELECT current_setting($1)", "application_name").Scan(&app); err != nil || app != "pgtest-app" {
			t.Fatalf("application_name through PgBouncer = %q (%v)", app, err)
		}
	})

	t.Run("LISTEN", func(t *testing.T) {
		// Observed with PgBouncer 1.18 in transaction mode: LISTEN is accepted, and the server
		// connection that ran it goes on listening once it is back in the pool, but a client
		// that waits for a notification, as a woken scheduler would, gets none: the client is
		// not linked to a server connection while it runs no statement, and PgBouncer does not
		// pass on what an idle server connection receives. (A notification may reach the client
		// with the answer to a later statement, when that statement happens to run on the
		// server connection that holds it, as CI saw under load: that wakes nobody.) A queue
		// behind PgBouncer cannot be woken by NOTIFY.
		listener := connect(t, execMode(t, s.BouncerDSN))
		if _, err := listener.Exec(ctx, "LISTEN pgtest_wake"); err != nil {
			t.Fatalf("LISTEN through PgBouncer: %v", err)
		}
		notifier := connect(t, s.DSN)
		for i := range 5 {
			if _, err := notifier.Exec(ctx, "SELECT pg_notify('pgtest_wake', $1)", fmt.Sprint(i)); err != nil {
				t.Fatal(err)
			}
		}
		wait, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		n, err := listener.WaitForNotification(wait)
		if err == nil {
			t.Fatalf("a client waiting through PgBouncer in transaction mode was woken by a notification: %+v", n)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("waiting for a notification through PgBouncer: %v", err)
		}
	})

	t.Run("pool cap", func(t *testing.T) {
		// PgBouncer opens at most MaxConnections-5 = 15 server connections: 15 open
		// transactions hold them all, a 16th waits for one, and a direct connection is still
		// possible.
		admin := connect(t, mustAdminDSN(t, s.BouncerDSN))
		direct := connect(t, s.DSN)
		var txs []pgx.Tx
		for i := range 15 {
			c := connect(t, execMode(t, s.BouncerDSN))
			tx, err := c.Begin(ctx)
			if err != nil {
				t.Fatalf("transaction %d: %v", i, err)
			}
			if _, err := tx.Exec(ctx, "SELECT $1::int", i); err != nil {
				t.Fatalf("transaction %d: %v", i, err)
			}
			txs = append(txs, tx)
		}
		last := connect(t, execMode(t, s.BouncerDSN))
		began := make(chan error, 1)
		go func() {
			tx, err := last.Begin(ctx)
			if err == nil {
				_, err = tx.Exec(ctx, "SELECT 1")
				err = errors.Join(err, tx.Commit(ctx))
			}
			began <- err
		}()
		eventually(t, 10*time.Second, "a 16th client waiting for a server connection", func() bool {
			p := pool(t, admin, "postgres")
			return p != nil && count(p, "cl_waiting") == 1
		})
		if p := pool(t, admin, "postgres"); count(p, "sv_active") != 15 {
			t.Fatalf("SHOW POOLS: %v, want 15 active server connections", p)
		}
		if n := clientBackends(t, direct); n != 15 {
			t.Fatalf("%d client backends besides the direct connection, want PgBouncer's 15", n)
		}
		select {
		case err := <-began:
			t.Fatalf("the 16th transaction ran with 15 server connections busy: %v", err)
		default:
		}
		if err := txs[0].Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-began; err != nil {
			t.Fatalf("the 16th transaction, once a server connection was free: %v", err)
		}
		for _, tx := range txs[1:] {
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func mustAdminDSN(t *testing.T, bouncerDSN string) string {
	t.Helper()
	dsn, err := BouncerAdminDSN(bouncerDSN)
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

// TestServerStopStartFreeze: Stop cuts every connection and refuses new ones (PgBouncer keeps
// its client waiting until query_wait_timeout), Start recovers the data on the same port
// (PgBouncer reconnects), Freeze leaves a query unanswered, Thaw answers it again.
func TestServerStopStartFreeze(t *testing.T) {
	t.Parallel()
	s := StartServer(t, ServerConfig{PgBouncer: true, QueryWaitTimeout: 500 * time.Millisecond})
	ctx := context.Background()
	direct := connect(t, s.DSN)
	if _, err := direct.Exec(ctx, "CREATE TABLE kept (id int); INSERT INTO kept VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	viaBouncer := connect(t, execMode(t, s.BouncerDSN))
	var n int
	if err := viaBouncer.QueryRow(ctx, "SELECT count(*) FROM kept WHERE id = $1", 1).Scan(&n); err != nil || n != 1 {
		t.Fatalf("through PgBouncer: %d (%v)", n, err)
	}

	s.Stop()
	if err := direct.Ping(ctx); err == nil {
		t.Fatal("a connection opened before Stop still answers")
	}
	if c, err := pgx.Connect(ctx, s.DSN); err == nil {
		_ = c.Close(ctx)
		t.Fatal("connected to a stopped server")
	}
	// PgBouncer keeps the client waiting for a server connection, then ends its connection.
	err := viaBouncer.QueryRow(ctx, "SELECT 1").Scan(&n)
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); !ok || pgErr.Code != "08P01" || pgErr.Message != "query_wait_timeout" {
		t.Fatalf("a query through PgBouncer with the server stopped: %v, want FATAL query_wait_timeout (08P01)", err)
	}

	s.Start()
	direct = connect(t, s.DSN)
	if err := direct.QueryRow(ctx, "SELECT count(*) FROM kept").Scan(&n); err != nil || n != 1 {
		t.Fatalf("after Stop and Start: %d rows (%v), want the 1 committed before", n, err)
	}
	// PgBouncer waits server_login_retry (1 s) after a failed login before it tries again.
	eventually(t, 30*time.Second, "a query through PgBouncer after Start", func() bool {
		c, err := pgx.Connect(ctx, execMode(t, s.BouncerDSN))
		if err != nil {
			return false
		}
		defer func() { _ = c.Close(ctx) }()
		return c.QueryRow(ctx, "SELECT count(*) FROM kept WHERE id = $1", 1).Scan(&n) == nil && n == 1
	})

	s.Freeze()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = direct.QueryRow(short, "SELECT 1").Scan(&n)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a query on a frozen server: %v, want context.DeadlineExceeded", err)
	}
	s.Thaw()
	again := connect(t, s.DSN)
	if err := again.QueryRow(ctx, "SELECT count(*) FROM kept").Scan(&n); err != nil || n != 1 {
		t.Fatalf("after Thaw: %d rows (%v)", n, err)
	}
}

// TestBouncerDatabase: behind the PgBouncer of BouncerDSNEnv, a test isolates itself in a
// database of its own, dropped at its end; the server connections PgBouncer pooled to it go
// with it.
func TestBouncerDatabase(t *testing.T) {
	direct, bouncer := DSN(t), BouncerDSN(t)
	if direct == "" || bouncer == "" {
		t.Skipf("%s and %s must both be set", DSNEnv, BouncerDSNEnv)
	}
	ctx := context.Background()
	var name string
	t.Run("isolated", func(t *testing.T) {
		target := BouncerDatabase(t, direct, bouncer, "pgtest_")
		u, err := url.Parse(target)
		if err != nil {
			t.Fatal(err)
		}
		name = strings.TrimPrefix(u.Path, "/")
		if !strings.HasPrefix(name, "pgtest_") {
			t.Fatalf("database %q of %s", name, target)
		}
		db := Open(t, execMode(t, target))
		db.SetMaxOpenConns(4)
		if _, err := db.ExecContext(ctx, "CREATE TABLE items (id int PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if _, err := tx.ExecContext(ctx, "INSERT INTO items VALUES ($1)", i); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		var n int
		var current string
		if err := db.QueryRowContext(ctx, "SELECT count(*), current_database() FROM items WHERE id < $1", 10).Scan(&n, &current); err != nil ||
			n != 5 || current != name {
			t.Fatalf("%d rows in %q (%v), want 5 in %q", n, current, err, name)
		}
	})
	if name == "" {
		t.FailNow()
	}
	check := connect(t, direct)
	var n int
	if err := check.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil || n != 0 {
		t.Fatalf("database %s after its test: %d (%v), want dropped", name, n, err)
	}
	admin := connect(t, mustAdminDSN(t, bouncer))
	eventually(t, 10*time.Second, "PgBouncer closing its server connections to "+name, func() bool {
		for _, r := range adminRows(t, admin, "SHOW SERVERS") {
			if r["database"] == name {
				return false
			}
		}
		return true
	})
	t.Logf("PgBouncer's pool of the dropped database (kept until autodb_idle_timeout): %v", pool(t, admin, name))
	// PgBouncer goes on serving the other databases.
	c := connect(t, execMode(t, bouncer))
	if err := c.QueryRow(ctx, "SELECT $1::int", 1).Scan(&n); err != nil || n != 1 {
		t.Fatalf("through PgBouncer after the drop: %d (%v)", n, err)
	}
}

// TestDSNEdits: the DSN helpers in both forms pgx accepts.
func TestDSNEdits(t *testing.T) {
	for _, tc := range []struct {
		name, got, want string
	}{
		{"URL database", must(WithDatabase("postgres://u:secret@h:5/postgres?sslmode=disable", "db1")), "postgres://u:secret@h:5/db1?sslmode=disable"},
		{"URL param", must(WithParam("postgres://u@h:5/postgres?sslmode=disable", "search_path", "s1")), "postgres://u@h:5/postgres?search_path=s1&sslmode=disable"},
		{"kv database", must(WithDatabase("host=h port=5 dbname=postgres", "db1")), "host=h port=5 dbname=postgres dbname=db1"},
		{"kv param", must(WithParam("host=h", "default_query_exec_mode", "exec")), "host=h default_query_exec_mode=exec"},
		{"admin", must(BouncerAdminDSN("postgres://postgres@127.0.0.1:6/postgres?sslmode=disable")), "postgres://postgres@127.0.0.1:6/pgbouncer?default_query_exec_mode=simple_protocol&sslmode=disable"},
		{"redact URL", redact("postgres://u:secret@h:5/db"), "postgres://u:xxxxx@h:5/db"},
		{"redact kv", redact("host=h password=secret"), "host=h password=xxxxx"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, tc.got, tc.want)
		}
	}
	// pgx reads the last dbname of a key=value DSN.
	cfg, err := pgx.ParseConfig(must(WithDatabase("host=h port=5 dbname=postgres", "db1")))
	if err != nil || cfg.Database != "db1" {
		t.Fatalf("pgx reads database %q (%v) from the edited key=value DSN, want db1", cfg.Database, err)
	}
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}

// TestReplicatedKillPromote: a row committed on the primary is on the standby (synchronous),
// which refuses writes; after Kill no connection on the pair's DSN is made (the primary is
// gone, the standby read-only) and one opened before is cut; after Promote the DSN reaches the
// standby, which has the row and accepts writes.
func TestReplicatedKillPromote(t *testing.T) {
	t.Parallel()
	r := StartReplicated(t)
	ctx := context.Background()
	before := connect(t, r.DSN)
	if _, err := before.Exec(ctx, "CREATE TABLE kept (id int); INSERT INTO kept VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	standby := connect(t, r.Standby.DSN)
	var n int
	if err := standby.QueryRow(ctx, "SELECT count(*) FROM kept").Scan(&n); err != nil || n != 1 {
		t.Fatalf("on the synchronous standby right after the commit: %d rows (%v), want 1", n, err)
	}
	if _, err := standby.Exec(ctx, "INSERT INTO kept VALUES (2)"); err == nil {
		t.Fatal("the standby accepted a write")
	}
	withName := withParam(t, r.DSN, "application_name", "edited") // a multi-host URL survives an edit
	if !strings.Contains(withName, fmt.Sprintf(",127.0.0.1:%d/", r.Standby.port)) {
		t.Fatalf("WithParam on the multi-host DSN: %s", withName)
	}

	r.Primary.Kill()
	if err := before.Ping(ctx); err == nil {
		t.Fatal("a connection to the killed primary still answers")
	}
	if c, err := pgx.Connect(ctx, r.DSN); err == nil {
		_ = c.Close(ctx)
		t.Fatal("connected for writes with the primary dead and the standby not promoted")
	}

	r.Standby.Promote()
	after := connect(t, withName)
	if _, err := after.Exec(ctx, "INSERT INTO kept VALUES (2)"); err != nil {
		t.Fatalf("a write on the DSN after Promote: %v", err)
	}
	if err := after.QueryRow(ctx, "SELECT count(*) FROM kept").Scan(&n); err != nil || n != 2 {
		t.Fatalf("on the promoted standby: %d rows (%v), want 2", n, err)
	}
	var port int
	if err := after.QueryRow(ctx, "SELECT current_setting('port')::int").Scan(&port); err != nil || port != r.Standby.port {
		t.Fatalf("the DSN reached port %d (%v), want the standby's %d", port, err, r.Standby.port)
	}
}
