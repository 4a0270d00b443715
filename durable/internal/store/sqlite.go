package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// SQLiteDriverName is the database/sql driver OpenSQLite uses: modernc.org/sqlite's, registered
// by the driver package durable/sqlite (this package imports no driver).
const SQLiteDriverName = "sqlite"

// SQLite is the engine of SQLite databases (the modernc.org/sqlite driver, "sqlite"). A
// database has one writer at a time: claims and completions are immediate transactions.
var SQLite Engine = newSQLite()

type sqliteEngine struct {
	st          statements
	completeOne string
	sweepOne    string
	// completeStmts are the statements of completeAndClaim: completeTx's two (complete's),
	// then the claim and the fair claim's two of claimIn.
	completeStmts [5]string

	// prepared holds, per pool, the statements of the claim loop, prepared once: SQLite parses
	// a statement on every prepare, and the claim's parse alone cost more than running it.
	mu       sync.Mutex
	prepared map[*sql.DB]*poolStatements
}

// poolStatements are the statements prepared on one pool, and how many Stores use them.
type poolStatements struct {
	users int
	stmts map[string]*sql.Stmt
	ids   attemptIDs // the attempt ids the pool reserved for successes and has not used
}

// attemptIDsOf returns the reserved attempt ids of db, or nil for a pool no Store retains.
func (e *sqliteEngine) attemptIDsOf(db *sql.DB) *attemptIDs {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p := e.prepared[db]; p != nil {
		return &p.ids
	}
	return nil
}

func (e *sqliteEngine) retain(db *sql.DB) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.prepared[db]
	if p == nil {
		p = &poolStatements{stmts: map[string]*sql.Stmt{}}
		e.prepared[db] = p
	}
	p.users++
}

func (e *sqliteEngine) release(db *sql.DB) {
	e.mu.Lock()
	p := e.prepared[db]
	if p == nil {
		e.mu.Unlock()
		return
	}
	if p.users--; p.users > 0 {
		e.mu.Unlock()
		return
	}
	delete(e.prepared, db)
	e.mu.Unlock()
	for _, st := range p.stmts {
		_ = st.Close()
	}
}

// prepare returns q prepared on db, once per pool retained by a Store, or nil for a pool that
// none retains (then the caller prepares q in its transaction, for one use). It must be called
// outside a transaction: the pool's one connection is what it prepares on.
func (e *sqliteEngine) prepare(ctx context.Context, db *sql.DB, q string) (*sql.Stmt, error) {
	e.mu.Lock()
	p := e.prepared[db]
	var st *sql.Stmt
	if p != nil {
		st = p.stmts[q]
	}
	e.mu.Unlock()
	if p == nil || st != nil {
		return st, nil
	}
	st, err := db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.prepared[db] != p { // released meanwhile
		_ = st.Close()
		return nil, nil
	}
	if prev := p.stmts[q]; prev != nil { // prepared meanwhile by another caller
		_ = st.Close()
		return prev, nil
	}
	p.stmts[q] = st
	return st, nil
}

// inTxStmt returns st as a statement of tx, or q prepared in tx when st is nil.
func inTxStmt(ctx context.Context, tx *sql.Tx, st *sql.Stmt, q string) (*sql.Stmt, error) {
	if st == nil {
		return tx.PrepareContext(ctx, q)
	}
	return tx.StmtContext(ctx, st), nil
}

// sqliteCompleteOne ends one lease, freeing the concurrency slot it held (held_key). Placeholders: state, next_at, undo (1 when the claim is
// undone: no attempt was made), outcome (twice), error, parked key, updated at, and the fence
// (id, owner, attempt). A completion that records an attempt clears isolate: the item ran to an
// outcome of its own, so it is no crasher.
const sqliteCompleteOne = `UPDATE switchboard_items
	SET state = ?, next_at = ?, attempts = attempts - ?,
	    interruptions = interruptions + CASE WHEN ? = 'interrupted' THEN 1 ELSE 0 END,
	    isolate = CASE WHEN ? = '' THEN isolate ELSE 0 END,
	    last_error = COALESCE(NULLIF(?, ''), last_error), parked_key = ?, alone = 0,
	    lease_owner = NULL, lease_until = NULL, held_key = NULL, updated_at = ?,
	    success_id = COALESCE(?, success_id), success_instance = COALESCE(?, success_instance),
	    success_started_at = COALESCE(?, success_started_at), success_ended_at = COALESCE(?, success_ended_at)
	WHERE id = ? AND state = 'running' AND lease_owner = ? AND attempts = ?`

// sqliteReserveAttemptIDs reserves ?1 ids of attempts, the last of which it returns, from the
// attempts table's AUTOINCREMENT sequence, for successes recorded on their items (whose ids
// later rows must not take). SQLite creates the sequence's row at the table's first insert:
// sqliteFirstAttemptIDs makes it when there is none.
const sqliteReserveAttemptIDs = `UPDATE sqlite_sequence SET seq = seq + ?1 WHERE name = 'switchboard_attempts' RETURNING seq`

// sqliteFirstAttemptIDs is sqliteReserveAttemptIDs for a table that had no row yet.
const sqliteFirstAttemptIDs = `INSERT INTO sqlite_sequence (name, seq)
	SELECT 'switchboard_attempts', COALESCE(MAX(id), 0) + ?1 FROM switchboard_attempts RETURNING seq`

const sqliteClaimUpdate = `UPDATE switchboard_items
	SET state = 'running', lease_owner = ?, lease_until = ?, claimed_at = ?, updated_at = ?, attempts = attempts + 1,
	    alone = ?
	WHERE id IN (%s)
	RETURNING ` + claimColumns

func newSQLite() *sqliteEngine {
	// Without statistics SQLite's planner prefers the state index and sorts every pending
	// item; the partial due index gives the due items already in claim order.
	claim := func(isolate int) string {
		return fmt.Sprintf(sqliteClaimUpdate, fmt.Sprintf(claimSelect, " INDEXED BY switchboard_items_due", isolate, fmt.Sprintf(pausedNameSQL, "?6")))
	}
	e := &sqliteEngine{
		prepared: map[*sql.DB]*poolStatements{},
		st: statements{
			insert:        insertSQL,
			debounce:      fmt.Sprintf(debounceSQL, "MIN"),
			byDedupe:      byDedupeSQL,
			release:       releaseSQL,
			byToken:       byTokenSQL,
			itemByToken:   itemByTokenSQL,
			claim:         sqliteFairClaim,
			claimIsolated: claim(1),
			isolatedDue:   isolatedDueSQL,
			unpark:        `UPDATE switchboard_items SET next_at = MIN(next_at, ?1), parked_key = NULL WHERE parked_key = ?2`,
			repark:        `UPDATE switchboard_items SET next_at = MIN(?1 + abs(random() % (?2 + 1)), COALESCE(deadline, ?1 + ?2)) WHERE parked_key = ?3`,
			oldestDue:     oldestDueSQL,
			cancel:        sqliteCancel,
		},
		completeOne: sqliteCompleteOne,
		sweepOne: `UPDATE switchboard_items
	SET state = 'pending', next_at = ?, lease_owner = NULL, lease_until = NULL, held_key = NULL, updated_at = ?,
	    last_error = '` + LeaseExpired + `', isolate = 1, unattributed = unattributed + 1 - alone, alone = 0
	WHERE id = ?`,
	}
	e.completeStmts = [5]string{e.completeOne, insertAttemptSQL, e.st.claim, sqliteFairWindow, sqliteOneKeyClaim}
	return e
}

func (*sqliteEngine) String() string         { return "sqlite" }
func (*sqliteEngine) rebind(q string) string { return q }
func (e *sqliteEngine) stmts() *statements   { return &e.st }
func (*sqliteEngine) appliedAt() string {
	return "CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)"
}
func (*sqliteEngine) transient(err error) bool { return sqliteBusy(err) }

// indexedRow: SQLite's planner has no statistics here (nothing runs ANALYZE on the file), so no
// drained table can turn these statements' plans into scans; the statement runs as it is.
func (*sqliteEngine) indexedRow(ctx context.Context, db *sql.DB, stmt string, args []any, dest ...any) error {
	return db.QueryRowContext(ctx, stmt, args...).Scan(dest...)
}

// replannedRows, replannedInTx and replannedCount run the statements as they are, for
// indexedRow's reason.
func (*sqliteEngine) replannedRows(ctx context.Context, db *sql.DB, stmt string, args []any, read func(RowReader) error) error {
	rows, err := db.QueryContext(ctx, stmt, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return read(rows)
}

func (*sqliteEngine) replannedInTx(_ context.Context, _ querier, run func() error) error {
	return run()
}

func (*sqliteEngine) replannedCount(ctx context.Context, db *sql.DB, stmt string, args []any) (int, error) {
	res, err := db.ExecContext(ctx, stmt, args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// readOnly: a SQLite file the process may not write fails on open or on its first write with
// an error of its own, which the migration reports as it is.
func (*sqliteEngine) readOnly(error) bool { return false }

// notApplied: an error the SQLite library returned for the statement (busy, full, constraint,
// interrupted by a deadline: the statement is rolled back) or one database/sql raised before
// running it. An error database/sql raised after the statement ran (a deadline that passed
// while the row was read back) leaves it unknown.
func (*sqliteEngine) notApplied(err error) bool {
	if notSent(err) {
		return true
	}
	_, coded := errors.AsType[interface {
		error
		Code() int
	}](err)
	return coded
}

// lockMigration takes nothing: the immediate transaction of each migration serialises them.
func (*sqliteEngine) lockMigration(context.Context, *sql.Tx) error { return nil }

// OpenSQLite opens (creating on first use, with its parent directory) the SQLite database file
// at path and configures the pool: WAL journal, busy timeout, immediate write transactions,
// foreign keys, and a single connection.
func OpenSQLite(path string) (*sql.DB, error) {
	if path == "" {
		return nil, errors.New("empty path")
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	q := url.Values{}
	q.Set("_txlock", "immediate")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(1)")
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
	db, err := sql.Open(SQLiteDriverName, dsn)
	if err != nil {
		return nil, err
	}
	// One writer at a time: a single connection serialises this process's statements, and the
	// busy timeout and immediate transactions serialise writers across processes.
	db.SetMaxOpenConns(1)
	return db, nil
}

// sqliteBusy reports whether err is SQLite's SQLITE_BUSY (or one of its extended codes):
// switching a new file to WAL, or recovering a WAL, answers it at once to every other opener,
// whatever the busy timeout.
func sqliteBusy(err error) bool {
	var coded interface{ Code() int }
	return errors.As(err, &coded) && coded.Code()&0xff == 5
}

func (e *sqliteEngine) claim(ctx context.Context, db *sql.DB, stmt string, args []any) ([]Claimed, error) {
	st, err := e.prepare(ctx, db, stmt)
	if err != nil {
		return nil, err
	}
	one, err := e.prepareOneKey(ctx, db)
	if err != nil {
		return nil, err
	}
	var out []Claimed
	err = inTx(ctx, db, func(tx *sql.Tx) error {
		out, err = e.claimIn(ctx, tx, st, stmt, args, one)
		return err
	})
	return out, err
}

// claimIn runs the claim q (prepared as st, or nil) with args in tx. The fair claim reads its
// window of keys first (sqliteFairWindow; see fairWindow), and when every pending item has one
// fairness key it is the claim of that key alone (sqliteOneKeyClaim): the same items, without
// the turns' work, which cost more than the claim itself. one holds the statements
// sqliteFairWindow and sqliteOneKeyClaim, prepared before tx began: the pool's one connection
// is tx's until it ends, so nothing can be prepared on the pool inside it.
func (e *sqliteEngine) claimIn(ctx context.Context, tx *sql.Tx, st *sql.Stmt, q string, args []any, one [2]*sql.Stmt) ([]Claimed, error) {
	args, w := fairArgs(args)
	if q != e.st.claim || w == nil {
		return claimTx(ctx, tx, st, q, args)
	}
	keys, err := inTxStmt(ctx, tx, one[0], sqliteFairWindow)
	if err != nil {
		return nil, err
	}
	defer keys.Close()
	var (
		first, last, from, to sql.NullString
		n                     int
	)
	if err := keys.QueryRowContext(ctx, nullString(w.after), fairKeyWindow).Scan(&first, &last, &from, &to, &n); err != nil {
		return nil, err
	}
	var out []Claimed
	switch {
	case !first.Valid:
		return nil, nil
	case first.String == last.String:
		out, err = claimTx(ctx, tx, one[1], sqliteOneKeyClaim, append(args[:len(args):len(args)], first.String))
	default:
		out, err = claimTx(ctx, tx, st, q, append(args[:len(args):len(args)], from.String, to.String))
	}
	if err == nil && len(out) > 0 {
		w.next, w.reported = "", true
		if n >= fairKeyWindow {
			w.next = to.String
		}
	}
	return out, err
}

// claimTx runs the claim q (prepared as st, or nil) with args in tx.
func claimTx(ctx context.Context, tx *sql.Tx, st *sql.Stmt, q string, args []any) ([]Claimed, error) {
	st, err := inTxStmt(ctx, tx, st, q)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	rows, err := st.QueryContext(ctx, args...)
	return scanClaims(args, rows, err)
}

// prepareOneKey prepares the statements claimIn needs for the fair claim.
func (e *sqliteEngine) prepareOneKey(ctx context.Context, db *sql.DB) ([2]*sql.Stmt, error) {
	sts, err := e.prepareAll(ctx, db, sqliteFairWindow, sqliteOneKeyClaim)
	if err != nil {
		return [2]*sql.Stmt{}, err
	}
	return [2]*sql.Stmt{sts[0], sts[1]}, nil
}

func (e *sqliteEngine) complete(ctx context.Context, db *sql.DB, cs []Completion, accepted map[Fence]bool) error {
	return e.completeIn(ctx, db, e.completeStmts[:2], cs, accepted, nil)
}

func (e *sqliteEngine) completeAndClaim(ctx context.Context, db *sql.DB, cs []Completion, claimArgs []any, accepted map[Fence]bool) ([]Claimed, error) {
	var claimed []Claimed
	err := e.completeIn(ctx, db, e.completeStmts[:], cs, accepted, func(tx *sql.Tx, sts []*sql.Stmt) (err error) {
		claimed, err = e.claimIn(ctx, tx, sts[2], e.st.claim, claimArgs, [2]*sql.Stmt{sts[3], sts[4]})
		return err
	})
	return claimed, err
}

// completeIn prepares qs (completeTx's two first: completeStmts) and applies cs in one
// transaction, then runs then (when not nil) in it with the statements prepared; the attempt
// ids the completion reserved become the pool's only if the transaction committed.
func (e *sqliteEngine) completeIn(ctx context.Context, db *sql.DB, qs []string, cs []Completion, accepted map[Fence]bool,
	then func(tx *sql.Tx, sts []*sql.Stmt) error) error {
	sts, err := e.prepareAll(ctx, db, qs...)
	if err != nil {
		return err
	}
	ids := e.attemptIDsOf(db)
	var done func(bool)
	err = inTx(ctx, db, func(tx *sql.Tx) (err error) {
		if done, err = e.completeTx(ctx, tx, sts, cs, accepted, ids); err != nil || then == nil {
			return err
		}
		return then(tx, sts)
	})
	if done != nil {
		done(err == nil)
	}
	return err
}

// prepareAll prepares qs (see prepare).
func (e *sqliteEngine) prepareAll(ctx context.Context, db *sql.DB, qs ...string) ([]*sql.Stmt, error) {
	out := make([]*sql.Stmt, len(qs))
	for i, q := range qs {
		st, err := e.prepare(ctx, db, q)
		if err != nil {
			return nil, err
		}
		out[i] = st
	}
	return out, nil
}

// completeTx applies cs in tx, with the completion and attempt statements prepared as sts[0]
// and sts[1] (or nil), its successes' attempt ids taken from ids (see attemptIDs.take); the
// caller calls done with whether tx committed.
func (e *sqliteEngine) completeTx(ctx context.Context, tx *sql.Tx, sts []*sql.Stmt, cs []Completion, accepted map[Fence]bool,
	ids *attemptIDs) (done func(committed bool), err error) {
	upd, err := inTxStmt(ctx, tx, sts[0], e.completeOne)
	if err != nil {
		return done, err
	}
	defer upd.Close()
	ins, err := inTxStmt(ctx, tx, sts[1], insertAttemptSQL)
	if err != nil {
		return done, err
	}
	defer ins.Close()
	next, done, err := ids.take(ctx, tx, successes(cs))
	if err != nil {
		return nil, err
	}
	for _, c := range cs {
		f := c.Fence
		var success [4]any // a success's attempt, recorded on its item: id, instance, start, end
		if c.Outcome == OutcomeSucceeded {
			success = [4]any{next, f.Owner, micros(c.StartedAt), micros(c.EndedAt)}
			next++
		}
		res, err := upd.ExecContext(ctx, string(c.State), micros(c.NextAt), completionUndo(c), string(c.Outcome), string(c.Outcome), c.Error,
			nullString(c.ParkedKey), micros(c.EndedAt), success[0], success[1], success[2], success[3], int64(f.ItemID), f.Owner, f.Attempt)
		if err != nil {
			return done, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return done, err
		}
		if n == 0 {
			continue
		}
		accepted[f] = true
		if c.State == StateDead {
			// The dead letter exists if and only if the completion does.
			if _, err := tx.ExecContext(ctx, insertItemDeadLetterSQL, nullString(string(c.Cause)), int64(f.ItemID)); err != nil {
				return done, err
			}
		}
		if c.Outcome != "" && (c.Outcome != OutcomeSucceeded || c.SuccessRow) {
			if _, err := ins.ExecContext(ctx, int64(f.ItemID), f.Attempt, f.Owner, micros(c.StartedAt), micros(c.EndedAt),
				string(c.Outcome), nullString(c.Error)); err != nil {
				return done, err
			}
		}
	}
	return done, nil
}

func (e *sqliteEngine) extend(ctx context.Context, db *sql.DB, owner string, ids []ItemID, until time.Time) error {
	return inTx(ctx, db, func(tx *sql.Tx) error {
		for chunk := range slices.Chunk(ids, 500) {
			args := []any{micros(until), owner}
			for _, id := range chunk {
				args = append(args, int64(id))
			}
			q := "UPDATE switchboard_items SET lease_until = ? WHERE state = 'running' AND lease_owner = ? AND id IN (?" +
				strings.Repeat(", ?", len(chunk)-1) + ")"
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return err
			}
		}
		return nil
	})
}

func (e *sqliteEngine) sweep(ctx context.Context, db *sql.DB, now time.Time) (int, error) {
	var n int
	err := inTx(ctx, db, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, "SELECT id, attempts, lease_owner, claimed_at FROM switchboard_items INDEXED BY switchboard_items_lease WHERE state = 'running' AND lease_until < ?", micros(now))
		if err != nil {
			return err
		}
		type expired struct {
			id, claimedAt int64
			attempt       int
			owner         string
		}
		var list []expired
		for rows.Next() {
			var e expired
			var owner sql.NullString
			var claimed sql.NullInt64
			if err := rows.Scan(&e.id, &e.attempt, &owner, &claimed); err != nil {
				rows.Close()
				return err
			}
			e.owner, e.claimedAt = owner.String, claimed.Int64
			list = append(list, e)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, x := range list {
			if _, err := tx.ExecContext(ctx, e.sweepOne, micros(now), micros(now), x.id); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, insertAttemptSQL, x.id, x.attempt, x.owner, x.claimedAt, micros(now),
				string(OutcomeAbandoned), LeaseExpired); err != nil {
				return err
			}
		}
		n = len(list)
		return nil
	})
	return n, err
}

func (*sqliteEngine) versionTableExists() string {
	return "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'switchboard_schema_migrations'"
}

func (*sqliteEngine) syntax() Syntax { return SQLiteSyntax }

// checkConnection: a file that opens has nothing more to check.
func (*sqliteEngine) checkConnection(context.Context, *sql.DB) error { return nil }
