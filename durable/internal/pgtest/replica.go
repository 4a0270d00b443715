package pgtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable/internal/pgxconn"
)

// StandbyName is the standby's application_name in a Replicated pair, the name the primary's
// synchronous_standby_names waits for.
const StandbyName = "standby1"

// replicationConf is what both servers of a Replicated pair add to their settings: WAL for a
// standby, senders for it to connect to, and queries on the standby while it replays.
const replicationConf = `wal_level = replica
max_wal_senders = 5
hot_standby = on
synchronous_commit = on
`

// Replicated is a primary and a synchronous streaming-replication standby of a test's own,
// started by StartReplicated: a test of a failover kills the primary (Kill) and promotes the
// standby (Promote), and its clients, on DSN, find the new primary.
type Replicated struct {
	// Primary accepts writes; a commit on it returns once the standby has flushed its WAL
	// (synchronous_commit = on, synchronous_standby_names = StandbyName), so that every commit
	// acknowledged before a Kill is on the standby.
	Primary *Server
	// Standby replays the primary's WAL and answers read-only queries (hot_standby) until
	// Promote makes it a primary. It requires no synchronous standby of its own: promoted, it
	// commits alone.
	Standby *Server
	// DSN reaches whichever of the two accepts writes: both hosts, the primary first, with
	// target_session_attrs=read-write, so that pgx tries each in turn and keeps the first
	// connection that is not read-only. While the primary is dead and the standby not yet
	// promoted, a connection fails.
	DSN string
}

// StartReplicated starts a primary (as StartServer does, with replication on and a replication
// line for 127.0.0.1 in pg_hba.conf) and a standby made from it with pg_basebackup -R, on
// ports of their own, then makes the standby synchronous and waits until the primary reports
// it so (pg_stat_replication's sync_state). Both are stopped and their directories removed when
// the test ends. Without the binaries (pg_basebackup too) the test is skipped, except under
// CI=true, where it fails.
func StartReplicated(t testing.TB) *Replicated {
	t.Helper()
	const who = "pgtest.StartReplicated"
	began := time.Now()
	p := newServer(t, who, 100)
	if !executable(filepath.Join(p.bindir, "pg_basebackup")) {
		need(t, "%s: no pg_basebackup in %s", who, p.bindir)
	}
	p.extraConf = replicationConf
	if out, err := p.run("initdb", "-D", p.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync"); err != nil {
		t.Fatalf("%s: initdb: %v\n%s", who, err, out)
	}
	if err := p.appendConf("postgresql.conf", "\ninclude 'pgtest.conf'\n"); err != nil {
		t.Fatalf("%s: %v", who, err)
	}
	if err := p.appendConf("pg_hba.conf", "\nhost replication all 127.0.0.1/32 trust\n"); err != nil {
		t.Fatalf("%s: %v", who, err)
	}
	p.listen(who)

	s := newServer(t, who, 100)
	s.extraConf = replicationConf
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d user=postgres application_name=%s", p.port, StandbyName)
	// -R writes primary_conninfo (with the application_name) and standby.signal; -c fast
	// checkpoints at once rather than spread over minutes.
	if out, err := s.run("pg_basebackup", "-D", s.data, "-R", "-X", "stream", "-c", "fast", "-d", conninfo); err != nil {
		t.Fatalf("%s: pg_basebackup: %v\n%s", who, err, out)
	}
	s.listen(who) // its own pgtest.conf: the primary's, copied, named the primary's port

	db, err := pgxconn.Open(p.DSN)
	if err != nil {
		t.Fatalf("%s: %v", who, err)
	}
	defer func() { _ = db.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Set on the primary only, after the copy: a promoted standby with it would wait forever
	// for a standby of its own.
	if _, err := db.ExecContext(ctx, "ALTER SYSTEM SET synchronous_standby_names = '"+StandbyName+"'"); err != nil {
		t.Fatalf("%s: %v", who, err)
	}
	if _, err := db.ExecContext(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatalf("%s: %v", who, err)
	}
	for {
		var state string
		err := db.QueryRowContext(ctx, "SELECT sync_state FROM pg_stat_replication WHERE application_name = $1", StandbyName).Scan(&state)
		if err == nil && state == "sync" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%s: the standby is not a synchronous standby of the primary after 60 s (sync_state %q, %v)", who, state, err)
		}
		time.Sleep(20 * time.Millisecond) // polling pg_stat_replication, within ctx's deadline
	}
	r := &Replicated{Primary: p, Standby: s,
		DSN: fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write", p.port, s.port)}
	t.Logf("%s: primary on 127.0.0.1:%d, synchronous standby on 127.0.0.1:%d, ready in %v",
		who, p.port, s.port, time.Since(began).Round(time.Millisecond))
	return r
}

// Kill kills the server as a crash of its host would, without warning: SIGKILL to the
// postmaster and every one of its processes (backends, WAL writer, WAL senders, ...), so that
// no connection gets an answer or a goodbye and nothing more is sent to a standby. It stops the
// postmaster first (SIGSTOP), so that it forks nothing while its children are listed, and waits
// until every process is gone. Start may start it again (it recovers from its WAL). It needs
// /proc (Linux); elsewhere the test is skipped.
func (s *Server) Kill() {
	s.t.Helper()
	s.Thaw()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pid == 0 {
		s.t.Fatalf("pgtest.Server.Kill: the server is stopped")
	}
	if _, err := children(s.pid); err != nil {
		s.t.Skipf("pgtest.Server.Kill: listing the server's processes: %v", err)
	}
	if err := signal(s.pid, sigStop); err != nil {
		s.t.Fatalf("pgtest.Server.Kill: SIGSTOP postmaster %d: %v", s.pid, err)
	}
	procs := []int{s.pid}
	for range 2 { // a child forked just before the postmaster stopped may show up late
		kids, _ := children(s.pid)
		for _, c := range kids {
			if !slices.Contains(procs, c) {
				procs = append(procs, c)
			}
		}
	}
	for _, p := range procs {
		if err := signal(p, os.Kill); err != nil && p == s.pid {
			s.t.Fatalf("pgtest.Server.Kill: SIGKILL postmaster %d: %v", p, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range procs {
		for {
			st, _, err := procStat(p)
			if err != nil || st == 'Z' || st == 'X' {
				break // gone (a zombie holds no socket)
			}
			if time.Now().After(deadline) {
				s.t.Fatalf("pgtest.Server.Kill: process %d is still in state %c after SIGKILL", p, st)
			}
			time.Sleep(time.Millisecond)
		}
	}
	s.pid = 0
	// The dead postmaster's pid file is stale: the cleanup has no server to stop.
	if err := os.Remove(filepath.Join(s.data, "postmaster.pid")); err != nil {
		s.t.Fatalf("pgtest.Server.Kill: %v", err)
	}
}

// Promote makes a standby a primary (pg_ctl promote -w): it stops replaying, ends its recovery
// and accepts writes when Promote returns.
func (s *Server) Promote() {
	s.t.Helper()
	if out, err := s.run("pg_ctl", "-D", s.data, "-w", "-t", "60", "promote"); err != nil {
		s.t.Fatalf("pgtest.Server.Promote: pg_ctl promote: %v\n%s", err, out)
	}
}
