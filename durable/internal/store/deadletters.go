package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-go/switchboard/durable/driver"
	"github.com/switchboard-go/switchboard/durable/record"
)

// execer is what insertEvent needs of a pool or a transaction.
type execer = driver.Execer

// deadLetterWhere returns the WHERE clause (with a leading space) and arguments of f's conditions.
func deadLetterWhere(f DeadLetterFilter) (string, []any) {
	where := " WHERE status = ?"
	args := []any{string(f.Status)}
	if f.Source != "" {
		where += " AND source = ?"
		args = append(args, f.Source)
	}
	if !f.From.IsZero() {
		where += " AND created_at >= ?"
		args = append(args, micros(f.From))
	}
	if !f.To.IsZero() {
		where += " AND created_at < ?"
		args = append(args, micros(f.To))
	}
	if f.ErrorContains != "" {
		where += ` AND LOWER(error) LIKE ? ESCAPE '\'`
		args = append(args, "%"+likeEscaper.Replace(strings.ToLower(f.ErrorContains))+"%")
	}
	return where, args
}

// likeEscaper escapes the wildcards of a LIKE pattern (the escape character is a backslash).
var likeEscaper = strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`)

// insertItemDeadLetterSQL captures the dead letter of an item that was just completed as
// dead, from the item row as the completion left it, in the completion's transaction (SQLite).
// The unique index on item_id makes a second capture of the same item a no-op. Placeholders:
// the completion's cause (NULL when not known), the item's id.
const insertItemDeadLetterSQL = `INSERT INTO switchboard_dead_letters
	(item_id, source, name, item_key, payload, error, status, retry_count, created_at, updated_at, metadata, cause)
	SELECT id, name, name, COALESCE(dedupe_key, ''), payload, COALESCE(last_error, ''), 'failed', 0, updated_at, updated_at, metadata, ?
	FROM switchboard_items WHERE id = ?
	ON CONFLICT DO NOTHING`

// deadLetterColumns are the columns a letter is scanned from (scanDeadLetter), read from
// switchboard_dead_letters as d, with the guard key of its item (by its primary key: one
// lookup per letter read).
const deadLetterColumns = "d.id, d.item_id, d.source, d.name, d.item_key, d.payload, d.error, d.status, d.retry_count, d.replay_owner, d.replay_until, d.created_at, d.updated_at, d.metadata, d.cause, " +
	"(SELECT COALESCE(i.guard_key, '') FROM " + allItems + " i WHERE i.id = d.item_id)"

// deadLetterReturning are the columns of deadLetterColumns as an UPDATE's RETURNING gives
// them: the letter's own, and no guard key (its readers do not show it).
const deadLetterReturning = "id, item_id, source, name, item_key, payload, error, status, retry_count, replay_owner, replay_until, created_at, updated_at, metadata, cause, ''"

func scanDeadLetter(r rowScanner) (DeadLetter, error) {
	var (
		d                        DeadLetter
		id, createdAt, updatedAt int64
		itemID, replayUntil      sql.NullInt64
		status                   string
		owner, metadata, cause   sql.NullString
		guardKey                 sql.NullString
	)
	if err := r.Scan(&id, &itemID, &d.Source, &d.Name, &d.Key, &d.Payload, &d.Error, &status, &d.RetryCount, &owner,
		&replayUntil, &createdAt, &updatedAt, &metadata, &cause, &guardKey); err != nil {
		return DeadLetter{}, err
	}
	if metadata.Valid {
		d.Metadata = []byte(metadata.String)
	}
	d.ID, d.ItemID, d.Status, d.Cause = DeadLetterID(id), ItemID(itemID.Int64), DeadLetterStatus(status), record.DeadCause(cause.String)
	d.ReplayOwner, d.ReplayUntil, d.GuardKey = owner.String, fromMicros(replayUntil.Int64), guardKey.String
	d.CreatedAt, d.UpdatedAt = fromMicros(createdAt), fromMicros(updatedAt)
	return d, nil
}

// readDeadLetters appends the letters of rows to out.
func readDeadLetters(rows RowReader, out *[]DeadLetter) error {
	for rows.Next() {
		d, err := scanDeadLetter(rows)
		if err != nil {
			return err
		}
		*out = append(*out, d)
	}
	return rows.Err()
}

// InsertDeadLetter captures a dead letter that no item stands behind and returns its id.
func (s *Store) InsertDeadLetter(ctx context.Context, d NewDeadLetter) (DeadLetterID, error) {
	if d.Payload == nil {
		d.Payload = []byte{}
	}
	var id int64
	err := s.db.QueryRowContext(ctx, s.e.rebind(`INSERT INTO switchboard_dead_letters
	(source, name, item_key, payload, error, status, retry_count, created_at, updated_at, metadata)
	VALUES (?, ?, ?, ?, ?, 'failed', 0, ?, ?, ?) RETURNING id`),
		d.Source, d.Name, d.Key, d.Payload, storedText(d.Error), micros(d.Now), micros(d.Now), nullString(string(d.Metadata))).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("durable: capture dead letter: %w", err)
	}
	return DeadLetterID(id), nil
}

// DeadLetters returns the letters f selects, newest first, and how many match in all, or
// f.CountLimit+1 when f.CountLimit is positive and more than it match: the count stops there
// (through the listing's index, a LIMIT ends the scan). Both are planned for this run
// (replannedRows): a dashboard polls them every few seconds, and the plans a connection kept
// from the days of a few letters read them all once they were many.
func (s *Store) DeadLetters(ctx context.Context, f DeadLetterFilter) ([]DeadLetter, int, error) {
	where, args := deadLetterWhere(f)
	count, countArgs := deadLetterCount(f)
	var total int
	if err := s.readRows(ctx, s.e.rebind(count), countArgs, oneRow(&total)); err != nil {
		return nil, 0, fmt.Errorf("durable: dead letters: %w", err)
	}
	q := "SELECT " + deadLetterColumns + " FROM switchboard_dead_letters d" + where + " ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?"
	var out []DeadLetter
	err := s.readRows(ctx, s.e.rebind(q), append(args, f.Limit, f.Offset), func(rows RowReader) error { return readDeadLetters(rows, &out) })
	if err != nil {
		return nil, 0, fmt.Errorf("durable: dead letters: %w", err)
	}
	return out, total, nil
}

// deadLetterCount returns the statement, and its arguments, that counts the letters f selects
// for DeadLetters: up to f.CountLimit+1 when f.CountLimit is positive (a LIMIT ends the scan
// of the listing's index there), all of them otherwise.
func deadLetterCount(f DeadLetterFilter) (string, []any) {
	where, args := deadLetterWhere(f)
	if f.CountLimit <= 0 {
		return "SELECT COUNT(*) FROM switchboard_dead_letters" + where, args
	}
	return "SELECT COUNT(*) FROM (SELECT 1 FROM switchboard_dead_letters" + where + " LIMIT ?) c", append(args, f.CountLimit+1)
}

// DeadLetter returns one letter; found is false when there is none.
func (s *Store) DeadLetter(ctx context.Context, id DeadLetterID) (d DeadLetter, found bool, err error) {
	err = s.readRows(ctx, s.e.rebind("SELECT "+deadLetterColumns+" FROM switchboard_dead_letters d WHERE id = ?"), []any{int64(id)},
		firstRow(func(r rowScanner) (err error) { d, err = scanDeadLetter(r); return err }))
	if errors.Is(err, sql.ErrNoRows) {
		return DeadLetter{}, false, nil
	}
	if err != nil {
		return DeadLetter{}, false, fmt.Errorf("durable: dead letter %d: %w", id, err)
	}
	return d, true, nil
}

// DeadLettersOfItems returns the letters of the dead items ids, in id order.
func (s *Store) DeadLettersOfItems(ctx context.Context, ids []ItemID) ([]DeadLetter, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = int64(id)
	}
	q := "SELECT " + deadLetterColumns + " FROM switchboard_dead_letters d WHERE item_id IN (?" + strings.Repeat(", ?", len(ids)-1) + ") ORDER BY id"
	var out []DeadLetter
	if err := s.readRows(ctx, s.e.rebind(q), args, func(rows RowReader) error { return readDeadLetters(rows, &out) }); err != nil {
		return nil, fmt.Errorf("durable: dead letters of items: %w", err)
	}
	return out, nil
}

// Events lists the events of a letter in order.
func (s *Store) Events(ctx context.Context, id DeadLetterID) ([]Event, error) {
	var out []Event
	err := s.readRows(ctx, s.e.rebind(`SELECT id, dead_letter_id, kind, actor, started_at, ended_at, outcome, error, reason, bulk_action_id
	FROM switchboard_dead_letter_events WHERE dead_letter_id = ? ORDER BY id`), []any{int64(id)}, func(rows RowReader) error {
		for rows.Next() {
			var (
				e              Event
				dl             int64
				started, ended int64
				errStr, reason sql.NullString
				bulk           sql.NullInt64
			)
			if err := rows.Scan(&e.ID, &dl, &e.Kind, &e.Actor, &started, &ended, &e.Outcome, &errStr, &reason, &bulk); err != nil {
				return err
			}
			e.DeadLetterID, e.StartedAt, e.EndedAt, e.Error, e.Reason = DeadLetterID(dl), fromMicros(started), fromMicros(ended), errStr.String, reason.String
			e.BulkAction = bulk.Int64
			out = append(out, e)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("durable: dead letter events: %w", err)
	}
	return out, nil
}

// DeadLetterCounts counts the letters by status, each up to limit, every status present: a
// status with more letters than limit is counted as limit+1 and named in over. Each count
// reads at most limit+1 entries of the listing index: letters are kept for good.
func (s *Store) DeadLetterCounts(ctx context.Context, limit int) (counts map[DeadLetterStatus]int, over map[DeadLetterStatus]bool, err error) {
	if limit < 1 {
		return nil, nil, fmt.Errorf("durable: dead letter counts: the limit is %d, not positive", limit)
	}
	n := map[DeadLetterStatus]int64{}
	err = s.readRows(ctx, s.e.rebind(boundedLetterCountsSQL), []any{limit + 1, limit + 1, limit + 1}, func(rows RowReader) error { return readCounts(rows, n) })
	if err != nil {
		return nil, nil, fmt.Errorf("durable: dead letter counts: %w", err)
	}
	counts, over = make(map[DeadLetterStatus]int, len(letterStatuses)), map[DeadLetterStatus]bool{}
	for _, st := range letterStatuses {
		counts[st] = int(n[st])
		if n[st] > int64(limit) {
			over[st] = true
		}
	}
	return counts, over, nil
}

// CountLetterStatuses counts the letters of each of statuses in full: what DeadLetterCounts
// leaves out above its limit.
func (s *Store) CountLetterStatuses(ctx context.Context, statuses []DeadLetterStatus) (map[DeadLetterStatus]int, error) {
	n, err := countIn(ctx, s, "switchboard_dead_letters", "status", "a letter status", letterStatuses, statuses)
	if err != nil {
		return nil, fmt.Errorf("durable: count dead letters: %w", err)
	}
	out := make(map[DeadLetterStatus]int, len(n))
	for st, c := range n {
		out[st] = int(c)
	}
	return out, nil
}

// letterStatuses are the statuses DeadLetterCounts counts, in the order of
// boundedLetterCountsSQL.
var letterStatuses = []DeadLetterStatus{DeadLetterFailed, DeadLetterReplayed, DeadLetterDiscarded}

// boundedLetterCountsSQL counts the letters of each status up to a bound, each through the
// listing index, which leads with the status. Placeholders: the bound, once per status.
var boundedLetterCountsSQL = boundedCounts(letterStatuses, func(DeadLetterStatus) string { return "switchboard_dead_letters" }, "status")

// LeaseReplay leases the failed letter id to owner (a replay by actor) until until, if no other
// replay holds an unexpired lease on it at now: a conditional update, no transaction held while
// the replay runs. A lease that ran out while its replay was still its owner (the replaying
// process died or lost the database) is recorded first, in the same transaction, as an
// abandoned replay event, so the timeline shows every replay that started. It returns the
// letter as leased (Done), or says why not (Missing, Busy).
func (s *Store) LeaseReplay(ctx context.Context, id DeadLetterID, owner, actor string, now, until time.Time) (DeadLetter, LeaseResult, error) {
	var d DeadLetter
	err := inTx(ctx, s.db, func(tx *sql.Tx) error {
		if err := s.recordAbandoned(ctx, tx, id, now); err != nil {
			return err
		}
		var err error
		d, err = scanDeadLetter(tx.QueryRowContext(ctx, s.e.rebind(`UPDATE switchboard_dead_letters
	SET replay_owner = ?, replay_until = ?, replay_actor = ?, replay_started = ?
	WHERE id = ? AND status = 'failed' AND (replay_until IS NULL OR replay_until <= ?)
	RETURNING `+deadLetterReturning), owner, micros(until), actor, micros(now), int64(id), micros(now)))
		return err // sql.ErrNoRows rolls the abandoned event back: another replay holds the letter
	})
	if err == nil {
		return d, Done, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return DeadLetter{}, 0, fmt.Errorf("durable: lease dead letter %d: %w", id, err)
	}
	d, found, err := s.DeadLetter(ctx, id)
	switch {
	case err != nil:
		return DeadLetter{}, 0, err
	case !found:
		return DeadLetter{}, Missing, nil
	}
	return d, Busy, nil
}

// abandonedReplay is the error of an abandoned replay event: the replay's outcome was never
// recorded, so whether its handler ran, and how it ended, is not known.
const abandonedReplay = "outcome unknown: the replay's outcome was never recorded (its process died or lost the database) and its lease ran out; its handler may have run, and succeeded"

// ExtendReplay moves owner's replay lease on id to until; it reports false when owner no
// longer holds it.
func (s *Store) ExtendReplay(ctx context.Context, id DeadLetterID, owner string, until time.Time) (bool, error) {
	res, err := s.db.ExecContext(ctx, s.e.rebind(`UPDATE switchboard_dead_letters SET replay_until = ?
	WHERE id = ? AND replay_owner = ? AND status = 'failed'`), micros(until), int64(id), owner)
	if err != nil {
		return false, fmt.Errorf("durable: extend replay lease of dead letter %d: %w", id, err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// ReleaseReplay gives up owner's replay lease on id without recording anything (the replay
// did not run to an outcome: its caller gave up).
func (s *Store) ReleaseReplay(ctx context.Context, id DeadLetterID, owner string) error {
	_, err := s.db.ExecContext(ctx, s.e.rebind(`UPDATE switchboard_dead_letters SET replay_owner = NULL, replay_until = NULL
	WHERE id = ? AND replay_owner = ?`), int64(id), owner)
	if err != nil {
		return fmt.Errorf("durable: release replay lease of dead letter %d: %w", id, err)
	}
	return nil
}

// AbandonReplay frees the letter id leased to owner and appends ev, in one transaction, leaving
// its status, error and retry count as they are: a replay whose handler ran but whose caller
// gave up, so what the handler did is not known. It records nothing when owner no longer held
// the lease.
func (s *Store) AbandonReplay(ctx context.Context, id DeadLetterID, owner string, ev Event) error {
	err := inTx(ctx, s.db, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.e.rebind(`UPDATE switchboard_dead_letters SET replay_owner = NULL, replay_until = NULL
	WHERE id = ? AND replay_owner = ?`), int64(id), owner)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		return s.insertEvent(ctx, tx, id, ev)
	})
	if err != nil {
		return fmt.Errorf("durable: record abandoned replay of dead letter %d: %w", id, err)
	}
	return nil
}

// FinishReplay records a replay that ran, in one transaction: the letter (still leased to
// owner) becomes replayed (ok) or stays failed with ev.Error as its error, its retry count
// goes up by one, the lease is cleared, and ev is appended. It reports false, recording
// nothing, when owner no longer held the lease (it ran out and another replay took it).
func (s *Store) FinishReplay(ctx context.Context, id DeadLetterID, owner string, ok bool, ev Event) (bool, error) {
	status := DeadLetterFailed
	if ok {
		status = DeadLetterReplayed
	}
	var applied bool
	err := inTx(ctx, s.db, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.e.rebind(`UPDATE switchboard_dead_letters
	SET status = ?, retry_count = retry_count + 1, error = COALESCE(NULLIF(?, ''), error),
	    replay_owner = NULL, replay_until = NULL, updated_at = ?
	WHERE id = ? AND replay_owner = ? AND status = 'failed'`), string(status), storedText(ev.Error), micros(ev.EndedAt), int64(id), owner)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil || n == 0 {
			return err
		}
		applied = true
		return s.insertEvent(ctx, tx, id, ev)
	})
	if err != nil {
		return false, fmt.Errorf("durable: record replay of dead letter %d: %w", id, err)
	}
	return applied, nil
}

// ReplayRecorded reports whether ev, the event of a replay of id, is in the letter's timeline:
// a FinishReplay whose answer was lost may have committed all the same.
func (s *Store) ReplayRecorded(ctx context.Context, id DeadLetterID, ev Event) (bool, error) {
	var one int
	err := s.readRows(ctx, s.e.rebind(`SELECT 1 FROM switchboard_dead_letter_events
	WHERE dead_letter_id = ? AND kind = ? AND actor = ? AND started_at = ? AND ended_at = ? AND outcome = ?`),
		[]any{int64(id), ev.Kind, ev.Actor, micros(ev.StartedAt), micros(ev.EndedAt), string(ev.Outcome)}, oneRow(&one))
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("durable: look for the replay of dead letter %d: %w", id, err)
	}
	return true, nil
}

// recordAbandoned appends, in tx, the abandoned replay event of the failed letter id whose
// replay lease ran out at now while its replay was still its owner (the replaying process died
// or lost the database before it could record what its handler did): the timeline shows every
// replay that started, whatever takes the letter next.
func (s *Store) recordAbandoned(ctx context.Context, tx *sql.Tx, id DeadLetterID, now time.Time) error {
	_, err := tx.ExecContext(ctx, s.e.rebind(`INSERT INTO switchboard_dead_letter_events
	(dead_letter_id, kind, actor, started_at, ended_at, outcome, error, reason)
	SELECT id, 'replay', COALESCE(replay_actor, ''), COALESCE(replay_started, replay_until), replay_until, ?, ?, NULL
	FROM switchboard_dead_letters
	WHERE id = ? AND status = 'failed' AND replay_owner IS NOT NULL AND replay_until <= ?`),
		string(OutcomeAbandoned), abandonedReplay, int64(id), micros(now))
	return err
}

// Discard makes the failed letter id discarded and appends ev, in one transaction, unless a
// replay holds an unexpired lease on it at ev.EndedAt. A replay whose lease ran out before its
// outcome was recorded is recorded first, as abandoned (as LeaseReplay does), so a discarded
// letter's timeline still shows the replay whose handler may have had effects.
func (s *Store) Discard(ctx context.Context, id DeadLetterID, ev Event) (LeaseResult, error) {
	res := Busy
	err := inTx(ctx, s.db, func(tx *sql.Tx) error {
		if err := s.recordAbandoned(ctx, tx, id, ev.EndedAt); err != nil {
			return err
		}
		r, err := tx.ExecContext(ctx, s.e.rebind(`UPDATE switchboard_dead_letters
	SET status = 'discarded', replay_owner = NULL, replay_until = NULL, updated_at = ?
	WHERE id = ? AND status = 'failed' AND (replay_until IS NULL OR replay_until <= ?)`), micros(ev.EndedAt), int64(id), micros(ev.EndedAt))
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		if err != nil {
			return err
		}
		if n > 0 {
			res = Done
			return s.insertEvent(ctx, tx, id, ev)
		}
		var one int
		err = tx.QueryRowContext(ctx, s.e.rebind("SELECT 1 FROM switchboard_dead_letters WHERE id = ?"), int64(id)).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			res = Missing
			return nil
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("durable: discard dead letter %d: %w", id, err)
	}
	return res, nil
}

// AddEvent appends ev to the timeline of letter id.
func (s *Store) AddEvent(ctx context.Context, id DeadLetterID, ev Event) error {
	if err := s.insertEvent(ctx, s.db, id, ev); err != nil {
		return fmt.Errorf("durable: dead letter %d: add %s event: %w", id, ev.Kind, err)
	}
	return nil
}

func (s *Store) insertEvent(ctx context.Context, tx execer, id DeadLetterID, ev Event) error {
	_, err := tx.ExecContext(ctx, s.e.rebind(`INSERT INTO switchboard_dead_letter_events
	(dead_letter_id, kind, actor, started_at, ended_at, outcome, error, reason, bulk_action_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		int64(id), ev.Kind, storedText(ev.Actor), micros(ev.StartedAt), micros(ev.EndedAt), ev.Outcome, nullString(storedText(ev.Error)), nullString(storedText(ev.Reason)),
		sql.NullInt64{Int64: ev.BulkAction, Valid: ev.BulkAction != 0})
	return err
}
