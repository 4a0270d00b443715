package benchmarks

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/durable/durabletest"
)

// clockTick is the unit of the CPU times of /proc/PID/stat: USER_HZ, 100 a second on every
// Linux the kernel's ABI serves.
const clockTick = 10 * time.Millisecond

// serverCPU reads the CPU time the PostgreSQL server behind db has used so far: its postmaster's
// own and that of its children, those still running (the backends, the background workers) and
// those it has reaped (a backend whose connection closed). It works when the server runs on this
// machine and its data directory's postmaster.pid is readable (the benchmarks' servers, started
// as the same user or read by root); ok is false otherwise, and the drains then report no server
// CPU. The difference of two readings is the server's work between them, of every session, the
// checkpointer and autovacuum included: what a drain costs the database.
func serverCPU(ctx context.Context, db *sql.DB) (cpu time.Duration, ok bool) {
	var dir string
	if err := db.QueryRowContext(ctx, "SHOW data_directory").Scan(&dir); err != nil {
		return 0, false
	}
	pidFile, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	postmaster, _, _ := strings.Cut(string(pidFile), "\n")
	self, ok := procTimes(postmaster)
	if !ok {
		return 0, false
	}
	total := self.user + self.system + self.children
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	for _, p := range procs {
		if p.Name()[0] < '0' || p.Name()[0] > '9' {
			continue
		}
		if t, ok := procTimes(p.Name()); ok && t.parent == postmaster {
			total += t.user + t.system
		}
	}
	return time.Duration(total) * clockTick, true
}

// procStat is what serverCPU reads of a process's /proc/PID/stat, in clock ticks.
type procStat struct {
	parent                 string
	user, system, children int64 // children: its reaped children's user and system time
}

// procTimes reads /proc/PID/stat of pid; ok is false when it cannot (the process is gone).
func procTimes(pid string) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return procStat{}, false
	}
	// The command name, field 2, is in parentheses and may hold spaces: the fields after
	// it start after its last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); ppid is field 4, utime 14, stime 15, cutime 16, cstime 17.
	if len(f) < 15 {
		return procStat{}, false
	}
	n := func(field int) int64 { v, _ := strconv.ParseInt(f[field-3], 10, 64); return v }
	return procStat{parent: f[1], user: n(14), system: n(15), children: n(16) + n(17)}, true
}

// TestServerCPU: a statement that keeps the server busy for a while shows in the server's CPU
// time read before and after it.
func TestServerCPU(t *testing.T) {
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", durabletest.PostgresDSNEnv)
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	before, ok := serverCPU(ctx, db)
	if !ok {
		t.Skip("the server's data directory or processes cannot be read from here: the drains report no server CPU")
	}
	var n int64
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM generate_series(1, 5000000)").Scan(&n); err != nil || n != 5_000_000 {
		t.Fatalf("busy statement: %d, %v", n, err)
	}
	after, ok := serverCPU(ctx, db)
	if !ok || after-before < 100*time.Millisecond {
		t.Fatalf("server CPU %v before, %v after (ok %v): the busy statement's work does not show", before, after, ok)
	}
	t.Logf("server CPU of the busy statement: %v", after-before)
}
