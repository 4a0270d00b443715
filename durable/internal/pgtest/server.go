package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// ServerConfig configures a throwaway server of StartServer.
type ServerConfig struct {
	// MaxConnections is the server's max_connections; 0 means 100. Its three
	// superuser_reserved_connections are open to the tests' user, postgres, a superuser.
	MaxConnections int
	// PgBouncer starts a PgBouncer in transaction pooling mode in front of the server
	// (Server.BouncerDSN), which never opens more than MaxConnections-5 connections to it, so
	// that a test can still connect directly while PgBouncer's pools are full.
	PgBouncer bool
	// PoolSize is PgBouncer's default_pool_size, the server connections of the pool of one
	// database; 0 means 20. It is capped at MaxConnections-5.
	PoolSize int
	// QueryWaitTimeout is PgBouncer's query_wait_timeout: how long a client's statement may
	// wait for a server connection before PgBouncer ends the client's connection with
	// "FATAL: query_wait_timeout" (08P01). That is also what a client gets while the server is
	// stopped: PgBouncer keeps it waiting, it does not refuse it. 0 means PgBouncer's default,
	// 120 s; PgBouncer counts in milliseconds.
	QueryWaitTimeout time.Duration
}

// Server is a PostgreSQL server of one test's own, started by StartServer: a test that stops,
// freezes or fills up a server uses one rather than the shared server of DSNEnv. Its methods
// belong to the test's goroutine (they fail the test with t.Fatal).
type Server struct {
	// DSN reaches the server directly (database postgres, user postgres, no password).
	DSN string
	// BouncerDSN reaches it through its PgBouncer (ServerConfig.PgBouncer), "" without one.
	// See BouncerDSN (the function) for what a client must do behind it.
	BouncerDSN string

	t                 testing.TB
	dir, data, bindir string
	port              int
	own               owner
	maxConns          int
	extraConf         string // more settings of pgtest.conf (a replicated server's)

	mu      sync.Mutex
	pid     int   // the postmaster's, 0 while stopped
	frozen  []int // processes Freeze stopped
	bouncer *bouncer
}

// StartServer initialises and starts a PostgreSQL server of the test's own (initdb into a
// temporary directory, trust authentication, fsync off but synchronous_commit on, listening on 127.0.0.1 at a free port
// and on a unix socket in that directory), and a PgBouncer in front of it if cfg asks. When the
// test ends, both are stopped and the directory removed, whatever happened. As root, the
// server and PgBouncer run as the postgres user (they refuse to run as root).
//
// The server's binaries are found as scripts/with-postgres.sh finds them: in $PG_BINDIR, the
// newest /usr/lib/postgresql/*/bin, or on PATH; pgbouncer in $PGBOUNCER, on PATH or in
// /usr/sbin. Without them the test is skipped, except under CI=true, where it fails.
func StartServer(t testing.TB, cfg ServerConfig) *Server {
	t.Helper()
	if cfg.MaxConnections == 0 {
		cfg.MaxConnections = 100
	}
	if cfg.PoolSize == 0 {
		cfg.PoolSize = 20
	}
	if cfg.QueryWaitTimeout == 0 {
		cfg.QueryWaitTimeout = 120 * time.Second
	}
	if cfg.MaxConnections < 0 || cfg.PoolSize < 0 || cfg.QueryWaitTimeout < time.Millisecond {
		t.Fatalf("pgtest.StartServer: MaxConnections %d, PoolSize %d and QueryWaitTimeout %v must be positive (or 0 for the default)",
			cfg.MaxConnections, cfg.PoolSize, cfg.QueryWaitTimeout)
	}
	if cfg.PgBouncer && cfg.MaxConnections <= bouncerReserve {
		t.Fatalf("pgtest.StartServer: MaxConnections %d leaves PgBouncer no connection (it keeps %d for direct ones)",
			cfg.MaxConnections, bouncerReserve)
	}
	var bouncerBin string
	if cfg.PgBouncer {
		var ok bool
		if bouncerBin, ok = pgbouncerBinary(); !ok {
			need(t, "pgtest.StartServer: no pgbouncer binary found; install pgbouncer or set PGBOUNCER")
		}
	}
	began := time.Now()
	s := newServer(t, "pgtest.StartServer", cfg.MaxConnections)
	if out, err := s.run("initdb", "-D", s.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync"); err != nil {
		t.Fatalf("pgtest.StartServer: initdb: %v\n%s", err, out)
	}
	if err := s.appendConf("postgresql.conf", "\ninclude 'pgtest.conf'\n"); err != nil {
		t.Fatalf("pgtest.StartServer: %v", err)
	}
	s.listen("pgtest.StartServer")
	if cfg.PgBouncer {
		b, err := startBouncer(s.dir, bouncerBin, s.own, s.port, cfg.MaxConnections-bouncerReserve, cfg.PoolSize, cfg.QueryWaitTimeout)
		if err != nil {
			t.Fatalf("pgtest.StartServer: %v", err)
		}
		s.mu.Lock()
		s.bouncer = b
		s.mu.Unlock()
		s.BouncerDSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", b.port)
	}
	t.Logf("pgtest.StartServer: %s on 127.0.0.1:%d (max_connections %d), PgBouncer %v, ready in %v",
		s.bindir, s.port, cfg.MaxConnections, cfg.PgBouncer, time.Since(began).Round(time.Millisecond))
	return s
}

// newServer checks that a throwaway server can run here (skipping the test, or failing it under
// CI=true, when it cannot) and returns one not yet initialised: its directory, removed with
// whatever runs in it when the test ends, owned by the user its processes run as. who names
// the caller in messages.
func newServer(t testing.TB, who string, maxConns int) *Server {
	t.Helper()
	if !processesSupported {
		need(t, "%s: throwaway PostgreSQL servers need a unix system", who)
	}
	bindir, ok := serverBindir()
	if !ok {
		need(t, "%s: no PostgreSQL server binaries (initdb, pg_ctl) found; install postgresql or set PG_BINDIR", who)
	}
	own, err := lookupOwner()
	if err != nil {
		need(t, "%s: %v", who, err)
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		t.Fatalf("%s: %v", who, err)
	}
	s := &Server{t: t, dir: dir, data: filepath.Join(dir, "data"), bindir: bindir, own: own, maxConns: maxConns}
	t.Cleanup(s.destroy)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("%s: %v", who, err)
	}
	if err := own.chown(dir); err != nil {
		t.Fatalf("%s: %v", who, err)
	}
	return s
}

// listen starts the initialised server on a free port of 127.0.0.1 and sets its DSN.
func (s *Server) listen(who string) {
	s.t.Helper()
	var lastErr error
	for range 3 { // a free port may be taken between finding it and the server binding it
		if s.port, lastErr = freePort(); lastErr != nil {
			break
		}
		if lastErr = s.writeConf(); lastErr != nil {
			break
		}
		if lastErr = s.pgCtlStart(); lastErr == nil {
			break
		}
		s.t.Logf("%s: port %d: %v", who, s.port, lastErr)
	}
	if lastErr != nil {
		s.t.Fatalf("%s: %v", who, lastErr)
	}
	s.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// bouncerReserve is how many of the server's connections PgBouncer leaves to direct clients.
const bouncerReserve = 5

// need skips the test, or fails it under CI=true, where every test must run.
func need(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format+" (CI=true: this test must run)", args...)
	}
	t.Skipf(format, args...)
}

// serverBindir finds initdb and pg_ctl as scripts/with-postgres.sh does.
func serverBindir() (string, bool) {
	if d := os.Getenv("PG_BINDIR"); d != "" && executable(filepath.Join(d, "initdb")) {
		return d, true
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { // the newest major version first
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if executable(filepath.Join(d, "initdb")) && executable(filepath.Join(d, "pg_ctl")) {
			return d, true
		}
	}
	initdb, err1 := exec.LookPath("initdb")
	_, err2 := exec.LookPath("pg_ctl")
	if err1 == nil && err2 == nil {
		if real, err := filepath.EvalSymlinks(initdb); err == nil {
			return filepath.Dir(real), true
		}
	}
	return "", false
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// run runs a server binary as the server's owner, in the server's directory (the owner may not
// be able to enter the test's).
func (s *Server) run(bin string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(s.bindir, bin), args...)
	cmd.Dir = s.dir
	cmd.WaitDelay = 5 * time.Second
	s.own.apply(cmd)
	return cmd.CombinedOutput()
}

// appendConf appends text to the file name of the data directory.
func (s *Server) appendConf(name, text string) error {
	f, err := os.OpenFile(filepath.Join(s.data, name), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeConf writes the settings of the test's server, pgtest.conf, which postgresql.conf
// includes: for tests only, durability against an operating system crash traded for speed
// (fsync off). synchronous_commit stays on: a commit is written to the WAL (not flushed to
// disk) before it is acknowledged, so that one acknowledged survives Stop, a crash of the
// server; off, the last fraction of a second of commits would be lost.
func (s *Server) writeConf() error {
	socketDir := s.dir
	if len(socketDir) > 80 { // a unix socket's path is limited to about 100 bytes: TCP only
		socketDir = ""
	}
	conf := fmt.Sprintf(`listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = '%s'
max_connections = %d
fsync = off
full_page_writes = off
shared_buffers = 16MB
`, s.port, socketDir, s.maxConns) + s.extraConf
	path := filepath.Join(s.data, "pgtest.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return err
	}
	return s.own.chown(path)
}

// pgCtlStart starts the server and records its postmaster.
func (s *Server) pgCtlStart() error {
	logFile := filepath.Join(s.dir, "server.log")
	if out, err := s.run("pg_ctl", "-D", s.data, "-l", logFile, "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(logFile)
		return fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	b, err := os.ReadFile(filepath.Join(s.data, "postmaster.pid"))
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		return fmt.Errorf("postmaster.pid: %v", err)
	}
	s.mu.Lock()
	s.pid = pid
	s.mu.Unlock()
	return nil
}

// Log returns what the server has logged so far (its log file), for a test that counts what
// the server refused or reported: "FATAL:  sorry, too many clients already" for each
// connection refused for lack of slots, say, which the clients may retry or log only once.
func (s *Server) Log() string {
	s.t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dir, "server.log"))
	if err != nil {
		s.t.Fatalf("pgtest.Server.Log: %v", err)
	}
	return string(b)
}

// Stop stops the server as a crash would (pg_ctl stop -m immediate: no checkpoint, every
// connection cut; Start recovers from the WAL). A frozen server is thawed first. PgBouncer,
// if any, keeps running and does not refuse its clients: their statements wait for a server
// connection, until ServerConfig.QueryWaitTimeout ends the client's connection.
func (s *Server) Stop() {
	s.t.Helper()
	s.Thaw()
	if out, err := s.run("pg_ctl", "-D", s.data, "-m", "immediate", "-w", "-t", "60", "stop"); err != nil {
		s.t.Fatalf("pgtest.Server.Stop: pg_ctl stop: %v\n%s", err, out)
	}
	s.mu.Lock()
	s.pid = 0
	s.mu.Unlock()
}

// Start starts the server again after Stop, on the same data and port.
func (s *Server) Start() {
	s.t.Helper()
	if err := s.pgCtlStart(); err != nil {
		s.t.Fatalf("pgtest.Server.Start: %v", err)
	}
}

// Freeze stops every process of the server with SIGSTOP, the postmaster first (so that it
// starts no more), then its children (backends, checkpointer, WAL writer, ...): connections
// stay open and nothing answers, as on a hung host. Thaw resumes them. It needs /proc (Linux);
// elsewhere the test is skipped.
func (s *Server) Freeze() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pid == 0 {
		s.t.Fatalf("pgtest.Server.Freeze: the server is stopped")
	}
	if _, err := children(s.pid); err != nil {
		s.t.Skipf("pgtest.Server.Freeze: listing the server's processes: %v", err)
	}
	if err := signal(s.pid, sigStop); err != nil {
		s.t.Fatalf("pgtest.Server.Freeze: SIGSTOP postmaster %d: %v", s.pid, err)
	}
	s.frozen = append(s.frozen, s.pid)
	// Twice: a child the postmaster forked just before it stopped may show up late.
	for range 2 {
		kids, _ := children(s.pid)
		for _, c := range kids {
			if !slices.Contains(s.frozen, c) && signal(c, sigStop) == nil {
				s.frozen = append(s.frozen, c)
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range s.frozen {
		for {
			st, _, err := procStat(p)
			if err != nil || st == 'T' || st == 't' || st == 'Z' {
				break // stopped, or gone
			}
			if time.Now().After(deadline) {
				s.t.Fatalf("pgtest.Server.Freeze: process %d is still in state %c after SIGSTOP", p, st)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// Thaw resumes the processes Freeze stopped; without Freeze it does nothing.
func (s *Server) Thaw() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.frozen) == 0 {
		return
	}
	for _, p := range s.frozen {
		_ = signal(p, sigCont)
	}
	if s.pid != 0 { // and any child it had forked as it stopped
		kids, _ := children(s.pid)
		for _, c := range kids {
			_ = signal(c, sigCont)
		}
	}
	s.frozen = nil
}

// destroy stops PgBouncer and the server and removes the directory, whatever state they are in.
func (s *Server) destroy() {
	s.Thaw()
	s.mu.Lock()
	b := s.bouncer
	s.bouncer = nil
	s.mu.Unlock()
	if b != nil {
		if err := b.stop(); err != nil {
			s.t.Errorf("pgtest: stopping PgBouncer: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(s.data, "postmaster.pid")); err == nil {
		if out, err := s.run("pg_ctl", "-D", s.data, "-m", "immediate", "-w", "-t", "60", "stop"); err != nil {
			s.t.Errorf("pgtest: pg_ctl stop: %v\n%s", err, out)
			s.mu.Lock()
			if s.pid != 0 { // do not leave a server running on a removed directory
				_ = signal(s.pid, os.Kill)
			}
			s.mu.Unlock()
		}
	}
	if s.t.Failed() { // the logs go with the directory: show their ends first
		for _, name := range []string{"server.log", "pgbouncer.log"} {
			if b, err := os.ReadFile(filepath.Join(s.dir, name)); err == nil {
				s.t.Logf("pgtest: the end of %s:\n%s", name, tail(string(b), 40))
			}
		}
	}
	if err := os.RemoveAll(s.dir); err != nil {
		s.t.Errorf("pgtest: removing %s: %v", s.dir, err)
	}
}

// tail returns the last n lines of text.
func tail(text string, n int) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
