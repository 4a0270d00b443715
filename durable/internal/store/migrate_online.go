package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// A migration builds an index on a table that may be large with
//
//	CREATE [UNIQUE] INDEX CONCURRENTLY IF NOT EXISTS name ON table ...
//
// (PostgreSQL only). A plain CREATE INDEX holds a lock that blocks every insert into the
// table while it reads the whole table: seconds on millions of rows, during which no enqueue
// and no completion goes through. Built concurrently, the index takes longer but blocks
// nothing. It cannot be built in a transaction, so such a migration runs in three steps: its
// other statements in a transaction under the migration lock (without recording the version:
// they must be safe to run again, ADD COLUMN IF NOT EXISTS and the like), then each index,
// then the version row in a transaction of its own. A build another instance runs at the same
// time is waited for; one a crash left invalid is dropped and built again.
//
// On a small table the index is built in the migration's transaction instead
// (onlineThreshold): as fast as the concurrent build there, and a concurrent build waits for
// every transaction older than it in the database to end, which a fresh database with other
// work in it need not do.

// onlineIndexRE matches a concurrent index build, naming the index and its table.
var onlineIndexRE = regexp.MustCompile(`(?is)^\s*CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+IF\s+NOT\s+EXISTS\s+(\w+)\s+ON\s+(?:ONLY\s+)?(\w+)`)

// concurrently matches the CONCURRENTLY of an index build, to take it out.
var concurrently = regexp.MustCompile(`(?i)\s+CONCURRENTLY\s+`)

// onlineThreshold is the row count from which an index is built concurrently: below it a
// plain build reads the table in well under a second.
var onlineThreshold = 100_000

// onlineIndex is a concurrent index build of a migration.
type onlineIndex struct {
	name, table, stmt string
}

// onlineIndexes takes the concurrent index builds out of stmts, returning the statements to
// run in the migration's transaction and the builds to run outside it. The build of an index
// on a table of fewer than onlineThreshold rows stays in the transaction, without
// CONCURRENTLY.
func onlineIndexes(ctx context.Context, conn *sql.Conn, stmts []string) ([]string, []onlineIndex, error) {
	var (
		inTx   []string
		online []onlineIndex
	)
	for _, stmt := range stmts {
		m := onlineIndexRE.FindStringSubmatch(withoutComments(stmt))
		if m == nil {
			if strings.Contains(strings.ToUpper(withoutComments(stmt)), "CONCURRENTLY") {
				return nil, nil, fmt.Errorf("statement (%s): a concurrent index build must read CREATE INDEX CONCURRENTLY IF NOT EXISTS name ON table", abbreviate(stmt))
			}
			inTx = append(inTx, stmt)
			continue
		}
		large, err := largeTable(ctx, conn, m[2])
		if err != nil {
			return nil, nil, err
		}
		if !large {
			inTx = append(inTx, concurrently.ReplaceAllString(stmt, " "))
			continue
		}
		online = append(online, onlineIndex{name: m[1], table: m[2], stmt: stmt})
	}
	return inTx, online, nil
}

// withoutComments is stmt without its comment lines.
func withoutComments(stmt string) string {
	var b strings.Builder
	for l := range strings.Lines(stmt) {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			b.WriteString(l)
		}
	}
	return b.String()
}

// largeTable reports whether table holds onlineThreshold rows or more (reading at most that
// many); a table that does not exist yet is not large.
func largeTable(ctx context.Context, conn *sql.Conn, table string) (bool, error) {
	var exists bool
	if err := conn.QueryRowContext(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&exists); err != nil || !exists {
		return false, err
	}
	var n int
	err := conn.QueryRowContext(ctx, fmt.Sprintf("SELECT COUNT(*) FROM (SELECT 1 FROM %s LIMIT %d) t", table, onlineThreshold)).Scan(&n)
	return n >= onlineThreshold, err
}

// onlinePoll is how often buildOnline looks at a build another instance runs.
const onlinePoll = 200 * time.Millisecond

// buildOnline builds ix concurrently and returns once it is valid: built by this call, or by
// another instance's build it waited for. A build that failed (a crash, a cancelled
// statement) leaves an invalid index that no build works on: it is dropped and built again.
// Two instances may find the same invalid index and drop it at once, which PostgreSQL can end
// as a deadlock of one of the two drops: a failed build or drop is looked at again, a few
// times, before it is an error.
func buildOnline(ctx context.Context, conn *sql.Conn, ix onlineIndex) error {
	const tries = 10
	failed := 0
	retry := func(what string, err error) error {
		if failed++; failed >= tries || ctx.Err() != nil {
			return fmt.Errorf("index %s: %s: %w", ix.name, what, err)
		}
		return wait(ctx, ix)
	}
	for rebuilt := 0; ; {
		if _, err := conn.ExecContext(ctx, ix.stmt); err != nil {
			if err := retry("building it", err); err != nil {
				return err
			}
			continue
		}
		var valid, building bool
		err := conn.QueryRowContext(ctx, `SELECT i.indisvalid,
	EXISTS (SELECT 1 FROM pg_stat_progress_create_index p WHERE p.index_relid = i.indexrelid)
FROM pg_index i WHERE i.indexrelid = to_regclass($1)`, ix.name).Scan(&valid, &building)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			continue // dropped meanwhile by another instance's rebuild: build it
		case err != nil:
			return fmt.Errorf("index %s: %w", ix.name, err)
		case valid:
			return nil
		case building:
			if err := wait(ctx, ix); err != nil {
				return err
			}
			continue
		}
		if rebuilt++; rebuilt > 3 {
			return fmt.Errorf("index %s: still invalid after %d builds", ix.name, rebuilt-1)
		}
		if _, err := conn.ExecContext(ctx, "DROP INDEX CONCURRENTLY IF EXISTS "+ix.name); err != nil {
			if err := retry("dropping the invalid index", err); err != nil {
				return err
			}
		}
	}
}

// wait waits onlinePoll, or until ctx ends.
func wait(ctx context.Context, ix onlineIndex) error {
	t := time.NewTimer(onlinePoll)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("index %s: waiting for its build: %w", ix.name, context.Cause(ctx))
	case <-t.C:
		return nil
	}
}
