package durable

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

// dialect holds the statements that differ between SQLite and PostgreSQL. Statements are
// written with ? placeholders; rebind turns them into $n for PostgreSQL.
type dialect struct {
	name string

	insert        string
	byDedupe      string
	claim         string
	claimIsolated string
	isolatedDue   string
	unpark        string
	oldestDue     string
	completeOne   string
	completeMany  string
	insertAttempt string
	extend        string
	sweep         string
	sweepOne      string
}

func (d *dialect) rebind(q string) string {
	if d.name != "postgres" {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// The claim: due pending items, oldest first, skipping an item whose ordering key has an
// earlier item pending or running. The first %s is an index hint (SQLite), the second the
// isolate flag of the items taken (0 for a normal claim, 1 for an isolated one). Placeholders:
// owner, lease until, claimed at and updated at, alone, now, limit.
const claimSelect = `SELECT i.id FROM switchboard_items i%s
	WHERE i.state = 'pending' AND i.next_at <= ? AND i.isolate = %d
	  AND (i.ordering_key IS NULL OR NOT EXISTS (
	        SELECT 1 FROM switchboard_items o
	        WHERE o.ordering_key = i.ordering_key AND o.state IN ('pending', 'running') AND o.id < i.id))
	ORDER BY i.next_at, i.id
	LIMIT ?`

const claimUpdate = `UPDATE switchboard_items
	SET state = 'running', lease_owner = ?, lease_until = ?, claimed_at = ?, updated_at = ?, attempts = attempts + 1,
	    alone = ?, parked_key = NULL
	WHERE id IN (%s)
	RETURNING ` + itemColumns

// completeOneSQL ends one lease. Placeholders: state, next_at, undo (1 when the claim is undone:
// no attempt was made), outcome (twice), error, parked key, updated at, and the fence (id,
// owner, attempt). A completion that records an attempt clears isolate: the item ran to an
// outcome of its own, so it is no crasher.
const completeOneSQL = `UPDATE switchboard_items
	SET state = ?, next_at = ?, attempts = attempts - ?,
	    interruptions = interruptions + CASE WHEN ? = 'interrupted' THEN 1 ELSE 0 END,
	    isolate = CASE WHEN ? = '' THEN isolate ELSE 0 END,
	    last_error = COALESCE(NULLIF(?, ''), last_error), parked_key = ?, alone = 0,
	    lease_owner = NULL, lease_until = NULL, updated_at = ?
	WHERE id = ? AND state = 'running' AND lease_owner = ? AND attempts = ?`

const insertAttemptSQL = `INSERT INTO switchboard_attempts (item_id, attempt, instance, started_at, ended_at, outcome, error)
	VALUES (?, ?, ?, ?, ?, ?, ?)`

// The PostgreSQL statements of the scheduler are written so that their generic plans probe
// indexes: the pgx driver prepares every statement, and after five executions PostgreSQL may
// keep a generic plan, costed without the parameters' values, whatever the table holds (a
// million finished rows, an empty queue). TestIndexPlans checks them with plan_cache_mode =
// force_generic_plan.

// postgresClaim is the claim of items whose isolate flag is isolate. The ids are collected by
// an InitPlan, ARRAY(SELECT … LIMIT … FOR UPDATE SKIP LOCKED), run once; the update finds them
// through the primary key. With "id IN (subquery)" the planner was free to hash-join the
// subquery with a sequential scan of the whole table, and did once the statistics promised
// many due items.
//
// Concurrency: the subquery locks each row it returns. A row that a concurrent claim changed
// and committed after this statement's snapshot is re-read at its newest version when locked
// (READ COMMITTED), and the subquery's WHERE (pending, due, isolate, ordering) is evaluated
// again on it; a row locked by a running transaction is skipped. So every id in the array is
// locked by this transaction and was pending and due when locked; nobody else can change it
// until this transaction ends, and the outer UPDATE updates exactly those rows
// (TestClaimConcurrentExactlyOnce). Placeholders: $1 owner, $2 lease until, $3 claimed at,
// $4 updated at, $5 alone, $6 now, $7 limit.
func postgresClaim(isolate int) string {
	return fmt.Sprintf(`UPDATE switchboard_items
SET state = 'running', lease_owner = $1, lease_until = $2, claimed_at = $3, updated_at = $4,
    attempts = attempts + 1, alone = $5, parked_key = NULL
WHERE id = ANY(ARRAY(
        SELECT i.id FROM switchboard_items i
        WHERE i.state = 'pending' AND i.isolate = %d AND i.next_at <= $6
          AND (i.ordering_key IS NULL OR NOT EXISTS (
                SELECT 1 FROM switchboard_items o
                WHERE o.ordering_key = i.ordering_key AND o.state IN ('pending', 'running') AND o.id < i.id))
        ORDER BY i.next_at, i.id
        LIMIT $7
        FOR UPDATE OF i SKIP LOCKED))
RETURNING `+itemColumns, isolate)
}

// postgresComplete ends a batch of leases in one statement. The fence check compares the state
// with a column of the materialized input rather than a constant: "state = 'running'" would let
// the planner read every running item through the lease index and, in the generic plan, which
// costs the arrays at ten elements, join each of them to every completion in a nested loop.
// This way the primary key, probed once per completion, is the only way in. The attempt rows
// are inserted from the update's RETURNING, which carries the input's columns. Placeholders:
// arrays of id, attempt, owner, next state, next_at, undo (1: the claim is undone), error,
// started_at, ended_at, outcome (empty: no attempt row), parked key (empty: none).
const postgresComplete = `WITH v AS MATERIALIZED (
    SELECT v.*, 'running'::text AS running
    FROM unnest($1::bigint[], $2::int[], $3::text[], $4::text[], $5::bigint[], $6::int[], $7::text[], $8::bigint[], $9::bigint[], $10::text[], $11::text[])
        AS v(id, attempt, owner, state, next_at, undo, err, started_at, ended_at, outcome, parked_key)
), u AS (
    UPDATE switchboard_items i
    SET state = v.state, next_at = v.next_at, attempts = i.attempts - v.undo,
        interruptions = i.interruptions + CASE WHEN v.outcome = 'interrupted' THEN 1 ELSE 0 END,
        isolate = CASE WHEN v.outcome = '' THEN i.isolate ELSE 0 END,
        last_error = COALESCE(NULLIF(v.err, ''), i.last_error), parked_key = NULLIF(v.parked_key, ''), alone = 0,
        lease_owner = NULL, lease_until = NULL, updated_at = v.ended_at
    FROM v
    WHERE i.id = v.id AND i.state = v.running AND i.lease_owner = v.owner AND i.attempts = v.attempt
    RETURNING i.id, v.owner, v.attempt, v.started_at, v.ended_at, v.outcome, v.err
), a AS (
    INSERT INTO switchboard_attempts (item_id, attempt, instance, started_at, ended_at, outcome, error)
    SELECT id, attempt, owner, started_at, ended_at, outcome, NULLIF(err, '') FROM u WHERE outcome <> ''
)
SELECT id, owner, attempt FROM u`

// postgresExtend moves the leases of owner's running items: ids joined through the primary key,
// the state compared with a column of the input for the same reason as in the completion.
// Placeholders: $1 lease until, $2 owner, $3 ids.
const postgresExtend = `UPDATE switchboard_items i SET lease_until = $1
FROM (SELECT unnest($3::bigint[]) AS id, 'running'::text AS running OFFSET 0) x
WHERE i.id = x.id AND i.state = x.running AND i.lease_owner = $2`

// postgresSweep returns expired leases to pending. s locks them (a lease extended or completed
// meanwhile fails the re-check on its newest version and is skipped); the update finds them by
// primary key; the attempt rows come from s, whose rows are exactly the updated ones. The item
// runs alone next; the lost attempt counts only if it ran alone. Placeholder: $1 now.
const postgresSweep = `WITH s AS (
    SELECT id, attempts, lease_owner, claimed_at FROM switchboard_items
    WHERE state = 'running' AND lease_until < $1
    FOR UPDATE SKIP LOCKED
), u AS (
    UPDATE switchboard_items i
    SET state = 'pending', next_at = $1, lease_owner = NULL, lease_until = NULL, updated_at = $1,
        last_error = '` + leaseExpired + `', isolate = 1, unattributed = i.unattributed + 1 - i.alone, alone = 0
    WHERE i.id = ANY(ARRAY(SELECT id FROM s))
    RETURNING i.id
), a AS (
    INSERT INTO switchboard_attempts (item_id, attempt, instance, started_at, ended_at, outcome, error)
    SELECT s.id, s.attempts, COALESCE(s.lease_owner, ''), COALESCE(s.claimed_at, 0), $1, 'abandoned', '` + leaseExpired + `'
    FROM s
)
SELECT COUNT(*) FROM u`

// oldestDueSQL is the due time of the oldest due item: the due index leads with isolate, so it
// is the older of the first entries of its two ranges. Placeholders: now, now.
const oldestDueSQL = `SELECT MIN(m) FROM (
    SELECT (SELECT MIN(next_at) FROM switchboard_items WHERE state = 'pending' AND isolate = 0 AND next_at <= ?) AS m
    UNION ALL
    SELECT (SELECT MIN(next_at) FROM switchboard_items WHERE state = 'pending' AND isolate = 1 AND next_at <= ?)) x`

func newDialect(name string) *dialect {
	d := &dialect{name: name}
	d.insert = d.rebind(`INSERT INTO switchboard_items (name, payload, state, dedupe_key, ordering_key, next_at, last_error, parked_key, created_at, updated_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT DO NOTHING
	RETURNING id`)
	d.byDedupe = d.rebind(`SELECT id FROM switchboard_items WHERE dedupe_key = ? AND state IN ('pending', 'running')`)
	d.completeOne = d.rebind(completeOneSQL)
	d.insertAttempt = d.rebind(insertAttemptSQL)
	d.sweepOne = d.rebind(`UPDATE switchboard_items
	SET state = 'pending', next_at = ?, lease_owner = NULL, lease_until = NULL, updated_at = ?,
	    last_error = '` + leaseExpired + `', isolate = 1, unattributed = unattributed + 1 - alone, alone = 0
	WHERE id = ?`)
	d.isolatedDue = d.rebind(`SELECT 1 FROM switchboard_items WHERE state = 'pending' AND isolate = 1 AND next_at <= ? LIMIT 1`)
	d.oldestDue = d.rebind(oldestDueSQL)
	d.unpark = `UPDATE switchboard_items SET next_at = MIN(next_at, ?1), parked_key = NULL WHERE parked_key = ?2`
	if name == "postgres" {
		d.claim = postgresClaim(0)
		d.claimIsolated = postgresClaim(1)
		d.completeMany = postgresComplete
		d.extend = postgresExtend
		d.sweep = postgresSweep
		d.isolatedDue = `SELECT 1 FROM switchboard_items WHERE state = 'pending' AND isolate = 1 AND next_at <= $1 LIMIT 1`
		// Only pending items have a parked key (a check constraint): the key alone finds them.
		d.unpark = `UPDATE switchboard_items SET next_at = LEAST(next_at, $1), parked_key = NULL WHERE parked_key = $2`
	} else {
		// Without statistics SQLite's planner prefers the state index and sorts every pending
		// item; the partial due index gives the due items already in claim order.
		d.claim = fmt.Sprintf(claimUpdate, fmt.Sprintf(claimSelect, " INDEXED BY switchboard_items_due", 0))
		d.claimIsolated = fmt.Sprintf(claimUpdate, fmt.Sprintf(claimSelect, " INDEXED BY switchboard_items_due", 1))
	}
	return d
}

var (
	sqliteDialect   = newDialect("sqlite")
	postgresDialect = newDialect("postgres")
)

type migration struct {
	version int
	name    string
	sql     string
}

func (d *dialect) migrations() ([]migration, error) {
	dir := path.Join("migrations", d.name)
	entries, err := fs.ReadDir(migrationFS, dir)
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		name := e.Name()
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
		out = append(out, migration{version: v, name: name, sql: string(body)})
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	return out, nil
}

// migrationLockKey is the PostgreSQL advisory lock taken while migrating.
const migrationLockKey = 0x5357424451 // "SWBDQ"

// SchemaVersion is the version of the newest migration embedded in this package.
func SchemaVersion() int {
	ms, err := sqliteDialect.migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// migrate applies the embedded migrations that are not applied yet, each in its own
// transaction. On PostgreSQL a session advisory lock serialises concurrent opens; on SQLite the
// immediate transaction does.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := s.d.migrations()
	if err != nil {
		return fmt.Errorf("durable: migrations: %w", err)
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("durable: migrate: %w", err)
	}
	defer conn.Close()
	if s.d.name == "postgres" {
		if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", int64(migrationLockKey)); err != nil {
			return fmt.Errorf("durable: migrate: lock: %w", err)
		}
		defer func() {
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", int64(migrationLockKey))
		}()
	}
	for _, m := range ms {
		if err := s.applyMigration(ctx, conn, m); err != nil {
			return fmt.Errorf("durable: migration %s: %w", m.name, err)
		}
	}
	return nil
}

func (s *Store) applyMigration(ctx context.Context, conn *sql.Conn, m migration) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS switchboard_schema_migrations (
	version    INTEGER PRIMARY KEY,
	name       TEXT NOT NULL,
	applied_at BIGINT NOT NULL)`); err != nil {
		return err
	}
	var n int
	if err := tx.QueryRowContext(ctx, s.d.rebind("SELECT COUNT(*) FROM switchboard_schema_migrations WHERE version = ?"), m.version).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	for stmt := range strings.SplitSeq(m.sql, ";") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, s.d.rebind("INSERT INTO switchboard_schema_migrations (version, name, applied_at) VALUES (?, ?, ?)"),
		m.version, m.name, time.Now().UnixMicro()); err != nil {
		return err
	}
	return tx.Commit()
}
