package pgtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// bouncer is a PgBouncer process in front of a throwaway server, a child of the test process.
type bouncer struct {
	cmd  *exec.Cmd
	port int
	dir  string
	done chan struct{} // closed when the process has exited (err set)
	err  error
}

// pgbouncerBinary finds pgbouncer as scripts/pgbouncer-lib.sh does: $PGBOUNCER, PATH, then
// /usr/sbin, where Debian installs it outside a non-root PATH.
func pgbouncerBinary() (string, bool) {
	if p := os.Getenv("PGBOUNCER"); p != "" && executable(p) {
		return p, true
	}
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, true
	}
	if executable("/usr/sbin/pgbouncer") {
		return "/usr/sbin/pgbouncer", true
	}
	return "", false
}

// bouncerConf is the configuration scripts/pgbouncer-lib.sh writes, with a quicker retry of a
// failed server login (a test stops and starts its server) and a query_wait_timeout of the
// test's: transaction pooling, every
// database name passed through to the server's (a wildcard entry), the user postgres let in
// without a password (the server trusts it too) and admitted to the admin console, at most
// maxConns server connections in all (one user: max_user_connections bounds every pool
// together), and no unix socket, so that a port PgBouncer cannot bind stops it.
const bouncerConf = `[databases]
* = host=127.0.0.1 port=%[1]d

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %[2]d
unix_socket_dir =
auth_type = trust
auth_file = %[3]s/userlist.txt
admin_users = postgres
pool_mode = transaction
max_client_conn = 2000
default_pool_size = %[4]d
max_user_connections = %[5]d
max_db_connections = %[5]d
server_idle_timeout = 5
server_login_retry = 1
query_wait_timeout = %[6]s
autodb_idle_timeout = 60
logfile = %[3]s/pgbouncer.log
log_connections = 0
log_disconnections = 0
`

// startBouncer starts PgBouncer in dir (owned by own, who runs it) in front of the server on
// 127.0.0.1:serverPort, trying three free ports; queryWait is its query_wait_timeout.
func startBouncer(dir, bin string, own owner, serverPort, maxConns, poolSize int, queryWait time.Duration) (*bouncer, error) {
	poolSize = min(poolSize, maxConns)
	if err := writeOwned(filepath.Join(dir, "userlist.txt"), `"postgres" ""`+"\n", own); err != nil {
		return nil, err
	}
	var errs []error
	for range 3 { // a free port may be taken between finding it and PgBouncer binding it
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		b, err := tryBouncer(dir, bin, own, port, fmt.Sprintf(bouncerConf, serverPort, port, dir, poolSize, maxConns, fmt.Sprintf("%.3f", queryWait.Seconds())))
		if err == nil {
			return b, nil
		}
		errs = append(errs, fmt.Errorf("port %d: %w", port, err))
	}
	return nil, fmt.Errorf("PgBouncer did not start: %w", errors.Join(errs...))
}

// tryBouncer starts PgBouncer with conf, listening on port, and waits for its log to say so.
func tryBouncer(dir, bin string, own owner, port int, conf string) (*bouncer, error) {
	ini := filepath.Join(dir, "pgbouncer.ini")
	logFile := filepath.Join(dir, "pgbouncer.log")
	_ = os.Remove(logFile)
	if err := writeOwned(ini, conf, own); err != nil {
		return nil, err
	}
	// What PgBouncer says before it opens its log file goes to its stderr.
	stderr, err := os.Create(filepath.Join(dir, "pgbouncer.stderr"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = stderr.Close() }() // the child has its own copy
	// The open-file limit raised to the hard limit, for max_client_conn; exec keeps the pid.
	cmd := exec.Command("/bin/sh", "-c", `ulimit -n "$(ulimit -Hn)" 2>/dev/null; exec "$0" "$1"`, bin, ini)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = stderr, stderr
	own.apply(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	b := &bouncer{cmd: cmd, port: port, dir: dir, done: make(chan struct{})}
	go func() {
		b.err = cmd.Wait()
		close(b.done)
	}()
	listening := fmt.Appendf(nil, "listening on 127.0.0.1:%d\n", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		log, _ := os.ReadFile(logFile)
		if bytes.Contains(log, listening) {
			return b, nil
		}
		select {
		case <-b.done:
			out, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.stderr"))
			return nil, fmt.Errorf("exited (%v):\n%s\n%s", b.err, out, log)
		default:
		}
		if time.Now().After(deadline) {
			_ = b.stop()
			return nil, fmt.Errorf("not listening after 30s:\n%s", log)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stop shuts PgBouncer down at once (SIGTERM), killing it if it has not exited in 10 seconds.
func (b *bouncer) stop() error {
	select {
	case <-b.done:
		log, _ := os.ReadFile(filepath.Join(b.dir, "pgbouncer.log"))
		return fmt.Errorf("PgBouncer had exited before it was stopped (%v):\n%s", b.err, log)
	default:
	}
	if err := b.cmd.Process.Signal(sigTerm); err != nil {
		<-b.done
		return nil // exited meanwhile
	}
	select {
	case <-b.done:
		return nil
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.done
		return fmt.Errorf("PgBouncer (pid %d) ignored SIGTERM for 10s: killed", b.cmd.Process.Pid)
	}
}

// writeOwned writes a file that own (who runs the server and PgBouncer) may read.
func writeOwned(path, content string, own owner) error {
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		return err
	}
	return own.chown(path)
}
