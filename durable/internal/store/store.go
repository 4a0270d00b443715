package store

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// unstored returns cs without its Stored completions: cs itself when it has none.
func unstored(cs []Completion) []Completion {
	for i, c := range cs {
		if c.Stored {
			out := slices.Clone(cs[:i])
			for _, c := range cs[i+1:] {
				if !c.Stored {
					out = append(out, c)
				}
			}
			return out
		}
	}
	return cs
}

// Store keeps items and their attempts. It is safe for concurrent use and by several processes
// at once (PostgreSQL: any number of instances; SQLite: one writer at a time on one file).
type Store struct {
	db     *sql.DB
	e      Engine
	ownsDB bool
	hub    hub        // the notification connection (PostgreSQL)
	fair   fairCursor // where the next fair claim's window of keys starts
}

// New returns a Store over db, a pool of engine e's database whose schema is migrated. Close
// closes db when owns is set.
func New(db *sql.DB, e Engine, owns bool) *Store {
	if c, ok := e.(statementCache); ok {
		c.retain(db)
	}
	return &Store{db: db, e: e, ownsDB: owns}
}

// statementCache is implemented by an engine that keeps statements prepared per pool: New
// retains the pool's statements, Close releases them (closing them with the pool's last Store).
type statementCache interface {
	retain(db *sql.DB)
	release(db *sql.DB)
}

// DB returns the underlying pool.
func (s *Store) DB() *sql.DB { return s.db }

// Engine returns the store's engine.
func (s *Store) Engine() Engine { return s.e }

// Close closes the pool if the Store owns it.
func (s *Store) Close() error {
	if c, ok := s.e.(statementCache); ok {
		c.release(s.db)
	}
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

// Enqueue inserts an item. With a Token that an item already holds, or a DedupeKey an item
// holds (pending or running, or succeeded less than its UniqueFor before it.Now), it inserts
// nothing and returns that item's id with existed = true. A succeeded item whose window ended
// by it.Now is released (its UniqueReleasedAt set) and the insert made. With a DebounceKey
// that a pending item of the name holds, one never claimed, it updates that item instead
// (see NewItem.DebounceKey) and returns its id with existed = true. An error that leaves
// it unknown whether the item was inserted (the statement may have reached the database: a
// deadline or a lost connection while it ran or committed) is an *UnknownOutcomeError; any
// other error means nothing was inserted.
func (s *Store) Enqueue(ctx context.Context, it NewItem) (id ItemID, existed bool, err error) {
	if err := checkNewItem(it); err != nil {
		return 0, false, err
	}
	// The statement runs on a connection of its own taking, so that an error in getting one
	// (the pool's wait, a dial, pgx's ping of a connection idle for long) is known to have
	// sent nothing. database/sql tries again on another connection when the driver reports a
	// connection bad before anything was sent; so does this loop.
	for try := 0; ; try++ {
		conn, err := s.db.Conn(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return 0, false, fmt.Errorf("durable: enqueue: ended while waiting for a connection, before anything was sent: %w", err)
			}
			return 0, false, fmt.Errorf("durable: enqueue: no connection: %w", err)
		}
		id, existed, err = s.enqueue(ctx, conn, it, false)
		_ = conn.Close()
		if !errors.Is(err, driver.ErrBadConn) || try == 2 {
			return id, existed, err
		}
	}
}

// EnqueueTx is Enqueue inside the caller's transaction on this store's database, so the item
// exists if and only if the transaction commits (a transactional outbox). On SQLite, tx must
// come from DB(), which has a single connection: do not use the Store outside tx until it ends.
// An *UnknownOutcomeError says the statement may have taken effect in tx. On PostgreSQL an
// item due at once is notified to the instances watching (WatchDue) when tx commits, by the
// insert itself; Enqueue leaves the notification to its caller (NotifyDue), who knows when it
// committed.
func (s *Store) EnqueueTx(ctx context.Context, tx *sql.Tx, it NewItem) (id ItemID, existed bool, err error) {
	if err := checkNewItem(it); err != nil {
		return 0, false, err
	}
	return s.enqueue(ctx, tx, it, s.Notifies() && !it.NextAt.After(it.Now))
}

// querier is what enqueue needs of a connection or a transaction.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	execer
}

// storedText is s as the store writes a text it did not choose (an error's text, a breaker's
// key, an operator's reason): valid UTF-8 without NUL bytes, each NUL and each invalid byte
// replaced by U+FFFD. PostgreSQL's text holds neither, and refusing one would leave the outcome
// it belongs to unrecorded; both engines store the same text.
func storedText(s string) string {
	if strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", "\uFFFD"), "\uFFFD")
}

func checkNewItem(it NewItem) error {
	switch {
	case it.Name == "":
		return errors.New("durable: Enqueue: empty name")
	case it.Priority < 0 || it.Priority > MaxPriority:
		return fmt.Errorf("durable: Enqueue %s: priority %d is out of range 0..%d", it.Name, it.Priority, MaxPriority)
	case it.HeadStart < 0:
		return fmt.Errorf("durable: Enqueue %s: head start %v is negative", it.Name, it.HeadStart)
	}
	return checkDebounce(it)
}

// fairnessKey is the key it is claimed in turn with: its own, else its guard's, else its name.
func fairnessKey(it NewItem) string {
	switch {
	case it.FairnessKey != "":
		return it.FairnessKey
	case it.GuardKey != "":
		return it.GuardKey
	}
	return it.Name
}

// byTokenSQL finds the item holding a token.
const byTokenSQL = `SELECT id FROM ` + allItems + ` WHERE token = ?`

// lookupRow runs a statement of the enqueue's conflicts (the item holding a token or a dedupe
// key) on db and scans its one row into dest (sql.ErrNoRows when it returns none), planned for
// this run: a plan kept from an idle spell read the whole table for every conflicting enqueue
// of a burst. On the store's own pool in one batch (replannedRows); in an application's
// transaction (EnqueueTx) with the transaction's setting put back after (replannedInTx).
func (s *Store) lookupRow(ctx context.Context, db querier, stmt string, args []any, dest ...any) error {
	if pool, ok := db.(*sql.DB); !ok || pool != s.db {
		return s.e.replannedInTx(ctx, db, func() error { return db.QueryRowContext(ctx, stmt, args...).Scan(dest...) })
	}
	return s.readRows(ctx, stmt, args, oneRow(dest...))
}

// lookupExec runs a write of the enqueue's conflicts (the release of a dedupe key whose window
// ended) on db, as lookupRow runs its lookups.
func (s *Store) lookupExec(ctx context.Context, db querier, stmt string, args []any) error {
	if pool, ok := db.(*sql.DB); !ok || pool != s.db {
		return s.e.replannedInTx(ctx, db, func() error {
			_, err := db.ExecContext(ctx, stmt, args...)
			return err
		})
	}
	_, err := s.e.replannedCount(ctx, s.db, stmt, args)
	return err
}

// enqueue inserts it through db; notify: with the statement that notifies ItemsChannel
// (PostgreSQL).
func (s *Store) enqueue(ctx context.Context, db querier, it NewItem, notify bool) (id ItemID, existed bool, err error) {
	if it.Payload == nil {
		it.Payload = []byte{}
	}
	it.LastError, it.ParkedKey, it.GuardKey = storedText(it.LastError), storedText(it.ParkedKey), storedText(it.GuardKey)
	if it.DebounceKey != "" {
		// Due a window after now by construction: not notified, found by the schedulers' polls.
		return s.debounce(ctx, db, it)
	}
	var deadline, uniqueFor any
	deferred := 0
	if it.Deferred {
		deferred = 1
	}
	if !it.Deadline.IsZero() {
		deadline = micros(it.Deadline)
	}
	if it.UniqueFor > 0 {
		uniqueFor = it.UniqueFor.Microseconds()
	}
	st := s.e.stmts()
	insert := st.insert
	if notify {
		insert = s.e.(*postgresEngine).insertNotify
	}
	for range 5 {
		var v int64
		err = db.QueryRowContext(ctx, insert,
			it.Name, it.Payload, string(StatePending), nullString(it.DedupeKey), nullString(it.OrderingKey),
			micros(it.NextAt), nullString(it.LastError), nullString(it.ParkedKey), micros(it.Now), micros(it.Now),
			nullString(string(it.Metadata)), nullString(it.Token), nullString(it.GuardKey), deadline, uniqueFor, deferred,
			storedText(fairnessKey(it)), it.Priority, it.HeadStart.Microseconds(), nullString(it.Reference)).Scan(&v)
		if err == nil {
			return ItemID(v), false, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			err = fmt.Errorf("durable: enqueue: %w", err)
			if !s.e.notApplied(err) {
				err = &UnknownOutcomeError{Err: err}
			}
			return 0, false, err
		}
		// A conflict on the token or the dedupe key: report the item holding it. The dedupe
		// key's item may finish (or be released) in between; then the insert is tried again.
		if it.Token != "" {
			err = s.lookupRow(ctx, db, st.byToken, []any{it.Token}, &v)
			if err == nil {
				return ItemID(v), true, nil
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return 0, false, fmt.Errorf("durable: enqueue: nothing inserted (the token or the dedupe key is taken), and finding the item holding it failed: %w", err)
			}
		}
		if it.DedupeKey == "" {
			continue // the token's item was pruned in between: try again
		}
		var (
			state           string
			updated, window sql.NullInt64
		)
		err = s.lookupRow(ctx, db, st.byDedupe, []any{it.DedupeKey}, &v, &state, &updated, &window)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return 0, false, fmt.Errorf("durable: enqueue: nothing inserted (the dedupe key is taken), and finding the item holding it failed: %w", err)
		}
		if State(state) != StateSucceeded || updated.Int64+window.Int64 > micros(it.Now) {
			return ItemID(v), true, nil
		}
		// The holder's window has ended: release it, and try the insert again. Of enqueues
		// releasing it at once, one updates the row; the unique index lets one insert in.
		if err := s.lookupExec(ctx, db, st.release, []any{micros(it.Now), v, micros(it.Now)}); err != nil {
			// Nothing is inserted either way: whether the release took effect does not matter
			// (the next enqueue of the key releases the item if it did not).
			return 0, false, fmt.Errorf("durable: enqueue: nothing inserted (the dedupe key's window ended), and releasing the item holding it failed: %w", err)
		}
	}
	return 0, false, errors.New("durable: enqueue: the token or dedupe key kept changing hands")
}

// ItemByToken returns the item holding token; sql.ErrNoRows (wrapped) if there is none.
func (s *Store) ItemByToken(ctx context.Context, token string) (Item, error) {
	it, err := s.readItem(ctx, s.e.stmts().itemByToken, []any{token})
	if err != nil {
		return Item{}, fmt.Errorf("durable: item with token %q: %w", token, err)
	}
	return it, nil
}

// itemByTokenSQL reads the item holding a token whole.
const itemByTokenSQL = "SELECT " + itemColumns + " FROM " + allItems + " WHERE token = ?"

const itemColumns = "id, name, payload, state, attempts, interruptions, unattributed, isolate, parked_key, dedupe_key, ordering_key, next_at, lease_owner, lease_until, claimed_at, last_error, created_at, updated_at, metadata, token, guard_key, deadline, unique_for, unique_released_at, fair_key, priority, debounce_key, debounce_until, debounces, reference"

type rowScanner interface{ Scan(dest ...any) error }

func scanItem(r rowScanner) (Item, int64, error) { return newItemScan().scan(r) }

// claimColumns are the columns a claim returns: those of itemColumns whose values the claim did
// not itself set (state, lease owner, lease until, claimed at, updated at come from its
// arguments; see readClaims), and deferred (Claimed.Deferred).
const claimColumns = "id, name, payload, attempts, interruptions, unattributed, isolate, parked_key, dedupe_key, ordering_key, next_at, last_error, created_at, metadata, token, guard_key, deadline, deferred, fair_key, priority"

// itemScan holds the destinations of an item row's columns. Scanning through it allocates the
// destinations once for all the rows of a result, not once per column per row (each pointer to
// a local passed to Scan escapes).
type itemScan struct {
	it                                          Item
	id, nextAt, createdAt, updatedAt, isolate   int64
	deferred                                    int64 // claimColumns only
	leaseUntil, claimedAt, deadline             sql.NullInt64
	uniqueFor, released, debounceUntil          sql.NullInt64
	state                                       string
	dedupe, ordering, owner, lastErrStr, parked sql.NullString
	metadata, token, guard, debounce            sql.NullString
	reference                                   sql.NullString
	dest                                        []any
}

func newItemScan() *itemScan {
	s := &itemScan{}
	s.dest = []any{&s.id, &s.it.Name, &s.it.Payload, &s.state, &s.it.Attempts, &s.it.Interruptions, &s.it.Unattributed, &s.isolate, &s.parked,
		&s.dedupe, &s.ordering, &s.nextAt, &s.owner, &s.leaseUntil, &s.claimedAt, &s.lastErrStr, &s.createdAt, &s.updatedAt, &s.metadata, &s.token, &s.guard, &s.deadline, &s.uniqueFor, &s.released,
		&s.it.FairnessKey, &s.it.Priority, &s.debounce, &s.debounceUntil, &s.it.Debounces, &s.reference}
	return s
}

// newClaimScan returns an itemScan of claimColumns for a claim made with args (claimArgs): the
// columns the claim set are taken from its arguments.
func newClaimScan(args []any) *itemScan {
	s := &itemScan{state: string(StateRunning)}
	s.owner.String, s.owner.Valid = args[0].(string)
	s.leaseUntil.Int64, s.leaseUntil.Valid = args[1].(int64)
	s.claimedAt.Int64, s.claimedAt.Valid = args[2].(int64)
	s.updatedAt, _ = args[3].(int64)
	s.dest = []any{&s.id, &s.it.Name, &s.it.Payload, &s.it.Attempts, &s.it.Interruptions, &s.it.Unattributed, &s.isolate, &s.parked,
		&s.dedupe, &s.ordering, &s.nextAt, &s.lastErrStr, &s.createdAt, &s.metadata, &s.token, &s.guard, &s.deadline, &s.deferred, &s.it.FairnessKey, &s.it.Priority}
	return s
}

// scan reads one row (of itemColumns, or claimColumns) and returns its item and claimed_at.
func (s *itemScan) scan(r rowScanner) (Item, int64, error) {
	s.it = Item{}
	if err := r.Scan(s.dest...); err != nil {
		return Item{}, 0, err
	}
	it := s.it
	it.ID = ItemID(s.id)
	it.Isolate, it.ParkedKey = s.isolate != 0, s.parked.String
	it.State = State(s.state)
	it.DedupeKey, it.OrderingKey, it.LeaseOwner, it.LastError = s.dedupe.String, s.ordering.String, s.owner.String, s.lastErrStr.String
	it.NextAt, it.LeaseUntil = fromMicros(s.nextAt), fromMicros(s.leaseUntil.Int64)
	it.CreatedAt, it.UpdatedAt = fromMicros(s.createdAt), fromMicros(s.updatedAt)
	if s.metadata.Valid {
		it.Metadata = []byte(s.metadata.String)
	}
	it.Token, it.GuardKey, it.Reference = s.token.String, s.guard.String, s.reference.String
	if s.deadline.Valid {
		it.Deadline = fromMicros(s.deadline.Int64)
	}
	it.UniqueFor, it.UniqueReleasedAt = time.Duration(s.uniqueFor.Int64)*time.Microsecond, fromMicros(s.released.Int64)
	it.DebounceKey, it.DebounceUntil = s.debounce.String, fromMicros(s.debounceUntil.Int64)
	return it, s.claimedAt.Int64, nil
}

// Item returns one item; sql.ErrNoRows (wrapped) if there is none.
func (s *Store) Item(ctx context.Context, id ItemID) (Item, error) {
	it, err := s.readItem(ctx, s.e.rebind("SELECT "+itemColumns+" FROM "+allItems+" WHERE id = ?"), []any{int64(id)})
	if err != nil {
		return Item{}, fmt.Errorf("durable: item %d: %w", id, err)
	}
	return it, nil
}

// List returns items in id order, filtered by f.
func (s *Store) List(ctx context.Context, f Filter) ([]Item, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	q := "SELECT " + itemColumns + " FROM " + allItems + " WHERE id > ?"
	args := []any{int64(f.AfterID)}
	if f.State != "" {
		q += " AND state = ?"
		args = append(args, string(f.State))
	}
	if f.Name != "" {
		q += " AND name = ?"
		args = append(args, f.Name)
	}
	q += " ORDER BY id LIMIT ?"
	args = append(args, limit)
	rows, err := s.db.QueryContext(ctx, s.e.rebind(q), args...)
	if err != nil {
		return nil, fmt.Errorf("durable: list: %w", err)
	}
	defer rows.Close()
	var out []Item
	sc := newItemScan()
	for rows.Next() {
		it, _, err := sc.scan(rows)
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

// attemptsSQL lists the attempts of an item (placeholder: its id) in order: its attempt rows
// and the success recorded on the item, unless a row says it too (the completion wrote one:
// Completion.SuccessRow, or an instance of a version before the success moved to the item).
const attemptsSQL = `SELECT id, item_id, attempt, instance, started_at, ended_at, outcome, error
FROM switchboard_attempts WHERE item_id = ?1
UNION ALL
SELECT i.success_id, i.id, i.attempts, i.success_instance, i.success_started_at, i.success_ended_at, 'succeeded', NULL
FROM ` + allItems + ` i
WHERE i.id = ?1 AND i.success_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM switchboard_attempts a WHERE a.item_id = i.id AND a.attempt = i.attempts)
ORDER BY 3`

// wantsSuccessRow reports whether a completion of cs asks for its success's own attempt row.
func wantsSuccessRow(cs []Completion) bool {
	for i := range cs {
		if cs[i].SuccessRow && cs[i].Outcome == OutcomeSucceeded {
			return true
		}
	}
	return false
}

// Attempts lists the attempts of an item in order.
func (s *Store) Attempts(ctx context.Context, id ItemID) ([]Attempt, error) {
	var out []Attempt
	err := s.readRows(ctx, s.numbered(attemptsSQL), []any{int64(id)}, func(rows RowReader) error {
		for rows.Next() {
			var (
				a              Attempt
				itemID         int64
				started, ended int64
				outcome        string
				errStr         sql.NullString
			)
			if err := rows.Scan(&a.ID, &itemID, &a.Number, &a.Instance, &started, &ended, &outcome, &errStr); err != nil {
				return err
			}
			a.ItemID, a.StartedAt, a.EndedAt, a.Outcome, a.Error = ItemID(itemID), fromMicros(started), fromMicros(ended), Outcome(outcome), errStr.String
			out = append(out, a)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("durable: attempts: %w", err)
	}
	return out, nil
}

// Claim leases up to limit due pending items to owner until now+lease and returns them in id
// order. An item with an ordering key is claimed only when no earlier item with that key is
// pending or running, and one with a debounce key only when no earlier item of its name and
// debounce key is. Each claim adds one to the item's attempt count; the new count is the
// attempt number of the claim's Fence. Items to be isolated are left out: ClaimIsolated takes
// them one at a time. Items whose request name is paused at now (SetPause) are left out, by
// every claim.
func (s *Store) Claim(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]Claimed, error) {
	return s.claim(ctx, s.e.stmts().claim, owner, now, lease, limit, false)
}

// ClaimAlone is Claim for a claimer that runs its items alone (a scheduler with one worker): a
// crash while one of them runs is its own.
func (s *Store) ClaimAlone(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]Claimed, error) {
	return s.claim(ctx, s.e.stmts().claim, owner, now, lease, limit, true)
}

// ClaimIsolated leases the oldest due item marked Isolate (its last lease ran out while it ran),
// if there is one, to run alone: the claimer runs nothing else while it holds it, so that an
// item whose handler kills its process is the only one charged for the crash.
func (s *Store) ClaimIsolated(ctx context.Context, owner string, now time.Time, lease time.Duration) ([]Claimed, error) {
	return s.claim(ctx, s.e.stmts().claimIsolated, owner, now, lease, 1, true)
}

// IsolatedDue reports whether an item to be run alone, whose request name is not paused, is due
// at now.
func (s *Store) IsolatedDue(ctx context.Context, now time.Time) (bool, error) {
	var one int
	err := s.e.indexedRow(ctx, s.db, s.e.stmts().isolatedDue, []any{micros(now), micros(now)}, &one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("durable: isolated due: %w", err)
	}
	return true, nil
}

// Unpark makes the pending items waiting on the circuit breakers of keys due at now (unless
// they are due sooner) and returns how many it freed. Call it when those breakers close. A
// running item parked on one of the keys (claimed items keep their keys) is touched too,
// harmlessly: its completion sets its next due time and key.
func (s *Store) Unpark(ctx context.Context, keys []string, now time.Time) (int, error) {
	total := 0
	for _, k := range keys {
		n, err := s.e.replannedCount(ctx, s.db, s.e.stmts().unpark, []any{micros(now), k})
		if err != nil {
			return total, fmt.Errorf("durable: unpark: %w", err)
		}
		total += n
	}
	return total, nil
}

// Repark makes the pending items waiting on the circuit breaker of key due at a time drawn
// uniformly from [at, at+spread] for each (never after its deadline), and returns how many it
// moved. Call it when that breaker opens again: the items wait for its next probe, spread so
// that they do not all come back in one claim.
func (s *Store) Repark(ctx context.Context, key string, at time.Time, spread time.Duration) (int, error) {
	n, err := s.e.replannedCount(ctx, s.db, s.e.stmts().repark, []any{micros(at), max(spread.Microseconds(), 0), key})
	if err != nil {
		return 0, fmt.Errorf("durable: repark: %w", err)
	}
	return n, nil
}

func (s *Store) claim(ctx context.Context, stmt, owner string, now time.Time, lease time.Duration, limit int, alone bool) ([]Claimed, error) {
	if limit <= 0 {
		return nil, nil
	}
	args := claimArgs(owner, now, lease, limit, alone)
	var w *fairWindow
	if stmt == s.e.stmts().claim {
		w = s.fair.open()
		args = append(args, w)
	}
	out, err := s.e.claim(ctx, s.db, stmt, args)
	if err != nil {
		return nil, fmt.Errorf("durable: claim: %w", err)
	}
	s.fair.close(w)
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

// RowReader is what reading a result needs, from database/sql and from a driver's batch alike.
// It is an alias of an unnamed type, as BatchQuery is.
type RowReader = interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// scanClaims reads the rows of a claim made with args (claimArgs) that reports no fair window
// (SQLite's; PostgreSQL's claims are read in their batch by readClaims).
func scanClaims(args []any, rows *sql.Rows, err error) ([]Claimed, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return readClaims(rows, args, nil)
}

// readClaims reads the rows (of claimColumns) of a claim made with args (claimArgs). With a
// window w, each row has one more column, where the next fair claim's window starts, which
// w is given.
func readClaims(rows RowReader, args []any, w *fairWindow) ([]Claimed, error) {
	var (
		out  []Claimed
		sc   *itemScan
		next sql.NullString
	)
	for rows.Next() {
		if sc == nil {
			limit, _ := args[6].(int)
			out, sc = make([]Claimed, 0, limit), newClaimScan(args)
			if w != nil {
				sc.dest = append(sc.dest, &next)
			}
		}
		it, claimedAt, err := sc.scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, Claimed{ItemRow: it, ClaimedAt: fromMicros(claimedAt), Deferred: sc.deferred != 0})
	}
	if w != nil && len(out) > 0 {
		w.next, w.reported = next.String, true
	}
	return out, rows.Err()
}

// checkCompletions refuses a completion whose next state is not one a lease can end in, and
// makes the texts of the others storable (storedText).
func checkCompletions(cs []Completion) error {
	for i := range cs {
		cs[i].Error, cs[i].ParkedKey = storedText(cs[i].Error), storedText(cs[i].ParkedKey)
	}
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
		if !c.Stored && !accepted[c.Fence] {
			out[i] = &LeaseLostError{Fence: c.Fence}
		}
	}
	return out
}

func completionUndo(c Completion) int {
	if c.Outcome == "" {
		return 1
	}
	return 0
}

func inTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
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
	if w := unstored(cs); len(w) == 0 {
		return leaseResults(cs, accepted), nil
	} else if err := s.e.complete(ctx, s.db, w, accepted); err != nil {
		return nil, fmt.Errorf("durable: complete: %w", err)
	}
	return leaseResults(cs, accepted), nil
}

// CompleteAndClaim writes completions and claims up to limit items in one round trip and one
// transaction: the outcomes of the items that finished are stored before, and together with,
// the claim of the items that start next. The claim leaves out items to be isolated, and runs
// its items alone when alone is set.
func (s *Store) CompleteAndClaim(ctx context.Context, cs []Completion, owner string, now time.Time, lease time.Duration,
	limit int, alone bool) ([]error, []Claimed, error) {
	if err := checkCompletions(cs); err != nil {
		return nil, nil, err
	}
	accepted := make(map[Fence]bool, len(cs))
	w := s.fair.open()
	claimed, err := s.e.completeAndClaim(ctx, s.db, unstored(cs), append(claimArgs(owner, now, lease, limit, alone), w), accepted)
	if err != nil {
		return nil, nil, fmt.Errorf("durable: complete and claim: %w", err)
	}
	s.fair.close(w)
	slices.SortFunc(claimed, func(a, b Claimed) int { return cmp.Compare(a.ID, b.ID) })
	return leaseResults(cs, accepted), claimed, nil
}

// Extend moves the lease of owner's running items ids to until. Items no longer running under
// owner are left alone.
func (s *Store) Extend(ctx context.Context, owner string, ids []ItemID, until time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	if err := s.e.extend(ctx, s.db, owner, ids, until); err != nil {
		return fmt.Errorf("durable: extend: %w", err)
	}
	return nil
}

// Sweep returns running items whose lease expired before now to pending, due at now, and
// records each lost attempt as an OutcomeAbandoned row. A swept item is marked Isolate, so its
// next claim runs it alone; an attempt abandoned while it ran beside other items counts as
// Unattributed. It returns how many it swept.
func (s *Store) Sweep(ctx context.Context, now time.Time) (int, error) {
	n, err := s.e.sweep(ctx, s.db, now)
	if err != nil {
		return 0, fmt.Errorf("durable: sweep: %w", err)
	}
	return n, nil
}

// Database is what a driver package (durable/sqlite, durable/postgres) gives durable.Open: the
// pool, the engine of its database, and whether the queue owns the pool (and so closes it).
type Database struct {
	DB     *sql.DB
	Engine Engine
	Owned  bool
}

// Open connects to d's database (Connect) and returns its Store; on an error it closes the
// pool if d owns it.
func (d Database) Open(ctx context.Context) (*Store, error) {
	if err := Connect(ctx, d.DB, d.Engine); err != nil {
		if d.Owned {
			_ = d.DB.Close()
		}
		return nil, err
	}
	return New(d.DB, d.Engine, d.Owned), nil
}
