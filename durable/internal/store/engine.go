package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"
)

// Engine is one database's implementation of the store: its statements and the calls whose
// shape differs between databases. SQLite and Postgres are the engines.
type Engine interface {
	// String returns "sqlite" or "postgres", the name of the engine's migrations directory.
	String() string

	// rebind turns a statement written with ? placeholders into the engine's form.
	rebind(q string) string
	// stmts returns the engine's fixed statements.
	stmts() *statements
	// claim runs a claim statement with args (see claimArgs).
	claim(ctx context.Context, db *sql.DB, stmt string, args []any) ([]Claimed, error)
	// complete applies completions, recording the accepted fences.
	complete(ctx context.Context, db *sql.DB, cs []Completion, accepted map[Fence]bool) error
	// completeAndClaim applies completions and then runs the normal claim with claimArgs, in
	// one transaction.
	completeAndClaim(ctx context.Context, db *sql.DB, cs []Completion, claimArgs []any, accepted map[Fence]bool) ([]Claimed, error)
	// extend moves the leases of owner's running items ids to until.
	extend(ctx context.Context, db *sql.DB, owner string, ids []ItemID, until time.Time) error
	// sweep returns expired leases to pending and records their abandoned attempts.
	sweep(ctx context.Context, db *sql.DB, now time.Time) (int, error)
	// prune deletes one batch of succeeded items last updated before before, and not holding
	// their dedupe keys at now, in tx; busy
	// reports that another instance is pruning and nothing was deleted.
	prune(ctx context.Context, tx *sql.Tx, before, now time.Time) (n int, busy bool, err error)
	// lockMigration serialises concurrent migrations: taken first in each migration's
	// transaction tx, held until it ends.
	lockMigration(ctx context.Context, tx *sql.Tx) error
	// notApplied reports an error of a statement that is known not to have been applied: it
	// failed before anything was sent, or the database refused it (and, the statement being
	// its own transaction or part of one that can no longer commit, rolled it back). Any other
	// error leaves the statement's outcome unknown.
	notApplied(err error) bool
	// transient reports a migration error worth trying again at once (another process holds
	// the database in a way its own wait does not cover).
	transient(err error) bool
	// indexedRow is db.QueryRowContext(ctx, stmt, args...).Scan(dest...), for a statement that
	// finds its rows through an index: on PostgreSQL with sequential scans off (see indexPlans).
	indexedRow(ctx context.Context, db *sql.DB, stmt string, args []any, dest ...any) error
	// replannedRows runs stmt on db, planned anew for this run on PostgreSQL (customPlans),
	// and hands its rows to read: the statements that run now and then.
	replannedRows(ctx context.Context, db *sql.DB, stmt string, args []any, read func(RowReader) error) error
	// replannedCount runs stmt, which writes rows and returns none, as replannedRows does, and
	// returns how many rows it wrote.
	replannedCount(ctx context.Context, db *sql.DB, stmt string, args []any) (int, error)
	// replannedInTx calls run, whose statements run in tx, an application's transaction, with
	// those statements planned anew at each run on PostgreSQL (customPlans), the transaction's
	// own setting put back afterwards. run's sql.ErrNoRows is an answer: the setting is put back
	// then too.
	replannedInTx(ctx context.Context, tx querier, run func() error) error
	// readOnly reports a migration error that is the server's refusal of every write (a
	// standby), which the migration reports as that rather than as its own failure.
	readOnly(err error) bool
	// appliedAt is the SQL expression of the current time in microseconds since the epoch,
	// for the version rows of the driver packages' MigrationSQL.
	appliedAt() string
	// syntax is the lexical rules Split follows for the engine's scripts.
	syntax() Syntax
	// versionTableExists is a query answering 1 when the version table exists, else 0.
	versionTableExists() string
	// breakers returns the engine's statements of switchboard_breakers.
	breakers() *breakerStatements
	// rateLimits returns the engine's statements of switchboard_rate_limits.
	rateLimits() *rateLimitStatements
	// checkConnection checks, on a database that answers, what the engine can tell of a
	// mistake in the connection's settings before any migration runs.
	checkConnection(ctx context.Context, db *sql.DB) error
}

// Connect checks that db answers, so that a wrong address or credentials are reported as such,
// and what the engine can tell of a mistaken setting (on PostgreSQL a search_path naming no
// schema, the usual mistake when a DSN selects a schema nobody created).
func Connect(ctx context.Context, db *sql.DB, e Engine) error {
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("durable: Open %v: connect: %w", e, err)
	}
	if err := e.checkConnection(ctx, db); err != nil {
		return fmt.Errorf("durable: Open %v: %w", e, err)
	}
	return nil
}

// statements are the statements every engine has, each in its engine's form.
type statements struct {
	insert        string
	debounce      string
	byDedupe      string
	release       string
	byToken       string
	itemByToken   string
	claim         string
	claimIsolated string
	isolatedDue   string
	unpark        string
	repark        string
	oldestDue     string
	// cancel makes a pending item cancelled (and, on PostgreSQL, moves it out of the claim's
	// table). Placeholders: updated at, id.
	cancel string
}

// orderedFirstSQL is the claims' condition on an item i with an ordering key: no earlier item
// with its key is pending or running.
const orderedFirstSQL = `(i.ordering_key IS NULL OR NOT EXISTS (
	        SELECT 1 FROM switchboard_items o
	        WHERE o.ordering_key = i.ordering_key AND o.state IN ('pending', 'running') AND o.id < i.id))`

// The claim (SQLite): due pending items, oldest first, skipping an item whose ordering key has
// an earlier item pending or running, a debounced item whose name and key have one
// (debounceOrderSQL), and an item whose request name is paused. The first %s
// is an index hint, the %d the isolate flag of the items taken (0 for a normal claim, 1 for an
// isolated one), the last %s the pause test. Placeholders: owner, lease until, claimed at and
// updated at, alone, now (also as ?6), limit.
const claimSelect = `SELECT i.id FROM switchboard_items i%s
	WHERE i.state = 'pending' AND i.next_at <= ? AND i.isolate = %d
	  AND ` + orderedFirstSQL + `
	  AND ` + debounceOrderSQL + `
	  AND %s
	ORDER BY i.next_at, i.id
	LIMIT ?`

const insertSQL = `INSERT INTO switchboard_items (name, payload, state, dedupe_key, ordering_key, next_at, last_error, parked_key, created_at, updated_at, metadata, token, guard_key, deadline, unique_for, deferred, fair_key, priority, head_start, reference)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT DO NOTHING
	RETURNING id`

// holdsKey is the predicate of the dedupe index (switchboard_items_dedupe) beside the key: the
// items that hold their dedupe key. The statements that look a key up repeat it, so that the
// index serves them.
const holdsKey = `(state IN ('pending', 'running') OR (state = 'succeeded' AND unique_for IS NOT NULL AND unique_released_at IS NULL))`

// byDedupeSQL finds the item holding a dedupe key, with what tells whether its window ended.
const byDedupeSQL = `SELECT id, state, updated_at, unique_for FROM switchboard_items WHERE dedupe_key = ? AND ` + holdsKey

// releaseSQL releases the key of a succeeded item whose window ended. Placeholders: released
// at, id, now.
const releaseSQL = `UPDATE switchboard_items SET unique_released_at = ?
	WHERE id = ? AND state = 'succeeded' AND unique_released_at IS NULL AND updated_at + unique_for <= ?`

// isolatedDueSQL finds a due item to run alone whose name is not paused. Placeholders: now, now.
const isolatedDueSQL = `SELECT 1 FROM switchboard_items i WHERE i.state = 'pending' AND i.isolate = 1 AND i.next_at <= ?
	AND i.name NOT IN (SELECT p.target FROM switchboard_pauses p WHERE p.kind = 'name' AND (p.until IS NULL OR p.until > ?))
	LIMIT 1`

// oldestDueSQL is the due time of the oldest due item: the due index leads with isolate, so it
// is the older of the first entries of its two ranges. Placeholders: now, now.
const oldestDueSQL = `SELECT MIN(m) FROM (
    SELECT (SELECT MIN(next_at) FROM switchboard_items WHERE state = 'pending' AND isolate = 0 AND next_at <= ?) AS m
    UNION ALL
    SELECT (SELECT MIN(next_at) FROM switchboard_items WHERE state = 'pending' AND isolate = 1 AND next_at <= ?)) x`

const insertAttemptSQL = `INSERT INTO switchboard_attempts (item_id, attempt, instance, started_at, ended_at, outcome, error)
	VALUES (?, ?, ?, ?, ?, ?, ?)`

// notSent reports the errors database/sql gives for a statement it never sent: a connection
// that was closed or bad before the statement went out.
func notSent(err error) bool {
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) || errors.Is(err, sql.ErrTxDone)
}
