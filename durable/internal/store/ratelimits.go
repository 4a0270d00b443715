package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// rateLimitStatements are an engine's statements of switchboard_rate_limits and its lessees.
type rateLimitStatements struct {
	// lease advances the tat of $1 name, $2 key by $5 permits of $3 interval (ns), from no
	// earlier than now less $4 tolerance (ns), if the last comes within $6 horizon (ns); it
	// returns the tat, the permits granted and the database's now (ns). No row: the limit has
	// none yet.
	lease string
	// create makes the row of $1 name, $2 key unless it has one.
	create string
	// seen records that $3 instance leases $1 name, $2 key now.
	seen string
	// live counts the instances of $1 name, $2 key seen within $3 (µs).
	live string
	// prune deletes the lessees of $1 name, $2 key not seen within $3 (µs); on PostgreSQL
	// those no other transaction holds.
	prune string
}

func rateLimitSQL(param func(n int, typ string) string, nowMicros, greatest string, postgres bool) rateLimitStatements {
	p := strings.NewReplacer("{name}", param(1, "text"), "{key}", param(2, "text"), "{interval}", param(3, "bigint"),
		"{tol}", param(4, "bigint"), "{n}", param(5, "bigint"), "{horizon}", param(6, "bigint"),
		"{instance}", param(3, "text"), "{within}", param(3, "bigint"), "{greatest}", greatest).Replace
	nowNanos := "(" + nowMicros + " * 1000)"
	first := "{greatest}(r.tat, n.db_now - {tol})"
	grants := first + " + ({n} - 1) * {interval} <= n.db_now + {horizon}"
	set := "tat = CASE WHEN " + grants + " THEN " + first + " + {n} * {interval} ELSE r.tat END, " +
		"granted = CASE WHEN " + grants + " THEN {n} ELSE 0 END, updated_at = n.db_now / 1000"
	from := "(SELECT " + nowNanos + " AS db_now) n"
	var st rateLimitStatements
	if postgres {
		st.lease = p("UPDATE switchboard_rate_limits r SET " + set + "\nFROM " + from +
			"\nWHERE r.name = {name} AND r.key = {key}\nRETURNING r.tat, r.granted, n.db_now")
	} else {
		// SQLite: RETURNING names no table of FROM; its clock stands still within a statement.
		st.lease = p("UPDATE switchboard_rate_limits AS r SET " + set + "\nFROM " + from +
			"\nWHERE r.name = {name} AND r.key = {key}\nRETURNING tat, granted, " + nowNanos)
	}
	st.create = p("INSERT INTO switchboard_rate_limits (name, key, tat, granted, updated_at) VALUES ({name}, {key}, 0, 0, " +
		nowMicros + ") ON CONFLICT DO NOTHING")
	st.seen = p("INSERT INTO switchboard_rate_limit_lessees (name, key, instance, seen_at) VALUES ({name}, {key}, {instance}, " +
		nowMicros + ") ON CONFLICT (name, key, instance) DO UPDATE SET seen_at = excluded.seen_at")
	st.live = p("SELECT COUNT(*) FROM switchboard_rate_limit_lessees WHERE name = {name} AND key = {key} AND seen_at >= " +
		nowMicros + " - {within}")
	st.prune = p("DELETE FROM switchboard_rate_limit_lessees WHERE name = {name} AND key = {key} AND seen_at < " +
		nowMicros + " - {within}")
	if postgres {
		// The rows are locked first, skipping those another transaction holds (another
		// instance's prune deletes them, or their instance is recording that it is alive):
		// two prunes of a key that met the same rows in different orders would deadlock.
		st.prune = p("DELETE FROM switchboard_rate_limit_lessees WHERE name = {name} AND key = {key} AND instance = ANY(ARRAY(\n" +
			"\tSELECT s.instance FROM switchboard_rate_limit_lessees s\n" +
			"\tWHERE s.name = {name} AND s.key = {key} AND s.seen_at < " + nowMicros + " - {within}\n" +
			"\tFOR UPDATE SKIP LOCKED))")
	}
	return st
}

var (
	postgresRateLimits = rateLimitSQL(func(n int, typ string) string { return fmt.Sprintf("$%d::%s", n, typ) },
		"(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT", "GREATEST", true)
	sqliteRateLimits = rateLimitSQL(func(n int, _ string) string { return fmt.Sprintf("?%d", n) },
		"CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)", "MAX", false)
)

func (e *postgresEngine) rateLimits() *rateLimitStatements { return &postgresRateLimits }
func (e *sqliteEngine) rateLimits() *rateLimitStatements   { return &sqliteRateLimits }

// LeaseRateLimit leases l.Permits permits of a shared limit, all or none, with the database's
// clock: one conditional statement on the limit's row (and, the first time, one that makes
// it).
func (s *Store) LeaseRateLimit(ctx context.Context, l RateLimitLease) (RateLimitGrant, error) {
	if err := checkLease(l); err != nil {
		return RateLimitGrant{}, err
	}
	st := s.e.rateLimits()
	args := []any{l.Name, l.Key, l.Interval.Nanoseconds(), int64(l.Burst-1) * l.Interval.Nanoseconds(), int64(l.Permits), l.Horizon.Nanoseconds()}
	for try := 0; ; try++ {
		var tat, granted, now int64
		err := s.db.QueryRowContext(ctx, st.lease, args...).Scan(&tat, &granted, &now)
		switch {
		case err == nil:
			g := RateLimitGrant{Permits: int(granted), Now: time.Unix(0, now)}
			if granted > 0 {
				g.First = time.Unix(0, tat-granted*l.Interval.Nanoseconds())
			} else {
				g.Next = time.Unix(0, max(tat, now-int64(l.Burst-1)*l.Interval.Nanoseconds()))
			}
			return g, nil
		case !errors.Is(err, sql.ErrNoRows) || try > 0:
			return RateLimitGrant{}, fmt.Errorf("durable: rate limit %q of %q: lease: %w", l.Key, l.Name, err)
		}
		if _, err := s.db.ExecContext(ctx, st.create, l.Name, l.Key); err != nil {
			return RateLimitGrant{}, fmt.Errorf("durable: rate limit %q of %q: create: %w", l.Key, l.Name, err)
		}
	}
}

func checkLease(l RateLimitLease) error {
	var errs []error
	if l.Name == "" {
		errs = append(errs, errors.New("empty name"))
	}
	for _, x := range []struct{ what, s string }{{"name", l.Name}, {"key", l.Key}} {
		if err := checkBreakerText(x.what, x.s); err != nil {
			errs = append(errs, err)
		}
	}
	if l.Interval <= 0 {
		errs = append(errs, fmt.Errorf("interval %v is not positive", l.Interval))
	}
	if l.Burst < 1 {
		errs = append(errs, fmt.Errorf("burst %d is below 1", l.Burst))
	}
	if l.Permits < 1 {
		errs = append(errs, fmt.Errorf("permits %d is below 1", l.Permits))
	}
	if l.Horizon < 0 {
		errs = append(errs, fmt.Errorf("horizon %v is negative", l.Horizon))
	}
	if len(errs) > 0 {
		return fmt.Errorf("durable: rate limit lease: %w", errors.Join(errs...))
	}
	return nil
}

// RateLimitLessees records that instance leases name's key now and returns how many instances
// did so within the last within (this one included); with pruneAfter above 0, it first deletes
// the lessees not seen for that long. Two statements, three with a prune.
func (s *Store) RateLimitLessees(ctx context.Context, name, key, instance string, within, pruneAfter time.Duration) (int, error) {
	st := s.e.rateLimits()
	if pruneAfter > 0 {
		if _, err := s.db.ExecContext(ctx, st.prune, name, key, pruneAfter.Microseconds()); err != nil {
			return 0, fmt.Errorf("durable: rate limit %q of %q: prune lessees: %w", key, name, err)
		}
	}
	if _, err := s.db.ExecContext(ctx, st.seen, name, key, instance); err != nil {
		return 0, fmt.Errorf("durable: rate limit %q of %q: lessee: %w", key, name, err)
	}
	var n int
	if err := s.db.QueryRowContext(ctx, st.live, name, key, within.Microseconds()).Scan(&n); err != nil {
		return 0, fmt.Errorf("durable: rate limit %q of %q: lessees: %w", key, name, err)
	}
	return n, nil
}
