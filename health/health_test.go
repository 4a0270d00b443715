package health_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/durabletest"
	"github.com/switchboard-go/switchboard/durable/postgres"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/health"
	"github.com/switchboard-go/switchboard/mediator/mediatortest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const pgDSNEnv = "SWITCHBOARD_TEST_PG_DSN"

// backend opens queues on one kind of database and reaches below them to break the schema.
type backend struct {
	name string
	// driver opens a queue (a pool of its own) on the backend's database.
	driver durable.Driver
	// admin opens a pool on the queue's database, for the test's own statements.
	admin func(t *testing.T) *sql.DB
}

func eachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "queue.db")
		fn(t, backend{name: "sqlite", driver: sqlite.Open(path), admin: func(t *testing.T) *sql.DB {
			return openDB(t, "sqlite", path)
		}})
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgDSN(t)
		target := durabletest.PostgresSchema(t, dsn)
		fn(t, backend{name: "postgres", driver: postgres.Open(target, postgres.Config{}), admin: func(t *testing.T) *sql.DB {
			return openDB(t, "pgx", target)
		}})
	})
}

func pgDSN(t *testing.T) string {
	dsn := os.Getenv(pgDSNEnv)
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set under CI=true: the PostgreSQL tests must run", pgDSNEnv)
		}
		t.Skipf("%s not set", pgDSNEnv)
	}
	return dsn
}

func openDB(t *testing.T, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// open opens a queue on driver with cfg, closed when the test ends.
func open(t *testing.T, driver durable.Driver, cfg durable.Config) *durable.Queue {
	t.Helper()
	q, err := durable.Open(context.Background(), driver, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q
}

// start runs q's scheduler until the test ends.
func start(t *testing.T, q *durable.Queue) {
	t.Helper()
	if err := q.Start(mediatortest.NewSpy()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := q.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
}

func probes(t *testing.T, cfg health.Config) *health.Probes {
	t.Helper()
	p, err := health.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// probe serves one request of method to h and decodes the report of a GET.
func probe(t *testing.T, h http.Handler, method string) (*httptest.ResponseRecorder, health.Report) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, "/", nil))
	var rep health.Report
	if method == http.MethodGet && w.Code != http.StatusMethodNotAllowed {
		if err := json.Unmarshal(w.Body.Bytes(), &rep); err != nil {
			t.Fatalf("body %q: %v", w.Body, err)
		}
	}
	return w, rep
}

// statuses returns each check's status by name.
func statuses(rep health.Report) map[string]health.Status {
	m := map[string]health.Status{}
	for _, c := range rep.Checks {
		m[c.Name] = c.Status
	}
	return m
}

func check(rep health.Report, name string) health.CheckReport {
	for _, c := range rep.Checks {
		if c.Name == name {
			return c
		}
	}
	return health.CheckReport{}
}

func wantStatuses(t *testing.T, rep health.Report, want map[string]health.Status) {
	t.Helper()
	got := statuses(rep)
	if len(got) != len(want) {
		t.Errorf("checks %v, want %v", got, want)
	}
	for name, s := range want {
		if got[name] != s {
			t.Errorf("check %q is %q, want %q (report %+v)", name, got[name], s, rep)
		}
	}
}

func TestReadinessOfAHealthyQueue(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		q := open(t, b.driver, durable.Config{})
		start(t, q)
		p := probes(t, health.Config{Queue: q})

		w, rep := probe(t, p.Readiness(), http.MethodGet)
		if w.Code != http.StatusOK {
			t.Fatalf("status %d, body %s", w.Code, w.Body)
		}
		if rep.Status != health.StatusOK {
			t.Errorf("report status %q", rep.Status)
		}
		wantStatuses(t, rep, map[string]health.Status{"store": health.StatusOK, "migrations": health.StatusOK, "scheduler": health.StatusOK})
		if got := w.Header().Get("Cache-Control"); got != "no-store" {
			t.Errorf("Cache-Control %q", got)
		}
		if got := w.Header().Get("Content-Type"); got != "application/json" {
			t.Errorf("Content-Type %q", got)
		}
		var raw struct {
			Checks []map[string]any `json:"checks"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &raw); err != nil {
			t.Fatal(err)
		}
		for _, c := range raw.Checks {
			d, ok := c["duration"].(string)
			if _, err := time.ParseDuration(d); !ok || err != nil {
				t.Errorf("check %v: duration %v is not a Go duration", c["name"], c["duration"])
			}
			if _, has := c["error"]; has {
				t.Errorf("check %v passed and has an error field", c["name"])
			}
		}

		w, _ = probe(t, p.Readiness(), http.MethodHead)
		if w.Code != http.StatusOK || w.Body.Len() != 0 {
			t.Errorf("HEAD: status %d, body %q", w.Code, w.Body)
		}
	})
}

func TestReadinessNamesTheScheduler(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		q := open(t, b.driver, durable.Config{})
		p := probes(t, health.Config{Queue: q})
		notRunning := map[string]health.Status{"store": health.StatusOK, "migrations": health.StatusOK, "scheduler": health.StatusFailed}

		w, rep := probe(t, p.Readiness(), http.MethodGet)
		if w.Code != http.StatusServiceUnavailable {
			t.Errorf("not started: status %d, want 503", w.Code)
		}
		wantStatuses(t, rep, notRunning)

		if err := q.Start(mediatortest.NewSpy()); err != nil {
			t.Fatal(err)
		}
		if w, _ := probe(t, p.Readiness(), http.MethodGet); w.Code != http.StatusOK {
			t.Errorf("started: status %d, body %s", w.Code, w.Body)
		}
		if err := q.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		w, rep = probe(t, p.Readiness(), http.MethodGet)
		if w.Code != http.StatusServiceUnavailable {
			t.Errorf("shut down: status %d, want 503", w.Code)
		}
		wantStatuses(t, rep, notRunning)
		if e := check(rep, "scheduler").Error; !strings.Contains(e, "not running") {
			t.Errorf("scheduler error %q", e)
		}

		// An instance that only enqueues is ready without a scheduler.
		p = probes(t, health.Config{Queue: q, EnqueueOnly: true})
		w, rep = probe(t, p.Readiness(), http.MethodGet)
		if w.Code != http.StatusOK {
			t.Errorf("EnqueueOnly: status %d, body %s", w.Code, w.Body)
		}
		wantStatuses(t, rep, map[string]health.Status{"store": health.StatusOK, "migrations": health.StatusOK})
	})
}

func TestReadinessNamesAMissingMigration(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		q := open(t, b.driver, durable.Config{})
		// A migration that the newest one does not cover is missing too.
		if _, err := b.admin(t).Exec("DELETE FROM switchboard_schema_migrations WHERE version = 1"); err != nil {
			t.Fatal(err)
		}
		start(t, q)
		p := probes(t, health.Config{Queue: q})
		w, rep := probe(t, p.Readiness(), http.MethodGet)
		if w.Code != http.StatusServiceUnavailable {
			t.Fatalf("status %d, want 503", w.Code)
		}
		wantStatuses(t, rep, map[string]health.Status{"store": health.StatusOK, "migrations": health.StatusFailed, "scheduler": health.StatusOK})
		if e := check(rep, "migrations").Error; !strings.Contains(e, "lacks migrations [1]") {
			t.Errorf("migrations error %q", e)
		}
	})
}

// proxy forwards TCP connections to a server until the test cuts or freezes it.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	silent bool // accept connections and never answer them: a frozen server
	closed bool
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.wg.Go(p.serve)
	t.Cleanup(func() {
		_ = p.ln.Close()
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		p.drop()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			continue
		}
		p.mu.Lock()
		silent := p.silent
		p.mu.Unlock()
		if !silent {
			p.wg.Go(func() { p.pipe(c) })
		}
	}
}

// track records c to be dropped later; it closes c and reports false once the proxy is closed.
func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = true
	return true
}

func (p *proxy) pipe(c net.Conn) {
	defer c.Close()
	s, err := net.Dial("tcp", p.target)
	if err != nil || !p.track(s) {
		return
	}
	defer s.Close()
	p.wg.Go(func() {
		_, _ = io.Copy(s, c)
		_ = s.Close()
	})
	_, _ = io.Copy(c, s)
}

// drop closes every connection the proxy holds.
func (p *proxy) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// cut stops the server: its connections close and new ones are refused.
func (p *proxy) cut() {
	_ = p.ln.Close()
	p.drop()
}

// freeze makes the server hang: its connections close, and new ones are accepted and never
// answered.
func (p *proxy) freeze() {
	p.mu.Lock()
	p.silent = true
	p.mu.Unlock()
	p.drop()
}

// proxiedQueue opens a PostgreSQL queue whose connections pass through a proxy. Its pool keeps
// no idle connection, so every check dials anew and meets the proxy's current state.
func proxiedQueue(t *testing.T) (*durable.Queue, *proxy) {
	dsn := pgDSN(t)
	target := durabletest.PostgresSchema(t, dsn)
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		t.Skipf("the proxy tests need a URL DSN in %s", pgDSNEnv)
	}
	px := newProxy(t, u.Host)
	u.Host = px.ln.Addr().String()
	db := openDB(t, "pgx", u.String())
	db.SetMaxIdleConns(0)
	return open(t, postgres.New(db, postgres.Config{}), durable.Config{}), px
}

func TestReadinessNamesTheStoreWhenPostgresIsGone(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, c := range []struct {
		name    string
		breakIt func(*proxy)
		want    health.Status
	}{
		{"refused", (*proxy).cut, health.StatusFailed},
		{"frozen", (*proxy).freeze, health.StatusTimeout},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, px := proxiedQueue(t)
			p := probes(t, health.Config{Queue: q, EnqueueOnly: true, Timeout: timeout})
			if w, _ := probe(t, p.Readiness(), http.MethodGet); w.Code != http.StatusOK {
				t.Fatalf("before: status %d, body %s", w.Code, w.Body)
			}
			c.breakIt(px)

			began := time.Now()
			w, rep := probe(t, p.Readiness(), http.MethodGet)
			took := time.Since(began)
			if w.Code != http.StatusServiceUnavailable {
				t.Fatalf("status %d, want 503; body %s", w.Code, w.Body)
			}
			// The status says the timeout fired; this bound only catches a probe that hangs
			// (it is generous so that a loaded machine cannot fail it).
			if took > timeout+10*time.Second {
				t.Errorf("the probe took %v with a timeout of %v", took, timeout)
			}
			st := check(rep, "store")
			if st.Status != c.want || st.Error == "" {
				t.Errorf("store check %+v, want status %q with an error", st, c.want)
			}
			if c.want == health.StatusTimeout && !strings.Contains(st.Error, "did not finish within 300ms") {
				t.Errorf("store error %q does not name the timeout", st.Error)
			}
			if m := check(rep, "migrations"); m.Status == health.StatusOK {
				t.Errorf("migrations check %+v passed without a store", m)
			}

			// Liveness does not ask the database.
			if w, rep := probe(t, p.Liveness(), http.MethodGet); w.Code != http.StatusOK || rep.Status != health.StatusOK {
				t.Errorf("liveness with the database gone: status %d, body %s", w.Code, w.Body)
			}
		})
	}
}

func TestCustomChecks(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	const timeout = 50 * time.Millisecond
	p := probes(t, health.Config{Timeout: timeout, Checks: []health.Check{
		{Name: "ok", Run: func(context.Context) error { return nil }},
		{Name: "down", Run: func(context.Context) error { return errors.New("cache unreachable") }},
		{Name: "hung", Run: func(context.Context) error { <-release; return nil }}, // ignores its context
		{Name: "slow", Run: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }},
		{Name: "panics", Run: func(context.Context) error { panic("boom") }},
	}})
	w, rep := probe(t, p.Readiness(), http.MethodGet)
	if w.Code != http.StatusServiceUnavailable || rep.Status != health.StatusFailed {
		t.Fatalf("status %d, report %q", w.Code, rep.Status)
	}
	wantStatuses(t, rep, map[string]health.Status{"ok": health.StatusOK, "down": health.StatusFailed,
		"hung": health.StatusTimeout, "slow": health.StatusTimeout, "panics": health.StatusFailed})
	if names := []string{rep.Checks[0].Name, rep.Checks[4].Name}; names[0] != "ok" || names[1] != "panics" {
		t.Errorf("checks out of Config order: %v", rep.Checks)
	}
	for name, want := range map[string]string{"down": "cache unreachable", "hung": "did not finish within 50ms",
		"slow": "did not finish within 50ms", "panics": "panic: boom"} {
		if got := check(rep, name).Error; !strings.Contains(got, want) {
			t.Errorf("check %q: error %q, want it to contain %q", name, got, want)
		}
	}
	if d := check(rep, "hung").Duration; d < timeout {
		t.Errorf("hung check: duration %v under the timeout", d)
	}
}

func TestLiveness(t *testing.T) {
	p := probes(t, health.Config{})
	w, rep := probe(t, p.Liveness(), http.MethodGet)
	if w.Code != http.StatusOK || rep.Status != health.StatusOK || len(rep.Checks) != 0 {
		t.Errorf("status %d, body %s", w.Code, w.Body)
	}
	if !strings.Contains(w.Body.String(), `"checks":[]`) {
		t.Errorf("body %s: want an empty checks list", w.Body)
	}
	p = probes(t, health.Config{LivenessChecks: []health.Check{
		{Name: "worker-loop", Run: func(context.Context) error { return errors.New("stuck for 5m") }},
	}})
	w, rep = probe(t, p.Liveness(), http.MethodGet)
	if w.Code != http.StatusServiceUnavailable {
		t.Errorf("status %d, want 503", w.Code)
	}
	wantStatuses(t, rep, map[string]health.Status{"worker-loop": health.StatusFailed})
	// Liveness checks are not readiness checks.
	if w, rep := probe(t, p.Readiness(), http.MethodGet); w.Code != http.StatusOK || len(rep.Checks) != 0 {
		t.Errorf("readiness: status %d, body %s", w.Code, w.Body)
	}
}

func TestMethodNotAllowed(t *testing.T) {
	p := probes(t, health.Config{})
	for _, h := range []http.Handler{p.Liveness(), p.Readiness()} {
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodOptions} {
			w, _ := probe(t, h, m)
			if w.Code != http.StatusMethodNotAllowed {
				t.Errorf("%s: status %d, want 405", m, w.Code)
			}
			if got := w.Header().Get("Allow"); got != "GET, HEAD" {
				t.Errorf("%s: Allow %q", m, got)
			}
		}
	}
}

func TestTheCallerEndingEndsTheProbe(t *testing.T) {
	p := probes(t, health.Config{Timeout: time.Hour, Checks: []health.Check{
		{Name: "slow", Run: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }},
	}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep := p.Ready(ctx)
	if rep.Status != health.StatusFailed || rep.Checks[0].Status != health.StatusTimeout {
		t.Fatalf("report %+v", rep)
	}
	if e := rep.Checks[0].Error; !strings.Contains(e, "the probe's request ended") {
		t.Errorf("error %q does not say the request ended", e)
	}
}

func TestConfigValidate(t *testing.T) {
	run := func(context.Context) error { return nil }
	err := health.Config{
		Timeout:        -time.Second,
		Checks:         []health.Check{{Name: "", Run: run}, {Name: "cache"}, {Name: "cache", Run: run}},
		LivenessChecks: []health.Check{{Name: "loop", Run: run}, {Name: "loop", Run: run}},
	}.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"Config.Timeout -1s is negative", "Config.Checks[0] has no Name", `Config.Checks[1] ("cache") has no Run`,
		`Config.Checks[2]: a check named "cache" is already in the probe`, `Config.LivenessChecks[1]: a check named "loop"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if _, err := health.New(health.Config{Timeout: -1}); err == nil {
		t.Error("New accepted a negative Timeout")
	}
}

// A nil *durable.Queue is refused, naming the field: it used to count as a queue, and the
// first readiness probe panicked.
func TestConfigRefusesATypedNilQueue(t *testing.T) {
	var q *durable.Queue
	if _, err := health.New(health.Config{Queue: q}); err == nil || !strings.Contains(err.Error(), "Config.Queue is a nil *durable.Queue") {
		t.Errorf("New: %v", err)
	}
}

func TestACheckMayNotTakeAQueueCheckName(t *testing.T) {
	q := open(t, sqlite.Open(filepath.Join(t.TempDir(), "q.db")), durable.Config{})
	_, err := health.New(health.Config{Queue: q, Checks: []health.Check{{Name: "store", Run: func(context.Context) error { return nil }}}})
	if err == nil || !strings.Contains(err.Error(), `a check named "store" is already in the probe`) {
		t.Errorf("error %v", err)
	}
}
