package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

//go:embed migrations
var migrationFS embed.FS

// Migrations returns the embedded migrations of e in version order.
func Migrations(e Engine) ([]Migration, error) {
	dir := path.Join("migrations", e.String())
	entries, err := fs.ReadDir(migrationFS, dir)
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, ent := range entries {
		name := ent.Name()
		if !strings.HasSuffix(name, ".sql") {
			continue
		}
		prefix, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(prefix)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %s: name must start with a version number", name)
		}
		body, err := fs.ReadFile(migrationFS, path.Join(dir, name))
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(body)})
	}
	slices.SortFunc(out, func(a, b Migration) int { return a.Version - b.Version })
	return out, nil
}

// SchemaVersion is the version of the newest embedded migration; both engines have the same.
func SchemaVersion() int {
	ms, err := Migrations(SQLite)
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].Version
}

const versionTable = `CREATE TABLE IF NOT EXISTS switchboard_schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at BIGINT NOT NULL
)`

// Migrate applies the embedded migrations of e that db has not applied yet, calling applied
// (when not nil) after each one it committed.
func Migrate(ctx context.Context, db *sql.DB, e Engine, applied func(Migration)) error {
	ms, err := Migrations(e)
	if err != nil {
		return fmt.Errorf("durable: migrations: %w", err)
	}
	return Apply(ctx, db, e, ms, applied)
}

// Apply applies the migrations ms that db has not applied yet, in order, each in its own
// transaction and statement by statement (see Split), recording each in the version table.
// Concurrent callers are serialised (PostgreSQL: a transaction advisory lock in each migration's; SQLite: the immediate
// transaction, tried again while another process holds the file in a way its busy timeout does
// not cover). An error names the migration and the statement that failed. applied, when not
// nil, is called after each migration this call committed (not for those already applied).
func Apply(ctx context.Context, db *sql.DB, e Engine, ms []Migration, applied func(Migration)) error {
	wait := 10 * time.Millisecond
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := apply(ctx, db, e, ms, applied)
		if err == nil || !e.transient(err) || time.Now().After(deadline) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

func apply(ctx context.Context, db *sql.DB, e Engine, ms []Migration, applied func(Migration)) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("durable: migrate: %w", err)
	}
	defer conn.Close()
	for _, m := range ms {
		did, err := applyOne(ctx, conn, e, m)
		if err != nil && e.readOnly(err) {
			return fmt.Errorf("durable: the database server takes no writes (read-only: a standby, or default_transaction_read_only = on): "+
				"connect to the primary (with several hosts in the DSN, add target_session_attrs=read-write): migration %d (%s): %w", m.Version, m.Name, err)
		}
		if err != nil {
			return fmt.Errorf("durable: migration %d (%s): %w", m.Version, m.Name, err)
		}
		if did && applied != nil {
			applied(m)
		}
	}
	return nil
}

func applyOne(ctx context.Context, conn *sql.Conn, e Engine, m Migration) (bool, error) {
	stmts, err := Split(m.SQL, e.syntax())
	if err != nil {
		return false, err
	}
	stmts, online, err := onlineIndexes(ctx, conn, stmts)
	if err != nil {
		return false, err
	}
	if len(online) == 0 {
		return applyInTx(ctx, conn, e, m, stmts, true)
	}
	// The indexes are built concurrently, outside a transaction, then the version is recorded
	// in a transaction of its own (see onlineIndexes).
	applied, err := startOnline(ctx, conn, e, m, stmts)
	if err != nil || applied {
		return false, err
	}
	for _, ix := range online {
		if err := buildOnline(ctx, conn, ix); err != nil {
			return false, err
		}
	}
	return applyInTx(ctx, conn, e, m, []string{e.rebind("DELETE FROM switchboard_schema_migrations WHERE version = ?")}, true, -m.Version)
}

// startOnline runs, under the migration lock, the statements of m that are not concurrent
// index builds, and leaves a marker of them in the version table (the version negated, which
// Version and MissingMigrations do not count), unless m is applied (applied true) or the marker
// is there: another instance ran them, or an earlier run that stopped before its builds ended.
// Another instance then neither runs them again nor takes their locks: an ALTER TABLE's lock,
// queued behind a concurrent build that waits for the ALTER's own transaction, is a deadlock.
func startOnline(ctx context.Context, conn *sql.Conn, e Engine, m Migration, stmts []string) (applied bool, err error) {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback() }()
	if err := e.lockMigration(ctx, tx); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, versionTable); err != nil {
		return false, fmt.Errorf("version table: %w", err)
	}
	var done, started int
	if err := tx.QueryRowContext(ctx, e.rebind("SELECT COUNT(*) FILTER (WHERE version = ?), COUNT(*) FILTER (WHERE version = ?) FROM switchboard_schema_migrations"),
		m.Version, -m.Version).Scan(&done, &started); err != nil {
		return false, err
	}
	if done > 0 {
		return true, nil
	}
	if started == 0 {
		for i, stmt := range stmts {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return false, fmt.Errorf("statement %d (%s): %w", i+1, abbreviate(stmt), err)
			}
		}
		if _, err := tx.ExecContext(ctx, e.rebind("INSERT INTO switchboard_schema_migrations (version, name, applied_at) VALUES (?, ?, ?)"),
			-m.Version, "started: "+m.Name, time.Now().UnixMicro()); err != nil {
			return false, fmt.Errorf("version row: %w", err)
		}
	}
	return false, tx.Commit()
}

// applyInTx runs stmts of m in one transaction under the migration lock, with args, unless
// the version table says m is applied, and records m as applied when record is set; it
// reports whether it ran them.
func applyInTx(ctx context.Context, conn *sql.Conn, e Engine, m Migration, stmts []string, record bool, args ...any) (bool, error) {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback() }()
	if err := e.lockMigration(ctx, tx); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, versionTable); err != nil {
		return false, fmt.Errorf("version table: %w", err)
	}
	var n int
	if err := tx.QueryRowContext(ctx, e.rebind("SELECT COUNT(*) FROM switchboard_schema_migrations WHERE version = ?"), m.Version).Scan(&n); err != nil {
		return false, err
	}
	if n > 0 {
		return false, nil
	}
	for i, stmt := range stmts {
		if _, err := tx.ExecContext(ctx, stmt, args...); err != nil {
			return false, fmt.Errorf("statement %d (%s): %w", i+1, abbreviate(stmt), err)
		}
	}
	if record {
		if _, err := tx.ExecContext(ctx, e.rebind("INSERT INTO switchboard_schema_migrations (version, name, applied_at) VALUES (?, ?, ?)"),
			m.Version, m.Name, time.Now().UnixMicro()); err != nil {
			return false, fmt.Errorf("version row: %w", err)
		}
	}
	return true, tx.Commit()
}

// abbreviate returns the first line of stmt without its comments, cut to 80 bytes.
func abbreviate(stmt string) string {
	var lines []string
	for l := range strings.Lines(stmt) {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "--") {
			lines = append(lines, l)
		}
	}
	s := strings.Join(lines, " ")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

// Version returns the newest migration version db has applied: 0 when none is (no version
// table).
func Version(ctx context.Context, db *sql.DB, e Engine) (int, error) {
	var exists int
	if err := db.QueryRowContext(ctx, e.versionTableExists()).Scan(&exists); err != nil {
		return 0, fmt.Errorf("durable: schema version: %w", err)
	}
	if exists == 0 {
		return 0, nil
	}
	var v sql.NullInt64
	if err := db.QueryRowContext(ctx, "SELECT MAX(version) FROM switchboard_schema_migrations").Scan(&v); err != nil {
		return 0, fmt.Errorf("durable: schema version: %w", err)
	}
	return int(v.Int64), nil
}

// MissingMigrations returns the versions of the embedded migrations of e that db has not applied, in
// order: a database whose newest migration is current may still lack an older one that was
// added beside it.
func MissingMigrations(ctx context.Context, db *sql.DB, e Engine) ([]int, error) {
	ms, err := Migrations(e)
	if err != nil {
		return nil, err
	}
	applied := map[int]bool{}
	var exists int
	if err := db.QueryRowContext(ctx, e.versionTableExists()).Scan(&exists); err != nil {
		return nil, fmt.Errorf("durable: schema version: %w", err)
	}
	if exists == 1 {
		rows, err := db.QueryContext(ctx, "SELECT version FROM switchboard_schema_migrations")
		if err != nil {
			return nil, fmt.Errorf("durable: schema version: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var v int
			if err := rows.Scan(&v); err != nil {
				return nil, fmt.Errorf("durable: schema version: %w", err)
			}
			applied[v] = true
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("durable: schema version: %w", err)
		}
	}
	var missing []int
	for _, m := range ms {
		if !applied[m.Version] {
			missing = append(missing, m.Version)
		}
	}
	return missing, nil
}

// Script returns the migrations ms of e as one script: the version table, then each
// migration, headed by a comment with its version and name, followed by the insert of its
// version row, as Apply leaves it.
func Script(e Engine, ms []Migration) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "-- switchboard durable schema for %s: migrations %d to %d.\n", e, ms[0].Version, ms[len(ms)-1].Version)
	b.WriteString("-- Apply once to an empty database, or from the first migration the database lacks.\n\n")
	b.WriteString(versionTable + ";\n")
	for _, m := range ms {
		stmts, err := Split(m.SQL, e.syntax())
		if err != nil {
			return "", fmt.Errorf("durable: migration %d (%s): %w", m.Version, m.Name, err)
		}
		fmt.Fprintf(&b, "\n-- Migration %d: %s\n", m.Version, m.Name)
		for _, s := range stmts {
			b.WriteString(scriptStatement(s))
			b.WriteString(";\n")
		}
		fmt.Fprintf(&b, "INSERT INTO switchboard_schema_migrations (version, name, applied_at) VALUES (%d, '%s', %s);\n",
			m.Version, strings.ReplaceAll(m.Name, "'", "''"), e.appliedAt())
	}
	return b.String(), nil
}

// scriptStatement is stmt as Script writes it: a concurrent index build (see onlineIndexes)
// as a plain one, so that the script runs in a transaction as migration tools run a file, with a
// comment saying how to build it on a large table instead.
func scriptStatement(stmt string) string {
	if onlineIndexRE.MatchString(withoutComments(stmt)) {
		return "-- On a large table, run this one alone, outside a transaction, with CONCURRENTLY after\n" +
			"-- INDEX: a plain build blocks the table's inserts while it reads the table.\n" + concurrently.ReplaceAllString(stmt, " ")
	}
	return stmt
}

// MustScript is Script of every embedded migration of e. The migrations are embedded and
// checked by the tests, so an error cannot happen in a build that passed them: it panics.
func MustScript(e Engine) string {
	ms, err := Migrations(e)
	if err == nil {
		var s string
		if s, err = Script(e, ms); err == nil {
			return s
		}
	}
	panic(err)
}
