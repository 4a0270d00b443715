package durable_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors/ratelimit"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/mediator"
)

// The rate limit child: a process whose limiter shares a limit of fleetRate a second through
// the queue's database, calling the loopback endpoint childURLEnv as fast as the limit lets it
// once "go" comes on stdin, and printing every second on stdout
//
//	STATS <calls> <store statements> <store calls made on a call's goroutine> <fallback 0|1>
//
// until stdin closes.
const (
	childURLEnv = "SWITCHBOARD_DURABLE_CHILD_URL"
	fleetRate   = 100
	fleetLease  = 500 * time.Millisecond // RateLimitStoreConfig's default
)

// Hit is the child's request: one call of the endpoint.
type Hit struct {
	mediator.Returns[*HitReply]
}

// HitReply is Hit's response.
type HitReply struct{}

// countingStore is a ratelimit.PermitStore that counts the leases made on the goroutine of a call
// (one whose stack holds mediator's Send): the request path.
type countingStore struct {
	ratelimit.PermitStore
	onRequestPath atomic.Int64
}

func (c *countingStore) Lease(ctx context.Context, r ratelimit.LeaseRequest) (ratelimit.Lease, error) {
	buf := make([]byte, 8<<10)
	if strings.Contains(string(buf[:runtime.Stack(buf, false)]), "mediator.Send") {
		c.onRequestPath.Add(1)
	}
	return c.PermitStore.Lease(ctx, r)
}

func runRateLimitChild() int {
	q, err := durable.Open(context.Background(), targetDriver(os.Getenv(childBackendEnv), os.Getenv(childTargetEnv)), durable.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	defer q.Close()
	log, _ := zap.NewDevelopment()
	st, err := durable.NewRateLimitStore(q, durable.RateLimitStoreConfig{Name: "fleet",
		Instance: os.Getenv(childInstanceEnv), Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	counting := &countingStore{PermitStore: st}
	var fallback atomic.Bool
	rl := ratelimit.New(ratelimit.Config{Rate: fleetRate, MaxWait: time.Second, Store: counting,
		Key:        func(any) string { return "endpoint" },
		OnFallback: []func(context.Context, ratelimit.FallbackEvent){func(_ context.Context, e ratelimit.FallbackEvent) { fallback.Store(e.Active) }}})
	defer rl.Close()
	url := os.Getenv(childURLEnv)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer client.CloseIdleConnections()
	var calls atomic.Int64
	m := mediator.New(nil, mediator.Config{})
	mediator.HandleFunc(m, func(ctx context.Context, _ *Hit) (*HitReply, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		calls.Add(1)
		return &HitReply{}, nil
	})
	m.Use(rl)
	if err := m.Build(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	// One call before the run, so that the run measures the limit, not the start of a process
	// (opening the queue, its first lease), which on a loaded machine takes more than a second.
	if _, err := mediator.Send(context.Background(), m, &Hit{}); err != nil {
		fmt.Fprintln(os.Stderr, "child: the first call:", err)
		return 2
	}
	fmt.Println("READY")
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() || in.Text() != "go" {
		return 0
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for ctx.Err() == nil {
				_, err := mediator.Send(ctx, m, &Hit{})
				if le, ok := errors.AsType[*ratelimit.LimitedError](err); ok {
					time.Sleep(le.Wait) // a refused caller comes back when told to
				}
			}
		})
	}
	stats := func() {
		f := 0
		if fallback.Load() {
			f = 1
		}
		fmt.Printf("STATS %d %d %d %d\n", calls.Load(), durable.RateLimitStoreStatements(st), counting.onRequestPath.Load(), f)
	}
	wg.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				stats()
			}
		}
	})
	for in.Scan() {
	}
	cancel()
	wg.Wait()
	stats()
	return 0
}

// rateChild is a running rate limit child and the last STATS line it printed.
type rateChild struct {
	name string
	cmd  *exec.Cmd
	in   io.WriteCloser

	mu                              sync.Mutex
	calls, statements, onPath, fell int64
	stderr                          strings.Builder
	done                            chan struct{}
	ready                           chan struct{} // closed when the child printed READY
}

func startRateChild(t *testing.T, b backend, name, url string) *rateChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(b.env, childEnv+"=ratelimit", childURLEnv+"="+url, childInstanceEnv+"="+name)...)
	c := &rateChild{name: name, cmd: cmd, done: make(chan struct{}), ready: make(chan struct{})}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errOut, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.in = in
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var readers sync.WaitGroup
	readers.Go(func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "READY" {
				close(c.ready)
				continue
			}
			f := strings.Fields(sc.Text())
			if len(f) != 5 || f[0] != "STATS" {
				continue
			}
			var v [4]int64
			for i := range v {
				v[i], _ = strconv.ParseInt(f[i+1], 10, 64)
			}
			c.mu.Lock()
			c.calls, c.statements, c.onPath, c.fell = v[0], v[1], v[2], v[3]
			c.mu.Unlock()
		}
	})
	readers.Go(func() {
		sc := bufio.NewScanner(errOut)
		for sc.Scan() {
			c.mu.Lock()
			c.stderr.WriteString(sc.Text() + "\n")
			c.mu.Unlock()
		}
	})
	go func() {
		readers.Wait()
		_ = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		_ = c.in.Close()
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-c.done
		}
	})
	return c
}

// begin waits until every child made its first call, then starts the endpoint's count and
// tells the children to go.
func begin(t *testing.T, e *endpoint, children []*rateChild) {
	t.Helper()
	for _, c := range children {
		select {
		case <-c.ready:
		case <-c.done:
			t.Fatalf("%s ended before its first call: %s", c.name, c.stderrText())
		case <-time.After(time.Minute):
			t.Fatalf("%s made no first call within a minute: %s", c.name, c.stderrText())
		}
	}
	e.begin()
	for _, c := range children {
		c.send(t, "go")
	}
}

func (c *rateChild) stderrText() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.String()
}

func (c *rateChild) send(t *testing.T, line string) {
	t.Helper()
	if _, err := fmt.Fprintln(c.in, line); err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
}

// finish closes the child's stdin and waits for its last STATS line.
func (c *rateChild) finish(t *testing.T) {
	t.Helper()
	_ = c.in.Close()
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not end", c.name)
	}
}

func (c *rateChild) kill() {
	_ = c.cmd.Process.Kill()
	<-c.done
}

func (c *rateChild) last() (calls, statements, onPath, fell int64, stderr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls, c.statements, c.onPath, c.fell, c.stderr.String()
}

// endpoint counts the calls it receives in each second since start.
type endpoint struct {
	srv   *httptest.Server
	mu    sync.Mutex
	start time.Time
	per   map[int]int
}

func startEndpoint(t *testing.T) *endpoint {
	e := &endpoint{per: map[int]int{}}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		e.mu.Lock()
		if !e.start.IsZero() {
			e.per[int(time.Since(e.start)/time.Second)]++
		}
		e.mu.Unlock()
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *endpoint) begin() {
	e.mu.Lock()
	e.start = time.Now()
	e.mu.Unlock()
}

// counts returns the calls of seconds 0..n-1.
func (e *endpoint) counts(n int) []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]int, n)
	for i := range out {
		out[i] = e.per[i]
	}
	return out
}

// inBand fails unless each second of secs (counts per second) is within lo..hi.
func inBand(t *testing.T, counts []int, secs []int, lo, hi int) {
	t.Helper()
	for _, s := range secs {
		if n := counts[s]; n < lo || n > hi {
			t.Errorf("second %d: the endpoint counted %d calls, want %d..%d (every second: %v)", s, n, lo, hi, counts)
		}
	}
}

func seconds(from, to int) []int {
	var out []int
	for s := from; s < to; s++ {
		out = append(out, s)
	}
	return out
}

// Three processes share a limit of 100 calls a second to a loopback endpoint for 30 s; one of
// them is killed with SIGKILL at 15 s. In every second after the first the endpoint counts 90
// to 105 calls, but for the second of the kill (whose leased permits, at most a lease period
// of them, pass unused); after the kill and a lease period the other two take its share. No
// call makes a store call: the leasing runs in the background.
func TestFleetRateLimitSharedByThreeProcesses(t *testing.T) {
	b := pgBackend(t)
	_ = b.bare(t, durable.Config{}) // migrated before the children start
	e := startEndpoint(t)
	children := []*rateChild{startRateChild(t, b, "p1", e.srv.URL), startRateChild(t, b, "p2", e.srv.URL), startRateChild(t, b, "p3", e.srv.URL)}
	begin(t, e, children)
	const total, killAt = 30, 15
	time.Sleep(killAt * time.Second) // measuring: the run's length
	children[2].kill()
	killed := time.Since(e.start)
	_, killedStatements, _, _, _ := children[2].last()
	time.Sleep(total*time.Second - time.Since(e.start))
	for _, c := range children[:2] {
		c.finish(t)
	}
	counts := e.counts(total)
	t.Logf("calls per second: %v (p3 killed at %.2f s)", counts, killed.Seconds())
	killSecond := int(killed / time.Second)
	after := int((killed + fleetLease + time.Second - 1) / time.Second) // the first whole second after kill + lease period
	inBand(t, counts, seconds(1, killSecond), 90, 105)
	inBand(t, counts, seconds(after, total), 90, 105)
	if counts[killSecond] > 105 {
		t.Errorf("second %d of the kill: %d calls", killSecond, counts[killSecond])
	}
	var calls, statements int64
	for _, c := range children {
		n, st, onPath, _, stderr := c.last()
		if away := strings.Count(stderr, "rate limit store unreachable"); away > 0 {
			t.Logf("%s: the store did not answer in time %d times", c.name, away)
		}
		calls += n
		statements += st
		if onPath != 0 {
			t.Errorf("%s: %d store calls made on a call's path", c.name, onPath)
		}
	}
	statements = max(statements, killedStatements)
	t.Logf("%d calls, %d store statements: %.3f per call, %.1f a second per instance (0 on a call's path)",
		calls, statements, float64(statements)/float64(calls), float64(statements)/float64(total)/2.5) // 3 instances for half the run, 2 for the other half
}

// The same fleet with its database frozen (its processes stopped) for 6 s: each process falls
// back to its share (a third of the limit), logs it once, and leases again once the database
// answers; the endpoint counts no more than the limit meanwhile, and about the limit.
func TestFleetRateLimitOnAFrozenDatabase(t *testing.T) {
	srv := startHungServer(t)
	b := postgresBackend(t, srv.dsn)
	_ = b.bare(t, durable.Config{})
	e := startEndpoint(t)
	children := []*rateChild{startRateChild(t, b, "p1", e.srv.URL), startRateChild(t, b, "p2", e.srv.URL), startRateChild(t, b, "p3", e.srv.URL)}
	begin(t, e, children)
	const frozenAt, thawAt, total = 5, 11, 16
	time.Sleep(frozenAt * time.Second) // measuring: the run's length
	srv.stop(t)
	time.Sleep(3 * time.Second) // a lease's Timeout and a STATS line later
	for _, c := range children {
		if _, _, _, fell, _ := c.last(); fell != 1 {
			t.Errorf("%s has not fallen back to its share three seconds into the freeze", c.name)
		}
	}
	time.Sleep(thawAt*time.Second - time.Since(e.start))
	srv.cont(t)
	time.Sleep(total*time.Second - time.Since(e.start))
	for _, c := range children {
		c.finish(t)
	}
	counts := e.counts(total)
	t.Logf("calls per second: %v (frozen %d..%d s)", counts, frozenAt, thawAt)
	// The second of the thaw may see up to a lease period's permits more: the first process
	// to lease again takes the fleet's permits while the others keep to their shares until they
	// too find the database back.
	// The second of the freeze and the next see the permits in hand run out while the lease
	// waits for its Timeout (1 s).
	steady := append(append(seconds(1, frozenAt), seconds(frozenAt+2, thawAt)...), seconds(thawAt+1, total-1)...)
	inBand(t, counts, steady, 85, 105)
	inBand(t, counts, []int{frozenAt, frozenAt + 1, thawAt}, 0, fleetRate+int(fleetRate*fleetLease/time.Second))
	for _, c := range children {
		_, _, _, fell, stderr := c.last()
		if fell != 0 {
			t.Errorf("%s still on its share after the thaw", c.name)
		}
		// Once for the freeze (a lease answered while the server's processes were being
		// stopped may make it twice), not once a lease; and as often back.
		away, back := strings.Count(stderr, "rate limit store unreachable"), strings.Count(stderr, "rate limit store answers again")
		if away < 1 || away > 2 || back != away {
			t.Errorf("%s logged the fallback %d times and the return %d:\n%s", c.name, away, back, stderr)
		}
	}
}
