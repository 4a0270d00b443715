package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// BreakerChannel is the PostgreSQL channel on which every change of switchboard_breakers is
// notified (a trigger of the table), with the payload "schema.name".
const BreakerChannel = "switchboard_breakers"

// breakerStatements are an engine's statements of switchboard_breakers.
type breakerStatements struct {
	// insert creates the row of a breaker at epoch 1 unless it has one. Placeholders: $1
	// name, $2 key, $3 state, $4 failures, $5 open for (µs), $6 probe for (µs), $7 owner, $8
	// the claim's token.
	insert string
	// update moves a breaker from the epoch $9; a move to half_open only once the open time
	// or the previous claim ran out. Placeholders as insert's, and $9 the epoch.
	update string
	// read is the row of $1 name, $2 key, with the database's now: one row always, with NULL
	// columns when the breaker has none.
	read string
	// load is the rows of $1 name not closed.
	load string
	// changes is the rows of $1 name whose seq is above $2, in seq order, at most $3.
	changes string
	// lastSeq is the largest seq of $1 name's rows (0: none).
	lastSeq string
}

// breakerColumns are the columns a breaker statement returns, then the database's now.
const breakerColumns = "key, state, epoch, failures, opened_at, open_until, probe_owner, probe_claim, probe_until, last_probe_at, by_instance, updated_at, seq"

// breakerSQL writes the breaker statements of one engine: param(n, type) is the engine's n-th
// placeholder (with PostgreSQL's cast), now its expression of the database clock in
// microseconds since the epoch, and seq the expression of a transition's change sequence
// number.
func breakerSQL(param func(n int, typ string) string, now, seq string, postgres bool) breakerStatements {
	p := func(s string) string {
		r := strings.NewReplacer(
			"{name}", param(1, "text"), "{key}", param(2, "text"), "{to}", param(3, "text"), "{failures}", param(4, "int"),
			"{openFor}", param(5, "bigint"), "{probeFor}", param(6, "bigint"), "{owner}", param(7, "text"), "{claim}", param(8, "text"), "{from}", param(9, "bigint"),
			"{after}", param(2, "bigint"), "{limit}", param(3, "int"), "{seq}", seq)
		return r.Replace(s)
	}
	// The times a transition sets, by the state it moves to. A close clears the open and the
	// probe times; an open starts a new open time; a claim of the probes keeps the open time
	// it follows and records the claim.
	const (
		openedAt    = `CASE {to} WHEN 'open' THEN n.db_now WHEN 'closed' THEN NULL ELSE %s END`
		openUntil   = `CASE {to} WHEN 'open' THEN n.db_now + {openFor} WHEN 'closed' THEN NULL ELSE %s END`
		probeOwner  = `CASE {to} WHEN 'half_open' THEN {owner} END`
		probeClaim  = `CASE {to} WHEN 'half_open' THEN NULLIF({claim}, '') END`
		probeUntil  = `CASE {to} WHEN 'half_open' THEN n.db_now + {probeFor} END`
		lastProbeAt = `CASE {to} WHEN 'half_open' THEN n.db_now ELSE %s END`
	)
	nowFrom := "(SELECT " + now + " AS db_now) n"
	var st breakerStatements
	values := "{name}, {key}, {to}, 1, {failures}, " + fmt.Sprintf(openedAt, "NULL") + ", " + fmt.Sprintf(openUntil, "NULL") + ", " +
		probeOwner + ", " + probeClaim + ", " + probeUntil + ", " + fmt.Sprintf(lastProbeAt, "NULL") + ", {owner}, n.db_now, {seq}"
	set := "state = {to}, epoch = b.epoch + 1, failures = {failures}, opened_at = " + fmt.Sprintf(openedAt, "b.opened_at") +
		", open_until = " + fmt.Sprintf(openUntil, "b.open_until") + ", probe_owner = " + probeOwner + ", probe_claim = " + probeClaim + ", probe_until = " + probeUntil +
		", last_probe_at = " + fmt.Sprintf(lastProbeAt, "b.last_probe_at") + ", by_instance = {owner}, updated_at = n.db_now, seq = {seq}"
	where := "b.name = {name} AND b.key = {key} AND b.epoch = {from}" +
		" AND ({to} <> 'half_open' OR (b.state = 'open' AND b.open_until <= n.db_now) OR (b.state = 'half_open' AND b.probe_until <= n.db_now))"
	insertInto := "INSERT INTO switchboard_breakers (name, key, state, epoch, failures, opened_at, open_until, probe_owner, probe_claim, probe_until, last_probe_at, by_instance, updated_at, seq)"
	if postgres {
		// PostgreSQL: the database's now is read once, in n, which RETURNING cannot name in an
		// INSERT: the statement returns it from the WITH around it.
		st.insert = p("WITH n AS (SELECT " + now + " AS db_now), i AS (" + insertInto + "\n\tSELECT " + values +
			" FROM n\n\tON CONFLICT DO NOTHING\n\tRETURNING " + breakerColumns + ")\nSELECT i.*, n.db_now FROM i, n")
		st.update = p("UPDATE switchboard_breakers b SET " + set + "\nFROM " + nowFrom + "\nWHERE " + where +
			"\nRETURNING " + prefixed("b.", breakerColumns) + ", n.db_now")
	} else {
		// SQLite: its clock stands still within a statement; RETURNING names no table of FROM,
		// so it reads the clock again (the same time). An INSERT … SELECT with an upsert clause
		// needs a WHERE.
		st.insert = p(insertInto + "\n\tSELECT " + values + " FROM " + nowFrom + " WHERE true\n\tON CONFLICT DO NOTHING\n\tRETURNING " +
			breakerColumns + ", " + now)
		st.update = p("UPDATE switchboard_breakers AS b SET " + set + "\nFROM " + nowFrom + "\nWHERE " + where +
			"\nRETURNING " + breakerColumns + ", " + now)
	}
	st.read = p("SELECT " + prefixed("b.", breakerColumns) + ", n.db_now FROM " + nowFrom +
		" LEFT JOIN switchboard_breakers b ON b.name = {name} AND b.key = {key}")
	st.load = p("SELECT " + breakerColumns + ", " + now + " FROM switchboard_breakers WHERE name = {name} AND state <> 'closed' ORDER BY key")
	st.changes = p("SELECT " + breakerColumns + ", " + now + " FROM switchboard_breakers WHERE name = {name} AND seq > {after} ORDER BY seq LIMIT {limit}")
	st.lastSeq = p("SELECT COALESCE(MAX(seq), 0) FROM switchboard_breakers WHERE name = {name}")
	return st
}

// prefixed returns the comma-separated columns cols each prefixed by p.
func prefixed(p, cols string) string { return p + strings.ReplaceAll(cols, ", ", ", "+p) }

var (
	postgresBreakers = breakerSQL(func(n int, typ string) string { return fmt.Sprintf("$%d::%s", n, typ) },
		"(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT", "nextval('switchboard_breakers_seq')", true)
	sqliteBreakers = breakerSQL(func(n int, _ string) string { return fmt.Sprintf("?%d", n) },
		"CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)",
		// One writer at a time: the largest seq of the name plus one, read in the statement
		// that writes it, is larger than every seq committed before.
		"(SELECT COALESCE(MAX(seq), 0) + 1 FROM switchboard_breakers WHERE name = ?1)", false)
)

func (e *postgresEngine) breakers() *breakerStatements { return &postgresBreakers }
func (e *sqliteEngine) breakers() *breakerStatements   { return &sqliteBreakers }

// breakerScan reads one breaker row and the database's now.
func breakerScan(r rowScanner) (BreakerRow, bool, error) {
	var (
		row                                             BreakerRow
		key, state, owner, claim, by                    sql.NullString
		epoch, failures, updated, seq                   sql.NullInt64
		openedAt, openUntil, probeUntil, lastProbe, now sql.NullInt64
	)
	if err := r.Scan(&key, &state, &epoch, &failures, &openedAt, &openUntil, &owner, &claim, &probeUntil, &lastProbe, &by, &updated, &seq, &now); err != nil {
		return BreakerRow{}, false, err
	}
	row.Key, row.State, row.Epoch, row.Failures = key.String, BreakerState(state.String), epoch.Int64, int(failures.Int64)
	row.OpenedAt, row.OpenUntil, row.ProbeOwner, row.ProbeUntil = fromMicros(openedAt.Int64), fromMicros(openUntil.Int64), owner.String, fromMicros(probeUntil.Int64)
	row.ProbeClaim = claim.String
	row.LastProbeAt, row.By, row.UpdatedAt, row.Seq, row.Now = fromMicros(lastProbe.Int64), by.String, fromMicros(updated.Int64), seq.Int64, fromMicros(now.Int64)
	return row, key.Valid, nil
}

// checkBreakerText refuses a text the store would not keep as it is (see storedText): a key
// or name stored otherwise would not match the one asked for.
func checkBreakerText(what, s string) error {
	if storedText(s) != s {
		return fmt.Errorf("%s %q is not valid UTF-8 without NUL bytes", what, s)
	}
	return nil
}

// TransitionBreaker applies t if the breaker's epoch is still t.From, using the database's
// clock for every time it sets, and returns the row afterwards and whether t made it: when
// another instance moved the breaker first, that instance's row. t.From == 0 creates the row
// (at epoch 1) of a breaker without one, except for a move to BreakerHalfOpen: probes are
// claimed only of a breaker stored open (once its open time has passed) or half-open (once
// the previous holder's claim ran out). A breaker without a row reads as closed at epoch 0.
func (s *Store) TransitionBreaker(ctx context.Context, t BreakerTransition) (BreakerRow, bool, error) {
	if err := checkTransition(t); err != nil {
		return BreakerRow{}, false, err
	}
	st := s.e.breakers()
	args := []any{t.Name, t.Key, string(t.To), t.Failures, t.OpenFor.Microseconds(), t.ProbeFor.Microseconds(), t.Owner, t.Claim}
	var q string
	switch {
	case t.From > 0:
		q, args = st.update, append(args, t.From)
	case t.To != BreakerHalfOpen:
		q = st.insert
	}
	if q != "" {
		row, _, err := breakerScan(s.db.QueryRowContext(ctx, q, args...))
		if err == nil {
			return row, true, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return BreakerRow{}, false, fmt.Errorf("durable: breaker %q of %q: transition to %s: %w", t.Key, t.Name, t.To, err)
		}
	}
	// Not applied: the row that won (read after the statement, so that it sees the
	// transaction that did).
	row, err := s.breaker(ctx, t.Name, t.Key)
	if err != nil {
		return BreakerRow{}, false, fmt.Errorf("durable: breaker %q of %q: transition to %s not applied, and reading the breaker failed: %w", t.Key, t.Name, t.To, err)
	}
	return row, false, nil
}

func checkTransition(t BreakerTransition) error {
	var errs []error
	if t.Name == "" {
		errs = append(errs, errors.New("empty name"))
	}
	for _, x := range []struct{ what, s string }{{"name", t.Name}, {"key", t.Key}, {"owner", t.Owner}, {"claim", t.Claim}} {
		if err := checkBreakerText(x.what, x.s); err != nil {
			errs = append(errs, err)
		}
	}
	switch t.To {
	case BreakerClosed, BreakerOpen, BreakerHalfOpen:
	default:
		errs = append(errs, fmt.Errorf("invalid state %q", t.To))
	}
	if t.To == BreakerHalfOpen && t.Owner == "" {
		errs = append(errs, errors.New("a move to half-open needs an owner to hold the probes"))
	}
	if t.From < 0 {
		errs = append(errs, fmt.Errorf("negative epoch %d", t.From))
	}
	if t.Failures < 0 {
		errs = append(errs, fmt.Errorf("negative failure count %d", t.Failures))
	}
	if t.OpenFor < 0 || t.ProbeFor < 0 {
		errs = append(errs, fmt.Errorf("negative duration (open for %v, probe for %v)", t.OpenFor, t.ProbeFor))
	}
	if len(errs) > 0 {
		return fmt.Errorf("durable: breaker transition: %w", errors.Join(errs...))
	}
	return nil
}

// breaker reads the row of name's key: closed at epoch 0 when it has none.
func (s *Store) breaker(ctx context.Context, name, key string) (BreakerRow, error) {
	row, found, err := breakerScan(s.db.QueryRowContext(ctx, s.e.breakers().read, name, key))
	if err != nil {
		return BreakerRow{}, err
	}
	if !found {
		row = BreakerRow{Key: key, State: BreakerClosed, Now: row.Now}
	}
	return row, nil
}

// Breaker returns the row of name's key, with the database's now: closed at epoch 0 when the
// breaker has none.
func (s *Store) Breaker(ctx context.Context, name, key string) (BreakerRow, error) {
	row, err := s.breaker(ctx, name, key)
	if err != nil {
		return BreakerRow{}, fmt.Errorf("durable: breaker %q of %q: %w", key, name, err)
	}
	return row, nil
}

// LoadBreakers returns the rows of name's breakers that are not closed, in key order.
func (s *Store) LoadBreakers(ctx context.Context, name string) ([]BreakerRow, error) {
	out, err := s.breakerRows(ctx, s.e.breakers().load, name)
	if err != nil {
		return nil, fmt.Errorf("durable: load the breakers of %q: %w", name, err)
	}
	return out, nil
}

// BreakerChanges returns at most limit rows of name's breakers whose seq is above after, in
// seq order.
func (s *Store) BreakerChanges(ctx context.Context, name string, after int64, limit int) ([]BreakerRow, error) {
	out, err := s.breakerRows(ctx, s.e.breakers().changes, name, after, limit)
	if err != nil {
		return nil, fmt.Errorf("durable: changes of the breakers of %q: %w", name, err)
	}
	return out, nil
}

// LastBreakerSeq returns the largest seq of name's breakers: 0 when it has none.
func (s *Store) LastBreakerSeq(ctx context.Context, name string) (int64, error) {
	var seq int64
	if err := s.db.QueryRowContext(ctx, s.e.breakers().lastSeq, name).Scan(&seq); err != nil {
		return 0, fmt.Errorf("durable: changes of the breakers of %q: %w", name, err)
	}
	return seq, nil
}

func (s *Store) breakerRows(ctx context.Context, q string, args ...any) ([]BreakerRow, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []BreakerRow
	for rows.Next() {
		row, _, err := breakerScan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// WatchBreakers listens, on a connection of its own, for the changes of name's breakers that
// any instance commits, until ctx ends or the connection fails: it calls listening once it
// listens (changes committed before may not be told) and changed for each change after (a
// burst of changes may be told once). It returns ctx's error when ctx ended, the error that
// stopped it otherwise, and ErrNoNotifications at once on an engine without notifications.
func (s *Store) WatchBreakers(ctx context.Context, name string, listening, changed func()) error {
	e, ok := s.e.(*postgresEngine)
	if !ok || e.drv.Listen == nil {
		return ErrNoNotifications
	}
	var schema string
	if err := s.db.QueryRowContext(ctx, `SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.oid = 'switchboard_breakers'::regclass`).Scan(&schema); err != nil {
		return err
	}
	want := schema + "." + name
	return s.listen(ctx, e, BreakerChannel, func(int64) { listening() }, func(payload string) {
		if payload == want {
			changed()
		}
	})
}
