package benchmarks

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/postgres"
	"github.com/switchboard-go/switchboard/mediator"
)

// The fleet benchmarks (BenchmarkIdleFleet, BenchmarkFleetPickup): N instances of the queue in
// this process, each its own durable.Open with its own pool, InstanceID and application_name,
// on a PostgreSQL database of their own, reached directly or through PgBouncer.

// bouncerDSNEnv names the DSN of a PgBouncer in transaction pooling mode in front of the server
// of SWITCHBOARD_TEST_PG_DSN (scripts/with-postgres.sh starts one).
const bouncerDSNEnv = "SWITCHBOARD_TEST_PGBOUNCER_DSN"

// bouncerDSN returns the PgBouncer DSN, or "" to skip its rows; under CI=true a missing one
// fails instead, as pgDSN does.
func bouncerDSN(tb testing.TB) string {
	tb.Helper()
	dsn := os.Getenv(bouncerDSNEnv)
	if dsn == "" && os.Getenv("CI") == "true" {
		tb.Fatalf("%s is not set under CI=true: the PgBouncer rows must run (use scripts/with-postgres.sh)", bouncerDSNEnv)
	}
	return dsn
}

// The two ways to the database of a fleet benchmark or a drain.
const (
	direct    = "direct"    // to PostgreSQL: the instances LISTEN
	pgbouncer = "pgbouncer" // through PgBouncer in transaction pooling mode: they poll
)

// ownDatabase is a PostgreSQL database created for one benchmark (PgBouncer 1.18 refuses a
// search_path, so a schema cannot isolate a case behind it, and a database's statistics in
// pg_stat_database count only its own connections' transactions, not those of whatever else
// shares the server).
type ownDatabase struct {
	name string
	// direct is the DSN of the database on the server; bouncer the same database through
	// PgBouncer ("" when no PgBouncer DSN was given).
	direct, bouncer string
	// admin is a pool on the server's database of the DSN given (not name): what it runs is
	// never counted in name's statistics.
	admin *sql.DB
}

// newOwnDatabase creates a database named prefix and a random suffix on the server of
// directDSN, dropped (WITH (FORCE), which also ends PgBouncer's server connections to it) when
// tb ends. Close the pools on it with cleanups registered after this call.
func newOwnDatabase(tb testing.TB, directDSN, bouncerDSN, prefix string) *ownDatabase {
	tb.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	d := &ownDatabase{name: prefix + hex.EncodeToString(b[:])}
	var err error
	if d.direct, err = withDatabase(directDSN, d.name); err != nil {
		tb.Fatal(err)
	}
	if bouncerDSN != "" {
		if d.bouncer, err = withDatabase(bouncerDSN, d.name); err != nil {
			tb.Fatal(err)
		}
	}
	if d.admin, err = sql.Open("pgx", directDSN); err != nil {
		tb.Fatal(err)
	}
	d.admin.SetMaxOpenConns(2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// template0: nobody is ever connected to it, unlike template1, which a concurrent
	// CREATE DATABASE would then fail to copy.
	if _, err := d.admin.ExecContext(ctx, "CREATE DATABASE "+d.name+" TEMPLATE template0"); err != nil {
		_ = d.admin.Close()
		tb.Fatalf("create database: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := d.admin.ExecContext(ctx, "DROP DATABASE "+d.name+" WITH (FORCE)"); err != nil {
			tb.Errorf("drop database %s: %v", d.name, err)
		}
		_ = d.admin.Close()
	})
	return d
}

// requireRoom skips tb unless the server has room for need more connections: its
// max_connections less its superuser_reserved_connections and the connections open now. A
// fleet at the default budget may hold postgres.DefaultMaxConns connections per instance, and a
// server out of connections refuses every other client too (the rows of 50 instances directly
// need max_connections above 500).
func (d *ownDatabase) requireRoom(tb testing.TB, need int) {
	tb.Helper()
	var free int
	if err := d.admin.QueryRow(`SELECT current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int
		- (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')`).Scan(&free); err != nil {
		tb.Fatal(err)
	}
	if free < need {
		tb.Skipf("the server has room for %d more connections; the fleet may hold %d (%d per instance at the default budget): raise max_connections to run it",
			free, need, postgres.DefaultMaxConns)
	}
}

// dsn is the database's DSN by way of via (direct or pgbouncer).
func (d *ownDatabase) dsn(tb testing.TB, via string) string {
	tb.Helper()
	if via == pgbouncer {
		if d.bouncer == "" {
			tb.Fatal("no PgBouncer DSN")
		}
		return d.bouncer
	}
	return d.direct
}

// xacts is the database's transactions so far (committed and rolled back) from
// pg_stat_database. Each backend adds its own to these counters when it goes idle, at most once
// a second (PostgreSQL 15's PGSTAT_MIN_INTERVAL) and otherwise within 10 s: a window of a few
// seconds over a steady load reads its rate within about a second's worth of its transactions.
func (d *ownDatabase) xacts(ctx context.Context) (int64, error) {
	var n int64
	err := d.admin.QueryRowContext(ctx,
		"SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1", d.name).Scan(&n)
	return n, err
}

// serverConns returns the connections to the database in pg_stat_activity: in all, and by
// application_name.
func (d *ownDatabase) serverConns(ctx context.Context) (total int, byApp map[string]int, err error) {
	rows, err := d.admin.QueryContext(ctx,
		"SELECT application_name, count(*) FROM pg_stat_activity WHERE datname = $1 GROUP BY 1", d.name)
	if err != nil {
		return 0, nil, err
	}
	defer rows.Close()
	byApp = map[string]int{}
	for rows.Next() {
		var app string
		var n int
		if err := rows.Scan(&app, &n); err != nil {
			return 0, nil, err
		}
		byApp[app] += n
		total += n
	}
	return total, byApp, rows.Err()
}

// usedConns returns how many of the database's connections whose application_name starts with
// prefix ran a statement within the last window (their state last changed then).
func (d *ownDatabase) usedConns(ctx context.Context, prefix string, window time.Duration) (int, error) {
	var n int
	err := d.admin.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = $1
		AND starts_with(application_name, $2) AND state_change > now() - make_interval(secs => $3)`,
		d.name, prefix, window.Seconds()).Scan(&n)
	return n, err
}

// bouncerClients returns the client connections PgBouncer holds for the database, from its
// admin console's SHOW CLIENTS (console is a pool on it).
func (d *ownDatabase) bouncerClients(ctx context.Context, console *sql.DB) (int, error) {
	rows, err := console.QueryContext(ctx, "SHOW CLIENTS")
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return 0, err
	}
	dbCol := slices.Index(cols, "database")
	if dbCol < 0 {
		return 0, fmt.Errorf("SHOW CLIENTS has no database column: %v", cols)
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	n := 0
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return 0, err
		}
		if vals[dbCol].String == d.name {
			n++
		}
	}
	return n, rows.Err()
}

// openBouncerConsole opens a pool on the admin console of the PgBouncer of bouncerDSN (its
// database pgbouncer, which speaks only the simple protocol), closed when tb ends.
func openBouncerConsole(tb testing.TB, bouncerDSN string) *sql.DB {
	tb.Helper()
	dsn, err := withDatabase(bouncerDSN, "pgbouncer")
	if err == nil {
		dsn, err = withParam(dsn, "default_query_exec_mode", "simple_protocol")
	}
	if err != nil {
		tb.Fatal(err)
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		tb.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	tb.Cleanup(func() { _ = db.Close() })
	return db
}

// withDatabase returns dsn (a URL or key=value DSN) with database as its database name.
func withDatabase(dsn, database string) (string, error) {
	if strings.Contains(dsn, "://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", err
		}
		u.Path, u.RawPath = "/"+database, ""
		return u.String(), nil
	}
	return dsn + " dbname=" + database, nil
}

// withParam returns dsn (a URL or key=value DSN) with the parameter key set to value (no
// spaces or quotes in value).
func withParam(dsn, key, value string) (string, error) {
	if strings.Contains(dsn, "://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", err
		}
		v := u.Query()
		v.Set(key, value)
		u.RawQuery = v.Encode()
		return u.String(), nil
	}
	return dsn + " " + key + "=" + value, nil
}

// fleetItem is the request the fleet benchmarks enqueue.
type fleetItem struct {
	mediator.Command
	N int64 `json:"n"`
}

// instance is one queue of a fleet.
type instance struct {
	id string // its InstanceID and application_name
	q  *durable.Queue
}

// fleetConfig is what openFleet opens.
type fleetConfig struct {
	db  *ownDatabase
	via string // direct or pgbouncer
	n   int    // instances
	// schedulers is how many of them (the first) start a scheduler.
	schedulers int
	// queue is each instance's durable.Config beyond its InstanceID and Logger (zero: the
	// defaults).
	queue durable.Config
	// handle is the handler of fleetItem, called with the InstanceID of the instance that runs it;
	// nil: one that does nothing.
	handle func(instance string, it *fleetItem)
}

// openFleet opens the fleet of cfg: n queues, instance i with the InstanceID "<database>-<i>",
// postgres.Open's default budget (TransactionPooling through PgBouncer), the first schedulers
// of them running a scheduler, and every one a BreakerStore (defaults) with one subscriber, as
// an instance whose registry shares its breakers has. Directly, each instance's
// application_name is its InstanceID, which tells its connections apart in pg_stat_activity.
// Through PgBouncer every instance keeps the default one ("switchboard"), as a fleet would:
// PgBouncer shares each server connection between clients and, before a transaction of a
// client whose application_name differs from the connection's last one, sends a SET of it, a
// transaction of its own that would double the statements counted. Everything is stopped and
// closed when tb ends.
func openFleet(tb testing.TB, cfg fleetConfig) []*instance {
	tb.Helper()
	dsn := cfg.db.dsn(tb, cfg.via)
	if cfg.via == direct {
		cfg.db.requireRoom(tb, cfg.n*postgres.DefaultMaxConns)
	}
	fleet := make([]*instance, cfg.n)
	open := func(i int) error {
		id := fmt.Sprintf("%s-%03d", cfg.db.name, i)
		idsn := dsn
		if cfg.via == direct {
			var err error
			if idsn, err = withParam(dsn, "application_name", id); err != nil {
				return err
			}
		}
		qc := cfg.queue
		qc.InstanceID, qc.Logger = id, zap.NewNop()
		qc.SkipMigrations = i > 0 // the first migrated the database: the others only check its version
		q, err := durable.Open(context.Background(), postgres.Open(idsn, postgres.Config{TransactionPooling: cfg.via == pgbouncer}), qc)
		if err != nil {
			return fmt.Errorf("instance %d: %w", i, err)
		}
		fleet[i] = &instance{id: id, q: q}
		return nil
	}
	// The first migrates the database alone; the others check its version, a few at a time.
	if err := open(0); err != nil {
		tb.Fatal(err)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, 8)
	)
	for i := 1; i < cfg.n; i++ {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := open(i); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// Cleanups run last first: each instance's store is closed, then its scheduler stopped,
	// then its queue closed, all instances at once.
	tb.Cleanup(func() {
		var wg sync.WaitGroup
		for _, in := range fleet {
			if in != nil {
				wg.Go(func() { _ = in.q.Close() })
			}
		}
		wg.Wait()
	})
	if len(errs) > 0 {
		tb.Fatal(errs[0])
	}
	var stores []func()
	tb.Cleanup(func() {
		var wg sync.WaitGroup
		for i, in := range fleet[:cfg.schedulers] {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := in.q.Shutdown(ctx); err != nil {
					tb.Errorf("instance %d: shutdown: %v", i, err)
				}
			})
		}
		wg.Wait()
	})
	tb.Cleanup(func() {
		for _, stop := range stores {
			stop()
		}
	})
	for i, in := range fleet {
		durable.Register[*fleetItem](in.q, "bench.fleet")
		bs, err := durable.NewBreakerStore(in.q, "bench", durable.BreakerStoreConfig{})
		if err != nil {
			tb.Fatal(err)
		}
		unsubscribe := bs.Subscribe(func(breaker.Shared) {})
		stores = append(stores, func() { unsubscribe(); _ = bs.Close() })
		if i >= cfg.schedulers {
			continue
		}
		m := mediator.New(nil, mediator.Config{})
		id := in.id
		mediator.HandleFunc(m, func(_ context.Context, it *fleetItem) (mediator.Void, error) {
			if cfg.handle != nil {
				cfg.handle(id, it)
			}
			return mediator.Void{}, nil
		})
		if err := m.Build(); err != nil {
			tb.Fatal(err)
		}
		if err := in.q.Start(m); err != nil {
			tb.Fatal(err)
		}
	}
	return fleet
}

// waitListening waits until want of the database's connections listen (their last statement
// was a LISTEN: each instance's notification connection once it listens), failing tb after a
// minute.
func waitListening(tb testing.TB, d *ownDatabase, want int) {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	got := 0
	for time.Now().Before(deadline) {
		if err := d.admin.QueryRow("SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND query LIKE 'LISTEN %'",
			d.name).Scan(&got); err != nil {
			tb.Fatal(err)
		}
		if got >= want {
			return
		}
		<-tick.C
	}
	tb.Fatalf("%d of %d instances listen after a minute", got, want)
}
