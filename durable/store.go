package durable

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	// Registers the "pgx" database/sql driver.
	"github.com/jackc/pgx/v5/stdlib"
	// Registers the "sqlite" database/sql driver.
	_ "modernc.org/sqlite"
)

// State is the lifecycle state of an item.
type State string

// The states of an item. See docs/durable.md for the state machine.
const (
	// StatePending: waiting for its next attempt, due at Item.NextAt.
	StatePending State = "pending"
	// StateRunning: claimed by a scheduler that holds a lease on it.
	StateRunning State = "running"
	// StateSucceeded: an attempt succeeded. Terminal.
	StateSucceeded State = "succeeded"
	// StateDead: attempts are exhausted, the last error was not retryable, or the item could not
	// be decoded. The row, its payload, last error and attempts are kept for operators.
	StateDead State = "dead"
)

// Outcome is how one attempt ended.
type Outcome string

// Attempt outcomes.
const (
	// OutcomeSucceeded: the dispatch returned no error.
	OutcomeSucceeded Outcome = "succeeded"
	// OutcomeFailed: the dispatch returned an error.
	OutcomeFailed Outcome = "failed"
	// OutcomeAbandoned: the lease expired before the holder completed the item (the holder died
	// or lost its database connection). The handler may or may not have run.
	OutcomeAbandoned Outcome = "abandoned"
	// OutcomeInterrupted: the scheduler shut down while the dispatch ran and cancelled it.
	OutcomeInterrupted Outcome = "interrupted"
)

// ItemID identifies an item in its store.
type ItemID int64

// Item is one durable request.
type Item struct {
	// ID is the item's id, assigned at enqueue.
	ID ItemID
	// Name is the stable name the request type was registered under.
	Name string
	// Payload is the encoded request.
	Payload []byte
	// State is the item's state.
	State State
	// Attempts counts the attempts made so far (the rows Store.Attempts lists).
	Attempts int
	// Interruptions counts the attempts that a scheduler's shutdown interrupted. They are
	// attempts, but they do not count against the retry policy's MaxAttempts (see Counted).
	Interruptions int
	// Unattributed counts the abandoned attempts this item made while other items ran beside
	// it in the same instance: when that instance died, nothing says which item killed it, so
	// they do not count against MaxAttempts either (see Counted). The item runs alone next
	// time (Isolate), and a crash then is its own.
	Unattributed int
	// Isolate is true when the item's last lease ran out while it ran: its next claim runs it
	// alone in its instance.
	Isolate bool
	// ParkedKey is the circuit-breaker key a pending item waits on: it was put off because
	// that breaker was open, and the breaker closing makes it due at once.
	ParkedKey string
	// DedupeKey is empty or the key under which at most one item is pending or running.
	DedupeKey string
	// OrderingKey is empty or the key whose items are dispatched one at a time, in id order.
	OrderingKey string
	// NextAt is when a pending item is due.
	NextAt time.Time
	// LeaseOwner is the instance id holding a running item's lease.
	LeaseOwner string
	// LeaseUntil is when a running item's lease expires.
	LeaseUntil time.Time
	// LastError is the error of the last failed attempt or deferral, if any.
	LastError string
	// CreatedAt is when the item was enqueued.
	CreatedAt time.Time
	// UpdatedAt is when the item last changed.
	UpdatedAt time.Time
}

// Counted is the number of attempts that count against the retry policy's MaxAttempts: every
// attempt but those a shutdown interrupted and those abandoned beside other items.
func (it Item) Counted() int { return it.Attempts - it.Interruptions - it.Unattributed }

// Attempt is one real try of an item, recorded as its own row.
type Attempt struct {
	// ID is the attempt row's own id.
	ID int64
	// ItemID is the item tried.
	ItemID ItemID
	// Number is the attempt's number for its item, from 1.
	Number int
	// Instance is the id of the scheduler instance that made the attempt.
	Instance string
	// StartedAt is when the item was claimed for the attempt (for OutcomeAbandoned) or when the
	// dispatch started.
	StartedAt time.Time
	// EndedAt is when the attempt ended or was found abandoned.
	EndedAt time.Time
	// Outcome is how the attempt ended.
	Outcome Outcome
	// Error is the attempt's error; empty on success.
	Error string
}

// NewItem describes an item to insert with Store.Enqueue.
type NewItem struct {
	// Name is the registered name of the request type. Required.
	Name string
	// Payload is the encoded request.
	Payload []byte
	// NextAt is when the item is first due.
	NextAt time.Time
	// DedupeKey, when not empty, makes the insert a no-op if an item with the same key is
	// pending or running; Enqueue then reports that item's id.
	DedupeKey string
	// OrderingKey, when not empty, makes the item wait for every earlier item with the same key.
	OrderingKey string
	// LastError records why the item was deferred, if it was.
	LastError string
	// ParkedKey is the circuit-breaker key the item waits on, when an open breaker is why it
	// was deferred: the breaker closing makes it due at once (see Store.Unpark).
	ParkedKey string
	// Now is the insert time.
	Now time.Time
}

// Claimed is an item claimed by Store.Claim: it is running, leased to the claimer, and its
// attempt count already includes the attempt being made.
type Claimed struct {
	Item
	// ClaimedAt is when the claim was made.
	ClaimedAt time.Time
}

// Fence returns the item's fence for a completion.
func (c Claimed) Fence() Fence {
	return Fence{ItemID: c.ID, Owner: c.LeaseOwner, Attempt: c.Attempts}
}

// Fence identifies one lease of an item: its holder and the attempt number the claim made. A
// completion is accepted only while the item is still running under the same fence.
type Fence struct {
	// ItemID is the item.
	ItemID ItemID
	// Owner is the instance id that claimed the item.
	Owner string
	// Attempt is the item's attempt count after the claim.
	Attempt int
}

// Completion ends a lease.
type Completion struct {
	// Fence is the lease being ended.
	Fence Fence
	// State is the item's next state: StatePending (with NextAt), StateSucceeded or StateDead.
	State State
	// NextAt is when a pending item is next due.
	NextAt time.Time
	// Outcome, when not empty, records an attempt row with StartedAt, EndedAt and Error.
	// When empty, the claim is undone: no attempt row and the attempt count goes back down
	// (an item released at shutdown before it started, an open breaker, an undecodable item).
	Outcome Outcome
	// StartedAt is when the attempt started.
	StartedAt time.Time
	// EndedAt is when the attempt ended; it is also the item's update time.
	EndedAt time.Time
	// Error is the attempt's error or the reason for the new state; kept as the item's last
	// error when not empty.
	Error string
	// ParkedKey, for a pending item put off by an open circuit breaker, is that breaker's key:
	// Unpark with the key makes the item due at once.
	ParkedKey string
}

// Stats summarises a store for dashboards and metrics.
type Stats struct {
	// Counts is the number of items per state; every State is present.
	Counts map[State]int64
	// OldestDue is how long the oldest due pending item has been due; zero when none is due.
	OldestDue time.Duration
}

// ListOptions filters Store.List.
type ListOptions struct {
	// State, when not empty, keeps only items in that state.
	State State
	// Name, when not empty, keeps only items of that request name.
	Name string
	// AfterID lists items with a larger id, for paging. Zero starts at the beginning.
	AfterID ItemID
	// Limit caps the number of items. Zero means 100.
	Limit int
}

// Store keeps items and their attempts in SQLite or PostgreSQL over database/sql. Both have the
// same schema and behavior. A Store is safe for concurrent use and by several processes at once
// (PostgreSQL: any number of instances; SQLite: one writer at a time on one file).
type Store struct {
	db      *sql.DB
	d       *dialect
	ownsDB  bool
	closeFn func() error
}

// OpenSQLite opens (creating on first use, with its parent directory) the SQLite database file
// at path, configures it (WAL journal, busy timeout, immediate write transactions, foreign
// keys) and applies the schema migrations. Close the Store to close the file.
func OpenSQLite(ctx context.Context, path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("durable: OpenSQLite: empty path")
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("durable: OpenSQLite: %w", err)
		}
	}
	q := url.Values{}
	q.Set("_txlock", "immediate")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(1)")
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("durable: OpenSQLite: %w", err)
	}
	// One writer at a time: a single connection serialises this process's statements, and the
	// busy timeout and immediate transactions serialise writers across processes.
	db.SetMaxOpenConns(1)
	s := &Store{db: db, d: sqliteDialect, ownsDB: true}
	if err := migrateSQLite(ctx, s); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

// migrateSQLite applies the migrations, trying again while another process holds the file in a
// way the busy timeout does not cover: switching a new file to WAL, or recovering a WAL, answers
// SQLITE_BUSY at once to every other opener.
func migrateSQLite(ctx context.Context, s *Store) error {
	wait := 10 * time.Millisecond
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := s.migrate(ctx)
		if err == nil || !sqliteBusy(err) || time.Now().After(deadline) {
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

// sqliteBusy reports whether err is SQLite's SQLITE_BUSY (or one of its extended codes).
func sqliteBusy(err error) bool {
	var coded interface{ Code() int }
	return errors.As(err, &coded) && coded.Code()&0xff == 5
}

// OpenPostgres connects to PostgreSQL with the pgx driver (dsn in any form pgx accepts; a
// search_path parameter selects the schema) and applies the schema migrations under an
// advisory lock, so instances may open concurrently. Close the Store to close the pool.
func OpenPostgres(ctx context.Context, dsn string) (*Store, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("durable: OpenPostgres: %w", err)
	}
	s := &Store{db: db, d: postgresDialect, ownsDB: true}
	if err := s.migrate(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

// NewPostgresStore uses an existing pool opened with the "pgx" driver and applies the schema
// migrations. Close does not close db.
func NewPostgresStore(ctx context.Context, db *sql.DB) (*Store, error) {
	s := &Store{db: db, d: postgresDialect}
	if err := s.migrate(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// DB returns the underlying pool.
func (s *Store) DB() *sql.DB { return s.db }

// Dialect returns "sqlite" or "postgres".
func (s *Store) Dialect() string { return s.d.name }

// Close closes the pool if the Store opened it.
func (s *Store) Close() error {
	if s.ownsDB {
		return s.db.Close()
	}
	return nil
}

func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

func fromMicros(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMicro(v).UTC()
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// Enqueue inserts an item. With a DedupeKey under which an item is already pending or running,
// it inserts nothing and returns that item's id with existed = true.
func (s *Store) Enqueue(ctx context.Context, it NewItem) (id ItemID, existed bool, err error) {
	return s.enqueue(ctx, s.db, it)
}

// EnqueueTx is Enqueue inside the caller's transaction on this store's database, so the item
// exists if and only if the transaction commits (a transactional outbox). On SQLite, tx must
// come from DB(), which has a single connection: do not use the Store outside tx until it ends.
func (s *Store) EnqueueTx(ctx context.Context, tx *sql.Tx, it NewItem) (id ItemID, existed bool, err error) {
	return s.enqueue(ctx, tx, it)
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *Store) enqueue(ctx context.Context, db querier, it NewItem) (id ItemID, existed bool, err error) {
	if it.Name == "" {
		return 0, false, errors.New("durable: Enqueue: empty name")
	}
	if it.Payload == nil {
		it.Payload = []byte{}
	}
	for range 5 {
		var v int64
		err = db.QueryRowContext(ctx, s.d.insert,
			it.Name, it.Payload, string(StatePending), nullString(it.DedupeKey), nullString(it.OrderingKey),
			micros(it.NextAt), nullString(it.LastError), nullString(it.ParkedKey), micros(it.Now), micros(it.Now)).Scan(&v)
		if err == nil {
			return ItemID(v), false, nil
		}
		if !errors.Is(err, sql.ErrNoRows) || it.DedupeKey == "" {
			return 0, false, fmt.Errorf("durable: enqueue: %w", err)
		}
		// A conflict on the dedupe key: report the item holding it. It may finish in between;
		// then the insert is tried again.
		err = db.QueryRowContext(ctx, s.d.byDedupe, it.DedupeKey).Scan(&v)
		if err == nil {
			return ItemID(v), true, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return 0, false, fmt.Errorf("durable: enqueue: %w", err)
		}
	}
	return 0, false, errors.New("durable: enqueue: dedupe key kept changing hands")
}

const itemColumns = "id, name, payload, state, attempts, interruptions, unattributed, isolate, parked_key, dedupe_key, ordering_key, next_at, lease_owner, lease_until, claimed_at, last_error, created_at, updated_at"

type rowScanner interface{ Scan(dest ...any) error }

func scanItem(r rowScanner) (Item, int64, error) {
	var (
		it                                          Item
		id, nextAt, createdAt, updatedAt, isolate   int64
		leaseUntil, claimedAt                       sql.NullInt64
		state                                       string
		dedupe, ordering, owner, lastErrStr, parked sql.NullString
	)
	err := r.Scan(&id, &it.Name, &it.Payload, &state, &it.Attempts, &it.Interruptions, &it.Unattributed, &isolate, &parked,
		&dedupe, &ordering, &nextAt, &owner, &leaseUntil, &claimedAt, &lastErrStr, &createdAt, &updatedAt)
	if err != nil {
		return Item{}, 0, err
	}
	it.ID = ItemID(id)
	it.Isolate, it.ParkedKey = isolate != 0, parked.String
	it.State = State(state)
	it.DedupeKey, it.OrderingKey, it.LeaseOwner, it.LastError = dedupe.String, ordering.String, owner.String, lastErrStr.String
	it.NextAt, it.LeaseUntil = fromMicros(nextAt), fromMicros(leaseUntil.Int64)
	it.CreatedAt, it.UpdatedAt = fromMicros(createdAt), fromMicros(updatedAt)
	return it, claimedAt.Int64, nil
}

// Item returns one item; sql.ErrNoRows (wrapped) if there is none.
func (s *Store) Item(ctx context.Context, id ItemID) (Item, error) {
	it, _, err := scanItem(s.db.QueryRowContext(ctx, s.d.rebind("SELECT "+itemColumns+" FROM switchboard_items WHERE id = ?"), int64(id)))
	if err != nil {
		return Item{}, fmt.Errorf("durable: item %d: %w", id, err)
	}
	return it, nil
}

// List returns items in id order, filtered by opts.
func (s *Store) List(ctx context.Context, opts ListOptions) ([]Item, error) {
	limit := opts.Limit
	if limit <= 0 {
		limit = 100
	}
	q := "SELECT " + itemColumns + " FROM switchboard_items WHERE id > ?"
	args := []any{int64(opts.AfterID)}
	if opts.State != "" {
		q += " AND state = ?"
		args = append(args, string(opts.State))
	}
	if opts.Name != "" {
		q += " AND name = ?"
		args = append(args, opts.Name)
	}
	q += " ORDER BY id LIMIT ?"
	args = append(args, limit)
	rows, err := s.db.QueryContext(ctx, s.d.rebind(q), args...)
	if err != nil {
		return nil, fmt.Errorf("durable: list: %w", err)
	}
	defer rows.Close()
	var out []Item
	for rows.Next() {
		it, _, err := scanItem(rows)
		if err != nil {
			return nil, fmt.Errorf("durable: list: %w", err)
		}
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("durable: list: %w", err)
	}
	return out, nil
}

// Attempts lists the attempts of an item in order.
func (s *Store) Attempts(ctx context.Context, id ItemID) ([]Attempt, error) {
	rows, err := s.db.QueryContext(ctx, s.d.rebind(
		"SELECT id, item_id, attempt, instance, started_at, ended_at, outcome, error FROM switchboard_attempts WHERE item_id = ? ORDER BY attempt"), int64(id))
	if err != nil {
		return nil, fmt.Errorf("durable: attempts: %w", err)
	}
	defer rows.Close()
	var out []Attempt
	for rows.Next() {
		var (
			a              Attempt
			itemID         int64
			started, ended int64
			outcome        string
			errStr         sql.NullString
		)
		if err := rows.Scan(&a.ID, &itemID, &a.Number, &a.Instance, &started, &ended, &outcome, &errStr); err != nil {
			return nil, fmt.Errorf("durable: attempts: %w", err)
		}
		a.ItemID, a.StartedAt, a.EndedAt, a.Outcome, a.Error = ItemID(itemID), fromMicros(started), fromMicros(ended), Outcome(outcome), errStr.String
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("durable: attempts: %w", err)
	}
	return out, nil
}

// Stats counts items by state and measures how long the oldest due item has waited at now.
func (s *Store) Stats(ctx context.Context, now time.Time) (Stats, error) {
	st := Stats{Counts: map[State]int64{StatePending: 0, StateRunning: 0, StateSucceeded: 0, StateDead: 0}}
	rows, err := s.db.QueryContext(ctx, "SELECT state, COUNT(*) FROM switchboard_items GROUP BY state")
	if err != nil {
		return st, fmt.Errorf("durable: stats: %w", err)
	}
	for rows.Next() {
		var state string
		var n int64
		if err := rows.Scan(&state, &n); err != nil {
			rows.Close()
			return st, fmt.Errorf("durable: stats: %w", err)
		}
		st.Counts[State(state)] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("durable: stats: %w", err)
	}
	var oldest sql.NullInt64
	err = s.db.QueryRowContext(ctx, s.d.oldestDue, micros(now), micros(now)).Scan(&oldest)
	if err != nil {
		return st, fmt.Errorf("durable: stats: %w", err)
	}
	if oldest.Valid {
		st.OldestDue = max(0, now.Sub(fromMicros(oldest.Int64)))
	}
	return st, nil
}

// Claim leases up to limit due pending items to owner until now+lease and returns them in id
// order. An item with an ordering key is claimed only when no earlier item with that key is
// pending or running. Each claim adds one to the item's attempt count; the new count is the
// attempt number of the claim's Fence. Items to be isolated are left out: ClaimIsolated takes
// them one at a time.
func (s *Store) Claim(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]Claimed, error) {
	return s.claim(ctx, s.d.claim, owner, now, lease, limit, false)
}

// ClaimIsolated leases the oldest due item marked Isolate (its last lease ran out while it ran),
// if there is one, to run alone: the claimer runs nothing else while it holds it, so that an
// item whose handler kills its process is the only one charged for the crash.
func (s *Store) ClaimIsolated(ctx context.Context, owner string, now time.Time, lease time.Duration) ([]Claimed, error) {
	return s.claim(ctx, s.d.claimIsolated, owner, now, lease, 1, true)
}

// IsolatedDue reports whether an item to be run alone is due at now.
func (s *Store) IsolatedDue(ctx context.Context, now time.Time) (bool, error) {
	var one int
	err := s.db.QueryRowContext(ctx, s.d.isolatedDue, micros(now)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("durable: isolated due: %w", err)
	}
	return true, nil
}

// Unpark makes the pending items waiting on the circuit breakers of keys due at now (unless
// they are due sooner) and returns how many it freed. Call it when those breakers close.
func (s *Store) Unpark(ctx context.Context, keys []string, now time.Time) (int, error) {
	total := 0
	for _, k := range keys {
		res, err := s.db.ExecContext(ctx, s.d.unpark, micros(now), k)
		if err != nil {
			return total, fmt.Errorf("durable: unpark: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("durable: unpark: %w", err)
		}
		total += int(n)
	}
	return total, nil
}

func (s *Store) claim(ctx context.Context, stmt, owner string, now time.Time, lease time.Duration, limit int, alone bool) ([]Claimed, error) {
	if limit <= 0 {
		return nil, nil
	}
	var (
		out []Claimed
		err error
	)
	args := claimArgs(owner, now, lease, limit, alone)
	if s.d.name == "sqlite" {
		err = s.inTx(ctx, func(tx *sql.Tx) error {
			out, err = scanClaims(tx.QueryContext(ctx, stmt, args...))
			return err
		})
	} else {
		out, err = scanClaims(s.db.QueryContext(ctx, stmt, args...))
	}
	if err != nil {
		return nil, fmt.Errorf("durable: claim: %w", err)
	}
	slices.SortFunc(out, func(a, b Claimed) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// claimArgs are the arguments of the claim statements: owner, lease until, claimed at, updated
// at, alone, now, limit.
func claimArgs(owner string, now time.Time, lease time.Duration, limit int, alone bool) []any {
	a := 0
	if alone {
		a = 1
	}
	return []any{owner, micros(now.Add(lease)), micros(now), micros(now), a, micros(now), limit}
}

// rowReader is what reading a result needs, from database/sql and from pgx alike.
type rowReader interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

func scanClaims(rows *sql.Rows, err error) ([]Claimed, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return readClaims(rows)
}

// readClaims reads the rows a claim returned.
func readClaims(rows rowReader) ([]Claimed, error) {
	var out []Claimed
	for rows.Next() {
		it, claimedAt, err := scanItem(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, Claimed{Item: it, ClaimedAt: fromMicros(claimedAt)})
	}
	return out, rows.Err()
}

// readFences reads the fences a PostgreSQL completion accepted.
func readFences(rows rowReader, accepted map[Fence]bool) error {
	for rows.Next() {
		var (
			id      int64
			owner   string
			attempt int
		)
		if err := rows.Scan(&id, &owner, &attempt); err != nil {
			return err
		}
		accepted[Fence{ItemID: ItemID(id), Owner: owner, Attempt: attempt}] = true
	}
	return rows.Err()
}

// checkCompletions refuses a completion whose next state is not one a lease can end in.
func checkCompletions(cs []Completion) error {
	for _, c := range cs {
		switch c.State {
		case StatePending, StateSucceeded, StateDead:
		default:
			return fmt.Errorf("durable: complete: item %d: invalid next state %q", c.Fence.ItemID, c.State)
		}
	}
	return nil
}

// leaseResults has one entry per completion: nil when accepted, a *LeaseLostError otherwise.
func leaseResults(cs []Completion, accepted map[Fence]bool) []error {
	out := make([]error, len(cs))
	for i, c := range cs {
		if !accepted[c.Fence] {
			out[i] = &LeaseLostError{Fence: c.Fence}
		}
	}
	return out
}

func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// Complete ends leases in one round trip (PostgreSQL) or one transaction (SQLite). The result
// has one entry per completion: nil when accepted, a *LeaseLostError when the item is no longer
// running under that fence (its lease expired and it was swept or claimed again). The error is
// for the batch as a whole (the database failed; nothing was written).
func (s *Store) Complete(ctx context.Context, cs []Completion) ([]error, error) {
	if len(cs) == 0 {
		return nil, nil
	}
	if err := checkCompletions(cs); err != nil {
		return nil, err
	}
	accepted := make(map[Fence]bool, len(cs))
	var err error
	if s.d.name == "sqlite" {
		err = s.inTx(ctx, func(tx *sql.Tx) error { return s.completeSQLite(ctx, tx, cs, accepted) })
	} else {
		err = s.completePostgres(ctx, cs, accepted)
	}
	if err != nil {
		return nil, fmt.Errorf("durable: complete: %w", err)
	}
	return leaseResults(cs, accepted), nil
}

// completeAndClaim writes completions and claims up to limit items in one round trip and one
// transaction: the outcomes of the items that finished are stored before, and together with,
// the claim of the items that start next. The claim leaves out items to be isolated, and runs
// its items alone when alone is set.
func (s *Store) completeAndClaim(ctx context.Context, cs []Completion, owner string, now time.Time, lease time.Duration,
	limit int, alone bool) ([]error, []Claimed, error) {
	if err := checkCompletions(cs); err != nil {
		return nil, nil, err
	}
	args := claimArgs(owner, now, lease, limit, alone)
	accepted := make(map[Fence]bool, len(cs))
	var (
		claimed []Claimed
		err     error
	)
	if s.d.name == "sqlite" {
		err = s.inTx(ctx, func(tx *sql.Tx) error {
			if err := s.completeSQLite(ctx, tx, cs, accepted); err != nil {
				return err
			}
			claimed, err = scanClaims(tx.QueryContext(ctx, s.d.claim, args...))
			return err
		})
	} else {
		claimed, err = s.completeAndClaimPostgres(ctx, cs, args, accepted)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("durable: complete and claim: %w", err)
	}
	slices.SortFunc(claimed, func(a, b Claimed) int { return cmp.Compare(a.ID, b.ID) })
	return leaseResults(cs, accepted), claimed, nil
}

// completeAndClaimPostgres sends the completion and the claim as one pgx batch: one round trip,
// and (before the batch's single Sync) one implicit transaction.
func (s *Store) completeAndClaimPostgres(ctx context.Context, cs []Completion, claimArgs []any, accepted map[Fence]bool) ([]Claimed, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var claimed []Claimed
	err = conn.Raw(func(dc any) error {
		pc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("the database/sql driver is %T, not pgx", dc)
		}
		b := &pgx.Batch{}
		b.Queue(s.d.completeMany, completionArrays(cs)...)
		b.Queue(s.d.claim, claimArgs...)
		br := pc.Conn().SendBatch(ctx, b)
		defer br.Close()
		rows, err := br.Query()
		if err != nil {
			return err
		}
		err = readFences(rows, accepted)
		rows.Close()
		if err != nil {
			return err
		}
		if rows, err = br.Query(); err != nil {
			return err
		}
		claimed, err = readClaims(rows)
		rows.Close()
		if err != nil {
			return err
		}
		return br.Close()
	})
	return claimed, err
}

// completionArrays are the arguments of the PostgreSQL completion: one array per column.
func completionArrays(cs []Completion) []any {
	n := len(cs)
	var (
		ids      = make([]int64, n)
		attempts = make([]int32, n)
		owners   = make([]string, n)
		states   = make([]string, n)
		nexts    = make([]int64, n)
		undo     = make([]int32, n)
		errs     = make([]string, n)
		starts   = make([]int64, n)
		ends     = make([]int64, n)
		outcomes = make([]string, n)
		parked   = make([]string, n)
	)
	for i, c := range cs {
		ids[i], attempts[i], owners[i] = int64(c.Fence.ItemID), int32(c.Fence.Attempt), c.Fence.Owner
		states[i], nexts[i], undo[i], errs[i] = string(c.State), micros(c.NextAt), int32(completionUndo(c)), c.Error
		starts[i], ends[i], outcomes[i], parked[i] = micros(c.StartedAt), micros(c.EndedAt), string(c.Outcome), c.ParkedKey
	}
	return []any{ids, attempts, owners, states, nexts, undo, errs, starts, ends, outcomes, parked}
}

func completionUndo(c Completion) int {
	if c.Outcome == "" {
		return 1
	}
	return 0
}

func (s *Store) completeSQLite(ctx context.Context, tx *sql.Tx, cs []Completion, accepted map[Fence]bool) error {
	upd, err := tx.PrepareContext(ctx, s.d.completeOne)
	if err != nil {
		return err
	}
	defer upd.Close()
	ins, err := tx.PrepareContext(ctx, s.d.insertAttempt)
	if err != nil {
		return err
	}
	defer ins.Close()
	for _, c := range cs {
		f := c.Fence
		res, err := upd.ExecContext(ctx, string(c.State), micros(c.NextAt), completionUndo(c), string(c.Outcome), string(c.Outcome), c.Error,
			nullString(c.ParkedKey), micros(c.EndedAt), int64(f.ItemID), f.Owner, f.Attempt)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			continue
		}
		accepted[f] = true
		if c.Outcome != "" {
			if _, err := ins.ExecContext(ctx, int64(f.ItemID), f.Attempt, f.Owner, micros(c.StartedAt), micros(c.EndedAt),
				string(c.Outcome), nullString(c.Error)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Store) completePostgres(ctx context.Context, cs []Completion, accepted map[Fence]bool) error {
	rows, err := s.db.QueryContext(ctx, s.d.completeMany, completionArrays(cs)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return readFences(rows, accepted)
}

// Extend moves the lease of owner's running items ids to until. Items no longer running under
// owner are left alone.
func (s *Store) Extend(ctx context.Context, owner string, ids []ItemID, until time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	if s.d.name == "postgres" {
		raw := make([]int64, len(ids))
		for i, id := range ids {
			raw[i] = int64(id)
		}
		_, err := s.db.ExecContext(ctx, s.d.extend, micros(until), owner, raw)
		if err != nil {
			return fmt.Errorf("durable: extend: %w", err)
		}
		return nil
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
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
	if err != nil {
		return fmt.Errorf("durable: extend: %w", err)
	}
	return nil
}

// Sweep returns running items whose lease expired before now to pending, due at now, and
// records each lost attempt as an OutcomeAbandoned row. A swept item is marked Isolate, so its
// next claim runs it alone; an attempt abandoned while it ran beside other items counts as
// Unattributed. It returns how many it swept.
func (s *Store) Sweep(ctx context.Context, now time.Time) (int, error) {
	if s.d.name == "postgres" {
		var n int
		if err := s.db.QueryRowContext(ctx, s.d.sweep, micros(now)).Scan(&n); err != nil {
			return 0, fmt.Errorf("durable: sweep: %w", err)
		}
		return n, nil
	}
	var n int
	err := s.inTx(ctx, func(tx *sql.Tx) error {
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
		for _, e := range list {
			if _, err := tx.ExecContext(ctx, s.d.sweepOne, micros(now), micros(now), e.id); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, s.d.insertAttempt, e.id, e.attempt, e.owner, e.claimedAt, micros(now),
				string(OutcomeAbandoned), leaseExpired); err != nil {
				return err
			}
		}
		n = len(list)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("durable: sweep: %w", err)
	}
	return n, nil
}

const leaseExpired = "lease expired before completion"
