package durable_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/durable"
)

// The breaker child: a process with a registry that shares its breakers through the queue's
// database, driven line by line on stdin, answering one line per command on stdout.
const (
	childInstanceEnv = "SWITCHBOARD_DURABLE_CHILD_INSTANCE" // breaker.Config.Instance
	childOpenEnv     = "SWITCHBOARD_DURABLE_CHILD_OPEN"     // breaker.Config.OpenDuration
)

// fleetRefresh is the children's BreakerStoreConfig.RefreshInterval.
const fleetRefresh = 200 * time.Millisecond

// runBreakerChild serves commands:
//
//	trip K, reset K, fail K      the registry's Trip, Reset, a counted failure; "OK"
//	state K                      "STATE <state> <probe owner or ->"
//	burst K N                    N goroutines call Gate at once; "BURST <let through>"; the
//	                             permits are held
//	succeed                      the held permits report success; "OK"
func runBreakerChild() int {
	kind := os.Getenv(childBackendEnv)
	q, err := durable.Open(context.Background(), targetDriver(kind, os.Getenv(childTargetEnv)), durable.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	defer q.Close()
	st, err := durable.NewBreakerStore(q, "fleet", durable.BreakerStoreConfig{RefreshInterval: fleetRefresh})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	defer st.Close()
	open, err := time.ParseDuration(os.Getenv(childOpenEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	reg := breaker.NewRegistry(breaker.Config{Store: st, Instance: os.Getenv(childInstanceEnv), FailureThreshold: 1,
		OpenDuration: open, ProbeTimeout: time.Minute, StoreTimeout: 2 * time.Second,
		OnStoreError: []func(error){func(err error) { fmt.Fprintln(os.Stderr, "store:", err) }}})
	var held []breaker.Permit
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) < 1 {
			continue
		}
		key := ""
		if len(f) > 1 {
			key = f[1]
			reg.Declare(key)
		}
		switch f[0] {
		case "trip":
			fmt.Println(okOr(reg.Trip(key)))
		case "reset":
			fmt.Println(okOr(reg.Reset(key)))
		case "fail":
			p, err := reg.Gate(key)
			if err == nil {
				p.Failure()
			}
			fmt.Println(okOr(err))
		case "state":
			s, err := reg.Get(key)
			owner := s.ProbeOwner
			if owner == "" {
				owner = "-"
			}
			if a := reg.Admission(key); a.State == breaker.StateHalfOpen && a.FreeProbes > 0 && s.State == breaker.StateOpen {
				s.State = breaker.StateHalfOpen // its open time has passed: the next call claims the probes
			}
			if err != nil {
				fmt.Println("ERR", err)
				continue
			}
			fmt.Println("STATE", s.State, owner)
		case "burst":
			n, _ := strconv.Atoi(f[2])
			var mu sync.Mutex
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range n {
				wg.Go(func() {
					<-start
					if p, err := reg.Gate(key); err == nil {
						mu.Lock()
						held = append(held, p)
						mu.Unlock()
					}
				})
			}
			close(start)
			wg.Wait()
			fmt.Println("BURST", len(held))
		case "succeed":
			for _, p := range held {
				p.Success()
			}
			held = nil
			fmt.Println("OK")
		default:
			fmt.Println("ERR unknown command", f[0])
		}
	}
	return 0
}

func okOr(err error) string {
	if err != nil {
		return "ERR " + err.Error()
	}
	return "OK"
}

// breakerChild is a running breaker child.
type breakerChild struct {
	name string
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	mu   sync.Mutex
}

func startBreakerChild(t *testing.T, b backend, name string, open time.Duration) *breakerChild {
	t.Helper()
	return startCommandChild(t, b, name, childEnv+"=breaker", childOpenEnv+"="+open.String())
}

// startCommandChild starts a child process named name on b's database, with env besides,
// that answers a line of stdout to each command line of stdin.
func startCommandChild(t *testing.T, b backend, name string, env ...string) *breakerChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(b.env, append(env, childInstanceEnv+"="+name)...)...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &breakerChild{name: name, cmd: cmd, in: in, out: bufio.NewScanner(out)}
	t.Cleanup(c.stop)
	return c
}

// do sends one command and returns the child's answer.
func (c *breakerChild) do(t *testing.T, format string, args ...any) string {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := fmt.Fprintf(c.in, format+"\n", args...); err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	if !c.out.Scan() {
		t.Fatalf("%s: no answer to %q: %v", c.name, fmt.Sprintf(format, args...), c.out.Err())
	}
	return c.out.Text()
}

// kill ends the child with SIGKILL.
func (c *breakerChild) kill() {
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
}

func (c *breakerChild) stop() {
	_ = c.in.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

// waitStates polls every child until each answers want, within bound, and returns how long it
// took.
func waitStates(t *testing.T, children []*breakerChild, bound time.Duration, want string, key string) time.Duration {
	t.Helper()
	start := time.Now()
	for _, c := range children {
		var got string
		eventually(t, bound, fmt.Sprintf("%s to say %q", c.name, want), func() bool {
			got = c.do(t, "state %s", key)
			return strings.HasPrefix(got, want)
		})
	}
	return time.Since(start)
}

// Three processes on one database share a breaker: a trip by one is seen by all within about
// the refresh interval; when its open time has passed, 3 × 100 goroutines get exactly one probe
// through in the whole fleet; its success closes the breaker everywhere; two processes tripping
// at once make one trip in the store; a reset by one closes it everywhere; a process restarted
// after SIGKILL starts open.
func TestFleetBreakerSharedByThreeProcesses(t *testing.T) {
	eachBackendAndBouncer(t, func(t *testing.T, b backend) {
		const open = 1500 * time.Millisecond
		obs := b.bare(t, durable.Config{})
		view, err := durable.NewBreakerStore(obs, "fleet", durable.BreakerStoreConfig{RefreshInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = view.Close() })
		stored := func(key string) breaker.Shared {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			rows, err := view.Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				if r.Key == key {
					return r
				}
			}
			return breaker.Shared{Key: key, State: breaker.StateClosed}
		}
		fleet := []*breakerChild{
			startBreakerChild(t, b, "p1", open), startBreakerChild(t, b, "p2", open), startBreakerChild(t, b, "p3", open),
		}
		for _, c := range fleet {
			if got := c.do(t, "state k"); !strings.HasPrefix(got, "STATE closed") {
				t.Fatalf("%s at start: %s", c.name, got)
			}
		}

		// A trip by one is seen by all.
		if got := fleet[0].do(t, "fail k"); got != "OK" {
			t.Fatal(got)
		}
		took := waitStates(t, fleet, 10*fleetRefresh, "STATE open", "k")
		t.Logf("a trip in p1 reached p2 and p3 in %s (refresh interval %s)", took, fleetRefresh)

		// The half-open moment: exactly one probe in the fleet.
		waitStates(t, fleet, 5*open, "STATE half-open", "k")
		var wg sync.WaitGroup
		through := make([]int, len(fleet))
		for i, c := range fleet {
			wg.Go(func() {
				_, err := fmt.Sscanf(c.do(t, "burst k 100"), "BURST %d", &through[i])
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if total := through[0] + through[1] + through[2]; total != 1 {
			t.Fatalf("the half-open moment let %v calls through in the fleet, want one probe", through)
		}
		holder := stored("k").ProbeOwner
		for _, c := range fleet {
			if got := c.do(t, "state k"); got != "STATE half-open "+holder {
				t.Fatalf("%s while %s probes: %s", c.name, holder, got)
			}
		}
		for i, c := range fleet {
			if through[i] == 1 {
				c.do(t, "succeed")
			}
		}
		waitStates(t, fleet, 10*fleetRefresh, "STATE closed", "k")

		// Two trips at once: one epoch increment.
		before := fleetEpoch(t, obs, "k")
		tripped := time.Now() // the open period began after this
		wg.Go(func() { fleet[0].do(t, "fail k") })
		wg.Go(func() { fleet[1].do(t, "fail k") })
		wg.Wait()
		if after := stored("k"); after.State != breaker.StateOpen || after.Epoch != before+1 {
			t.Fatalf("two trips at once: stored %+v, epoch before %d", after, before)
		}
		waitStates(t, fleet, 10*fleetRefresh, "STATE open", "k")

		// A process restarted after SIGKILL starts open.
		fleet[2].kill()
		fleet[2] = startBreakerChild(t, b, "p3-restarted", open)
		got := fleet[2].do(t, "state k")
		// On a loaded machine the restart (and, through PgBouncer, its first unprepared
		// statements) may outlast the open period: the breaker is half-open by then.
		if late := time.Since(tripped) >= open; !strings.HasPrefix(got, "STATE open") && !(late && strings.HasPrefix(got, "STATE half-open")) {
			t.Fatalf("the restarted process, %v after the trip (open %v): %s", time.Since(tripped), open, got)
		}

		// A reset from one closes it everywhere.
		if got := fleet[1].do(t, "reset k"); got != "OK" {
			t.Fatal(got)
		}
		waitStates(t, fleet, 10*fleetRefresh, "STATE closed", "k")
	})
}

// fleetEpoch returns the stored epoch of key, closed or not, through a transition that cannot
// apply (from an epoch no row has), which answers with the stored row.
func fleetEpoch(t *testing.T, q *durable.Queue, key string) int64 {
	t.Helper()
	st, err := durable.NewBreakerStore(q, "fleet", durable.BreakerStoreConfig{RefreshInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, applied, err := st.Transition(ctx, breaker.Transition{Key: key, From: 1 << 62, To: breaker.StateClosed, Owner: "observer"})
	if err != nil || applied {
		t.Fatalf("reading the epoch: %v, applied %v", err, applied)
	}
	return s.Epoch
}

// Two processes share a breaker on a PostgreSQL server of the test's own, which the test
// freezes (SIGSTOP) mid-run: a trip still fails fast, bounded by the registry's StoreTimeout,
// calls flow on each process's local state, and once the server is thawed the trip made while
// it was frozen is published and reaches the other process.
func TestFleetBreakerOnAFrozenDatabase(t *testing.T) {
	srv := startHungServer(t)
	b := postgresBackend(t, srv.dsn)
	const open = time.Hour
	p1, p2 := startBreakerChild(t, b, "p1", open), startBreakerChild(t, b, "p2", open)
	for _, c := range []*breakerChild{p1, p2} {
		if got := c.do(t, "state k"); !strings.HasPrefix(got, "STATE closed") {
			t.Fatalf("%s at start: %s", c.name, got)
		}
	}
	srv.stop(t)
	thawed := false
	defer func() {
		if !thawed {
			srv.cont(t)
		}
	}()
	began := time.Now()
	if got := p1.do(t, "fail k"); got != "OK" {
		t.Fatal(got)
	}
	took := time.Since(began)
	t.Logf("a trip with the database frozen took %s (the store's Timeout 250 ms, the registry's StoreTimeout 2 s)", took)
	if took > 3*time.Second {
		t.Fatalf("a trip waited %s on the frozen database", took)
	}
	if got := p1.do(t, "state k"); !strings.HasPrefix(got, "STATE open") {
		t.Fatalf("p1 with the database frozen: %s", got)
	}
	if got := p2.do(t, "fail other"); got != "OK" { // p2's calls flow on its own state
		t.Fatal(got)
	}
	if got := p2.do(t, "state k"); !strings.HasPrefix(got, "STATE closed") {
		t.Fatalf("p2 cannot know of p1's trip yet: %s", got)
	}
	srv.cont(t)
	thawed = true
	took = waitStates(t, []*breakerChild{p2}, 30*time.Second, "STATE open", "k")
	t.Logf("after the thaw p2 learned of the trip in %s", took)
}

// shutdown stops the throwaway server (pg_ctl stop, fast: connections are cut) and start starts
// it again on the same port and data.
func (s *hungServer) shutdown(t *testing.T) {
	t.Helper()
	if out, err := s.run(60*time.Second, "pg_ctl", "-D", s.data, "-m", "fast", "-w", "-t", "30", "stop"); err != nil {
		t.Fatalf("pg_ctl stop: %v\n%s", err, out)
	}
}

func (s *hungServer) start(t *testing.T) {
	t.Helper()
	if out, err := s.run(60*time.Second, "pg_ctl", "-D", s.data, "-l", s.dir+"/server.log", "-w", "-t", "30", "start"); err != nil {
		t.Fatalf("pg_ctl start: %v\n%s", err, out)
	}
	pidFile, err := os.ReadFile(s.data + "/postmaster.pid")
	if err != nil {
		t.Fatal(err)
	}
	if s.pid, err = strconv.Atoi(strings.TrimSpace(strings.SplitN(string(pidFile), "\n", 2)[0])); err != nil {
		t.Fatalf("postmaster.pid: %v", err)
	}
}

// The same with the server stopped (pg_ctl stop) and started again: calls flow on local state
// while it is down, and the trip made then reaches the other process once it is back.
func TestFleetBreakerOnAStoppedDatabase(t *testing.T) {
	srv := startHungServer(t)
	b := postgresBackend(t, srv.dsn)
	p1, p2 := startBreakerChild(t, b, "p1", time.Hour), startBreakerChild(t, b, "p2", time.Hour)
	for _, c := range []*breakerChild{p1, p2} {
		if got := c.do(t, "state k"); !strings.HasPrefix(got, "STATE closed") {
			t.Fatalf("%s at start: %s", c.name, got)
		}
	}
	srv.shutdown(t)
	began := time.Now()
	if got := p1.do(t, "fail k"); got != "OK" {
		t.Fatal(got)
	}
	took := time.Since(began)
	if took > 3*time.Second {
		t.Fatalf("a trip waited %s on the stopped database", took)
	}
	if got := p1.do(t, "state k"); !strings.HasPrefix(got, "STATE open") {
		t.Fatalf("p1 with the database stopped: %s", got)
	}
	if got := p2.do(t, "state k"); !strings.HasPrefix(got, "STATE closed") {
		t.Fatalf("p2 cannot know of p1's trip yet: %s", got)
	}
	srv.start(t)
	learned := waitStates(t, []*breakerChild{p2}, 60*time.Second, "STATE open", "k")
	t.Logf("a trip with the database stopped took %s; after its restart p2 learned of it in %s", took, learned)
}
