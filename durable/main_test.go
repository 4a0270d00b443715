package durable_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/durabletest"
	"github.com/switchboard-go/switchboard/durable/internal/pgtest"
	istore "github.com/switchboard-go/switchboard/durable/internal/store"
	"github.com/switchboard-go/switchboard/durable/postgres"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/mediator"
)

// pgDSNEnv names the environment variable holding the PostgreSQL DSN of the tests.
const pgDSNEnv = pgtest.DSNEnv

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode))
	}
	goleak.VerifyTestMain(m)
}

// backend opens fresh, empty queues of one kind. Every queue opened by one backend value shares
// one database (one SQLite file, one PostgreSQL schema), so several "instances" can be tested.
type backend struct {
	// name is "sqlite" or "postgres" (also through PgBouncer: see pooled).
	name string
	// pooled: the PostgreSQL database is reached through PgBouncer in transaction pooling mode,
	// and its queues are opened with postgres.Config.TransactionPooling.
	pooled bool
	// target is the SQLite file or the PostgreSQL DSN (with its schema's search_path).
	target string
	// env describes the database to a child process.
	env []string
}

// bare opens a new queue (its own pool) on the backend's database with cfg, closed at the end
// of the test; no request type is registered.
func (b backend) bare(t testing.TB, cfg durable.Config) *durable.Queue {
	t.Helper()
	q, err := durable.Open(context.Background(), b.driver(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q
}

// queue is bare with the test request types registered (with opts).
func (b backend) queue(t testing.TB, cfg durable.Config, opts ...durable.RegisterOption) *durable.Queue {
	t.Helper()
	q := b.bare(t, cfg)
	registerTypes(q, opts...)
	return q
}

// driver returns a driver of the backend's database that opens a pool of its own.
func (b backend) driver() durable.Driver { return targetDriver(b.kind(), b.target) }

// kind is the backend's kind for targetDriver and child processes: its name, or "pgbouncer".
func (b backend) kind() string {
	if b.pooled {
		return "pgbouncer"
	}
	return b.name
}

// targetDriver returns the driver of the database of kind ("sqlite", "postgres", "pgbouncer")
// at target.
func targetDriver(kind, target string) durable.Driver {
	switch kind {
	case "postgres":
		return postgres.Open(target, postgres.Config{})
	case "pgbouncer":
		return postgres.Open(target, postgres.Config{TransactionPooling: true})
	}
	return sqlite.Open(target)
}

// pool opens a pool of its own on b's database, closed at the end of the test.
func (b backend) pool(t testing.TB) *sql.DB {
	t.Helper()
	driverName := "sqlite"
	if b.name == "postgres" {
		driverName = "pgx"
	}
	db, err := sql.Open(driverName, b.target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// open returns the store of a new queue on the backend's database.
func (b backend) open(t testing.TB) *istore.Store {
	t.Helper()
	return durable.StoreOf(b.bare(t, durable.Config{}))
}

// pgDSN returns the PostgreSQL DSN, failing the test under CI when none is set.
func pgDSN(t testing.TB) string { t.Helper(); return pgtest.DSN(t) }

func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func sqliteBackend(t testing.TB) backend {
	path := filepath.Join(t.TempDir(), "db", "durable.db")
	return backend{
		name:   "sqlite",
		target: path,
		env:    []string{childBackendEnv + "=sqlite", childTargetEnv + "=" + path},
	}
}

// postgresBackend creates a schema of its own on the test server and returns stores whose
// search_path selects it; the schema is dropped at the end of the test.
func postgresBackend(t testing.TB, dsn string) backend {
	t.Helper()
	target := durabletest.PostgresSchema(t, dsn)
	return backend{
		name:   "postgres",
		target: target,
		env:    []string{childBackendEnv + "=postgres", childTargetEnv + "=" + target},
	}
}

// bouncerBackend creates a database of its own on the test server and returns stores that
// reach it through the test PgBouncer (transaction pooling; pgx sends every statement
// unprepared, as the queue does with TransactionPooling, so the test's own pools work through
// it too); the database is dropped at the end of the test. It skips without a PgBouncer DSN
// (fails under CI).
func bouncerBackend(t testing.TB) backend {
	t.Helper()
	dsn, bouncer := pgDSN(t), pgtest.BouncerDSN(t)
	if dsn == "" || bouncer == "" {
		t.Skipf("%s and %s not both set", pgDSNEnv, pgtest.BouncerDSNEnv)
	}
	target, err := pgtest.WithParam(pgtest.BouncerDatabase(t, dsn, bouncer, "durable_"), "default_query_exec_mode", "exec")
	if err != nil {
		t.Fatal(err)
	}
	return backend{
		name:   "postgres",
		pooled: true,
		target: target,
		env:    []string{childBackendEnv + "=pgbouncer", childTargetEnv + "=" + target},
	}
}

// eachPostgres runs fn against PostgreSQL directly and through PgBouncer in transaction
// pooling mode (the suites a fleet behind PgBouncer depends on).
func eachPostgres(t *testing.T, fn func(t *testing.T, b backend)) {
	t.Helper()
	t.Run("postgres", func(t *testing.T) { fn(t, pgBackend(t)) })
	t.Run("pgbouncer", func(t *testing.T) { fn(t, bouncerBackend(t)) })
}

// eachBackendAndBouncer is eachBackend, then fn through PgBouncer too (bouncerBackend).
func eachBackendAndBouncer(t *testing.T, fn func(t *testing.T, b backend)) {
	t.Helper()
	eachBackend(t, fn)
	t.Run("pgbouncer", func(t *testing.T) { fn(t, bouncerBackend(t)) })
}

// eachBackend runs fn against SQLite, and against PostgreSQL when a DSN is set.
func eachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { fn(t, sqliteBackend(t)) })
	dsn := pgDSN(t)
	t.Run("postgres", func(t *testing.T) {
		if dsn == "" {
			t.Skipf("%s not set", pgDSNEnv)
		}
		fn(t, postgresBackend(t, dsn))
	})
}

// fakeClock is a Clock that moves only when told to.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After lets the fake clock serve as a behaviors.Clock; its timers run in real time.
func (c *fakeClock) After(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// eventually polls cond until it holds or the bound passes. It synchronises with state that
// lives in the database, where no channel can signal.
func eventually(t testing.TB, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", bound, what)
		}
		<-tick.C
	}
}

func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// Request types of the tests.

type Work struct {
	mediator.Command
	N int `json:"n"`
}

type Keyed struct {
	mediator.Command
	Key string `json:"key"`
	Seq int    `json:"seq"`
}

func (k *Keyed) OrderingKey() string { return k.Key }

type Unique struct {
	mediator.Command
	ID string `json:"id"`
}

func (u *Unique) DedupeKey() string { return "unique:" + u.ID }

// retryableErr is an error the default classifier retries.
type retryableErr struct{ msg string }

func (e retryableErr) Error() string   { return e.msg }
func (e retryableErr) Retryable() bool { return true }

var errPermanent = errors.New("permanent failure")

// openQueue opens a queue on driver with cfg, closed at the end of the test, with the test
// request types registered.
func openQueue(t testing.TB, driver durable.Driver, cfg durable.Config) *durable.Queue {
	t.Helper()
	q, err := durable.Open(context.Background(), driver, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	registerTypes(q)
	return q
}

// typesQueue returns a SQLite queue with the test request types registered.
func typesQueue(t testing.TB) *durable.Queue { return sqliteBackend(t).queue(t, durable.Config{}) }

// registerErr calls register (a Register, Schedule or NewDeferral's Validate) and returns its
// error. A panic fails the test: a setup mistake is an error, never a panic.
func registerErr(t testing.TB, register func() error) (err error) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("panicked: %v", p)
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return register()
}

// registerTypes registers the test request types on q.
func registerTypes(q *durable.Queue, opts ...durable.RegisterOption) {
	durable.Register[*Work](q, "test.work", opts...)
	durable.Register[*Keyed](q, "test.keyed", opts...)
	durable.Register[*Unique](q, "test.unique", opts...)
}

// fastPolicy retries quickly and without jitter, so due times are exact.
var fastPolicy = retry.Policy{MaxAttempts: 5, Strategy: retry.Exponential, BaseDelay: time.Second, Multiplier: 2, MaxDelay: time.Minute, Jitter: behaviors.Off}

// env bundles what most tests need.
type env struct {
	store *istore.Store
	q     *durable.Queue
	clock *fakeClock
}

func newEnv(t testing.TB, b backend) *env { return newEnvWith(t, b) }

// newEnvWith is newEnv with further request types, registered by each of register.
func newEnvWith(t testing.TB, b backend, register ...func(q *durable.Queue)) *env {
	clock := newFakeClock()
	q := b.queue(t, durable.Config{Policy: fastPolicy, Clock: clock, Rand: func() float64 { return 0.5 }})
	for _, r := range register {
		r(q)
	}
	return &env{store: durable.StoreOf(q), q: q, clock: clock}
}

// start runs a scheduler, configured by cfgs[0] when given, until the end of the test.
func start(t testing.TB, q *durable.Queue, m mediator.Sender, cfgs ...durable.SchedulerConfig) *durable.Scheduler {
	t.Helper()
	var cfg durable.SchedulerConfig
	if len(cfgs) > 0 {
		cfg = cfgs[0]
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 5 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = zaptest.NewLogger(t)
	}
	return startScheduler(t, must[*durable.Scheduler](t)(durable.NewScheduler(q, m, cfg)))
}

// startScheduler starts s, made by durable.NewScheduler, until the end of the test.
func startScheduler(t testing.TB, s *durable.Scheduler) *durable.Scheduler {
	t.Helper()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s
}

func stats(t testing.TB, q *durable.Queue) durable.Stats {
	t.Helper()
	return must[durable.Stats](t)(q.Stats(context.Background()))
}

func item(t testing.TB, q *durable.Queue, id record.ItemID) record.Item {
	t.Helper()
	return must[record.Item](t)(q.Item(context.Background(), id))
}

func attempts(t testing.TB, q *durable.Queue, id record.ItemID) []record.Attempt {
	t.Helper()
	return must[[]record.Attempt](t)(q.Attempts(context.Background(), id))
}

func waitState(t testing.TB, q *durable.Queue, id record.ItemID, want record.ItemState) record.Item {
	t.Helper()
	var it record.Item
	eventually(t, 20*time.Second, fmt.Sprintf("item %d to be %s", id, want), func() bool {
		it = item(t, q, id)
		return it.State == want
	})
	return it
}

func outcomes(as []record.Attempt) string {
	var parts []string
	for _, a := range as {
		parts = append(parts, fmt.Sprintf("%d:%s", a.Number, a.Outcome))
	}
	return strings.Join(parts, " ")
}

// handlers are the test handlers; nil ones succeed at once.
type handlers struct {
	work  func(ctx context.Context, w *Work) error
	keyed func(ctx context.Context, k *Keyed) error
}

// mediatorFor builds a mediator with handlers for the test request types.
func mediatorFor(t testing.TB, h handlers, opts ...func(m *mediator.Mediator)) *mediator.Mediator {
	t.Helper()
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, w *Work) (mediator.Void, error) {
		if h.work == nil {
			return mediator.Void{}, nil
		}
		return mediator.Void{}, h.work(ctx, w)
	})
	mediator.HandleFunc(m, func(ctx context.Context, k *Keyed) (mediator.Void, error) {
		if h.keyed == nil {
			return mediator.Void{}, nil
		}
		return mediator.Void{}, h.keyed(ctx, k)
	})
	mediator.HandleFunc(m, func(ctx context.Context, u *Unique) (mediator.Void, error) { return mediator.Void{}, nil })
	for _, o := range opts {
		o(m)
	}
	if err := m.Build(); err != nil {
		t.Fatal(err)
	}
	return m
}

// ---------------------------------------------------------------------------------------------
// A zap logger that records every message and signals the ones a test waits for: tests
// assert on what the scheduler logs.

type logRecord struct {
	at    time.Time
	level zapcore.Level
	msg   string
	attrs map[string]string
}

type logWaiter struct {
	msg  string
	from int
	ch   chan struct{}
}

// logRecorder records log entries through zaptest/observer (safe for concurrent use); its
// logger method gives the *zap.Logger to hand to a component. next(msg, from) returns a
// channel closed when a record with message msg at index from or later has been logged.
type logRecorder struct {
	init    sync.Once
	core    zapcore.Core
	logs    *observer.ObservedLogs
	mu      sync.Mutex // serialises writes with waiters, so an entry's index is its position
	waiters []logWaiter
}

// logger returns a logger, enabled at every level, that writes to l.
func (l *logRecorder) logger() *zap.Logger {
	l.setup()
	return zap.New(signalCore{Core: l.core, l: l})
}

func (l *logRecorder) setup() {
	l.init.Do(func() { l.core, l.logs = observer.New(zapcore.DebugLevel) })
}

// signalCore writes to the recorder's observer and wakes the waiters of what it wrote.
type signalCore struct {
	zapcore.Core
	l *logRecorder
}

func (c signalCore) With(fields []zapcore.Field) zapcore.Core {
	return signalCore{Core: c.Core.With(fields), l: c.l}
}

func (c signalCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c signalCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := c.Core.Write(e, fields); err != nil {
		return err
	}
	idx := l.logs.Len() - 1
	keep := l.waiters[:0]
	for _, w := range l.waiters {
		if w.msg == e.Message && idx >= w.from {
			close(w.ch)
			continue
		}
		keep = append(keep, w)
	}
	l.waiters = keep
	return nil
}

// records returns what was logged, as records whose attributes are rendered as text. The
// caller holds l.mu.
func (l *logRecorder) records() []logRecord {
	l.setup()
	entries := l.logs.All()
	recs := make([]logRecord, len(entries))
	for i, e := range entries {
		attrs := map[string]string{}
		for k, v := range e.ContextMap() {
			attrs[k] = fmt.Sprint(v)
		}
		recs[i] = logRecord{at: e.Time, level: e.Level, msg: e.Message, attrs: attrs}
	}
	return recs
}

// has reports whether a record with message msg was logged.
func (l *logRecorder) has(msg string) bool { return l.count(0, -1, msg) > 0 }

// mark returns the index the next record will have.
func (l *logRecorder) mark() int {
	l.setup()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.logs.Len()
}

func (l *logRecorder) next(msg string, from int) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	recs := l.records()
	ch := make(chan struct{})
	for _, r := range recs[min(from, len(recs)):] {
		if r.msg == msg {
			close(ch)
			return ch
		}
	}
	l.waiters = append(l.waiters, logWaiter{msg: msg, from: from, ch: ch})
	return ch
}

// first returns the first record with message msg at index from or later.
func (l *logRecorder) first(msg string, from int) (logRecord, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	recs := l.records()
	for _, r := range recs[min(from, len(recs)):] {
		if r.msg == msg {
			return r, true
		}
	}
	return logRecord{}, false
}

// count counts the records in [from, to) (to < 0: to the end) with one of msgs.
func (l *logRecorder) count(from, to int, msgs ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	recs := l.records()
	if to < 0 || to > len(recs) {
		to = len(recs)
	}
	n := 0
	for _, r := range recs[min(from, to):to] {
		if slices.Contains(msgs, r.msg) {
			n++
		}
	}
	return n
}

// dump renders the records from index from, with times relative to since.
func (l *logRecorder) dump(from int, since time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	recs := l.records()
	var b strings.Builder
	for i, r := range recs[min(from, len(recs)):] {
		keys := make([]string, 0, len(r.attrs))
		for k := range r.attrs {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		fmt.Fprintf(&b, "  #%d %+8.3fs %s %q", from+i, r.at.Sub(since).Seconds(), r.level, r.msg)
		for _, k := range keys {
			if k == "instance" {
				continue
			}
			fmt.Fprintf(&b, " %s=%s", k, r.attrs[k])
		}
		b.WriteByte('\n')
	}
	return b.String()
}
