//go:build unix

package pgtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"
)

// processesSupported: a throwaway server's processes can be run as its owner and signalled.
const processesSupported = true

var (
	sigStop os.Signal = syscall.SIGSTOP
	sigCont os.Signal = syscall.SIGCONT
	sigTerm os.Signal = syscall.SIGTERM
)

// owner is the user the server's processes run as: postgres when the test runs as root
// (initdb, postgres and pgbouncer refuse to run as root), else the test's own user (set false).
type owner struct {
	set      bool
	uid, gid uint32
}

// lookupOwner returns the owner of a throwaway server's processes.
func lookupOwner() (owner, error) {
	if os.Geteuid() != 0 {
		return owner{}, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return owner{}, fmt.Errorf("running as root and there is no postgres user to run the server: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return owner{}, fmt.Errorf("the postgres user's ids %q:%q are not numbers", u.Uid, u.Gid)
	}
	return owner{set: true, uid: uint32(uid), gid: uint32(gid)}, nil
}

// apply makes cmd run as o.
func (o owner) apply(cmd *exec.Cmd) {
	if o.set {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: o.uid, Gid: o.gid}}
	}
}

// chown gives path to o.
func (o owner) chown(path string) error {
	if !o.set {
		return nil
	}
	return os.Chown(path, int(o.uid), int(o.gid))
}

// signal sends sig to process pid.
func signal(pid int, sig os.Signal) error {
	return syscall.Kill(pid, sig.(syscall.Signal))
}

// procStat returns the state and parent of a process, from /proc (Linux).
func procStat(pid int) (state byte, ppid int, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, b)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, b)
	}
	ppid, err = strconv.Atoi(f[1])
	return f[0][0], ppid, err
}

// children lists the processes whose parent is pid, from /proc (Linux).
func children(pid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	if _, _, err := procStat(pid); err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, pp, err := procStat(p); err == nil && pp == pid {
			out = append(out, p)
		}
	}
	return out, nil
}
