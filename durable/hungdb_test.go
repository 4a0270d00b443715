package durable_test

// Fault tests: a database that hangs (a proxy that stops forwarding, a server stopped with
// SIGSTOP), a commit whose answer is lost, a port that refuses connections. Each checks what
// the scheduler logs (once, rate-limited, then a recovery) and that no item is lost or stuck.

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/goleak"

	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/internal/pgtest"
	"github.com/switchboard-go/switchboard/durable/postgres"
	"github.com/switchboard-go/switchboard/durable/record"
)

// The scheduler's database health messages.
const (
	hungMsgFailed    = "durable: database call failed"
	hungMsgStill     = "durable: database calls still failing"
	hungMsgRecovered = "durable: database calls recovered"
	hungMsgRejected  = "durable: completion rejected"
	hungMsgSwept     = "durable: swept expired leases"
)

// hungLeakCheck verifies, after every other cleanup of the test, that the test left no
// goroutine behind (pgx closes timed-out connections in goroutines of its own; the proxy has
// two per connection). Call it first.
func hungLeakCheck(t *testing.T) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

// ---------------------------------------------------------------------------------------------
// A TCP proxy that can stop forwarding (holding the bytes, keeping the connections open), as a
// hung server or a partition would, and resume.

// Directions of a proxied connection.
const (
	hungToServer = 0
	hungToClient = 1
)

type hungProxy struct {
	network, upstream string // where connections are forwarded
	addr              string // where the proxy listens (kept across StopListening/Listen)

	mu      sync.Mutex
	ln      net.Listener
	gates   [2]chan struct{} // per direction: closed while bytes flow, open while frozen
	frozen  [2]bool
	conns   map[*hungConn]struct{}
	trigger *hungTrigger
	closing bool
	closed  chan struct{}

	wg     sync.WaitGroup
	opened atomic.Int64 // connections accepted
}

type hungConn struct {
	client, server net.Conn
	dead           chan struct{} // closed when the connection is torn down
	done           chan struct{} // closed when both pumps have ended and both sockets are closed
	once           sync.Once
}

func (c *hungConn) kill() {
	c.once.Do(func() {
		close(c.dead)
		_ = c.client.Close()
		_ = c.server.Close()
	})
}

// hungTrigger freezes directions of the proxy the moment a chunk sent to the server contains
// pattern, before that chunk is forwarded.
type hungTrigger struct {
	pattern []byte
	dirs    []int
	fired   chan struct{}
	conn    *hungConn // the connection that carried the pattern; set before fired is closed
}

// newHungProxy listens on 127.0.0.1:0 and forwards to upstream (network "tcp" or "unix"). It
// is closed at the end of the test.
func newHungProxy(t testing.TB, network, upstream string) *hungProxy {
	t.Helper()
	p := &hungProxy{network: network, upstream: upstream, conns: map[*hungConn]struct{}{}, closed: make(chan struct{})}
	for d := range p.gates {
		p.gates[d] = make(chan struct{})
		close(p.gates[d])
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.ln = ln
	p.wg.Add(1)
	go p.serve(ln)
	t.Cleanup(p.Close)
	return p
}

func (p *hungProxy) Addr() string { return p.addr }

func (p *hungProxy) serve(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		p.opened.Add(1)
		p.wg.Add(1)
		go p.handle(c)
	}
}

func (p *hungProxy) handle(client net.Conn) {
	defer p.wg.Done()
	server, err := net.DialTimeout(p.network, p.upstream, 5*time.Second)
	if err != nil {
		_ = client.Close()
		return
	}
	c := &hungConn{client: client, server: server, dead: make(chan struct{}), done: make(chan struct{})}
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		c.kill()
		close(c.done)
		return
	}
	p.conns[c] = struct{}{}
	p.mu.Unlock()
	var pumps sync.WaitGroup
	pumps.Go(func() { p.pump(c, hungToServer, client, server) })
	pumps.Go(func() { p.pump(c, hungToClient, server, client) })
	pumps.Wait()
	c.kill()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	close(c.done)
}

// pump copies src to dst. Every chunk, and the end of the stream, waits while its direction is
// frozen: a stopped server sees the bytes, and the peer's close, only once it runs again.
func (p *hungProxy) pump(c *hungConn, dir int, src, dst net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if dir == hungToServer {
				p.inspect(c, buf[:n])
			}
			if !p.pass(c, dir) {
				c.kill()
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				c.kill()
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) && p.pass(c, dir) {
				if hc, ok := dst.(interface{ CloseWrite() error }); ok && hc.CloseWrite() == nil {
					return // half-closed like the peer; the other direction goes on
				}
			}
			c.kill()
			return
		}
	}
}

// pass waits while dir is frozen; false when the connection or the proxy was torn down.
func (p *hungProxy) pass(c *hungConn, dir int) bool {
	p.mu.Lock()
	g := p.gates[dir]
	p.mu.Unlock()
	select {
	case <-g:
		return true
	case <-c.dead:
		return false
	case <-p.closed:
		return false
	}
}

func (p *hungProxy) inspect(c *hungConn, chunk []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	tr := p.trigger
	if tr == nil || !bytes.Contains(chunk, tr.pattern) {
		return
	}
	p.trigger = nil
	for _, d := range tr.dirs {
		p.freezeLocked(d)
	}
	tr.conn = c
	close(tr.fired)
}

func (p *hungProxy) freezeLocked(dir int) {
	if !p.frozen[dir] {
		p.frozen[dir] = true
		p.gates[dir] = make(chan struct{})
	}
}

// Freeze stops forwarding in the given directions (both when none is given). Connections stay
// open, new ones are accepted, and bytes are held until Thaw.
func (p *hungProxy) Freeze(dirs ...int) {
	if len(dirs) == 0 {
		dirs = []int{hungToServer, hungToClient}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range dirs {
		p.freezeLocked(d)
	}
}

// FreezeOnSend arms a trigger: the first chunk sent towards the server that contains pattern
// freezes dirs before it is forwarded (so it is held too when hungToServer is among dirs).
func (p *hungProxy) FreezeOnSend(pattern []byte, dirs ...int) *hungTrigger {
	tr := &hungTrigger{pattern: pattern, dirs: dirs, fired: make(chan struct{})}
	p.mu.Lock()
	p.trigger = tr
	p.mu.Unlock()
	return tr
}

// Thaw resumes forwarding in every direction; the held bytes flow first.
func (p *hungProxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trigger = nil
	for d := range p.gates {
		if p.frozen[d] {
			p.frozen[d] = false
			close(p.gates[d])
		}
	}
}

// StopListening closes the listener and tears down every connection: the port now refuses
// connections, as a server that went away would.
func (p *hungProxy) StopListening() {
	p.mu.Lock()
	ln := p.ln
	p.ln = nil
	conns := make([]*hungConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
	for _, c := range conns {
		c.kill()
	}
}

// Listen listens again on the proxy's address (after StopListening).
func (p *hungProxy) Listen() error {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		_ = ln.Close()
		return errors.New("proxy closed")
	}
	p.ln = ln
	p.wg.Add(1)
	go p.serve(ln)
	return nil
}

// Active returns the number of proxied connections still open.
func (p *hungProxy) Active() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Close stops the proxy, tears down its connections and waits for its goroutines.
func (p *hungProxy) Close() {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		p.wg.Wait()
		return
	}
	p.closing = true
	close(p.closed)
	ln := p.ln
	p.ln = nil
	conns := make([]*hungConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
	for _, c := range conns {
		c.kill()
	}
	p.wg.Wait()
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL through the proxy.

type hungPG struct {
	proxy  *hungProxy
	target string // DSN through the proxy, selecting the test's schema
	direct string // DSN straight to the server, same schema (for looking while the proxy is frozen)
}

// hungProxiedPostgres creates a schema of its own on the test server (dropped at the end, as
// postgresBackend does) and a proxy in front of the server.
// hungSetup checks the test for leaked goroutines (first, so its check runs after every other
// cleanup), puts a proxy between the test and the server of dsn, and opens a store through it.
func hungSetup(t *testing.T, dsn string) (*hungPG, *durable.Queue) {
	t.Helper()
	hungLeakCheck(t)
	pg := hungProxiedPostgres(t, dsn)
	return pg, pg.open(t)
}

func hungProxiedPostgres(t *testing.T, dsn string) *hungPG {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	network, upstream := pgconn.NetworkAddress(cfg.Host, cfg.Port)
	proxy := newHungProxy(t, network, upstream)
	schema := pgtest.NewSchema(t, dsn, "sbtest_")
	target, err := pgtest.WithSearchPath(hungWithAddr(t, dsn, proxy.Addr()), schema)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := pgtest.WithSearchPath(dsn, schema)
	if err != nil {
		t.Fatal(err)
	}
	return &hungPG{proxy: proxy, target: target, direct: direct}
}

// hungWithAddr points dsn at addr (host:port).
func hungWithAddr(t testing.TB, dsn, addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(dsn, "://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.Host = addr
		return u.String()
	}
	return dsn + " host=" + host + " port=" + port // later settings win
}

func (pg *hungPG) open(t testing.TB) *durable.Queue {
	t.Helper()
	return openQueue(t, postgres.Open(pg.target, postgres.Config{}), durable.Config{Policy: fastPolicy})
}

// drain closes store and waits until no connection is left through the proxy: pgx closes a
// timed-out connection in a goroutine of its own, after sending the server a cancel request.
func (pg *hungPG) drain(t testing.TB, store *durable.Queue) {
	t.Helper()
	_ = store.Close()
	eventually(t, 15*time.Second, "every proxied connection to close", func() bool { return pg.proxy.Active() == 0 })
}

// hungWork simulates a handler's work of duration d; it honours cancellation.
func hungWork(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ---------------------------------------------------------------------------------------------
// The hung-database scenario, shared by the proxy and the SIGSTOP tests.

type hungFault struct {
	freeze func(t *testing.T)
	thaw   func(t *testing.T) // idempotent: it also runs at cleanup
	// sweep, when set, is another instance's sweep over a healthy connection; it runs once the
	// leases held at the freeze have run out, while the scheduler is still cut off.
	sweep func(t *testing.T) int
}

type hungFigures struct {
	firstWarn, recovered, allSucceeded time.Duration
	frozenFor                          time.Duration
	failureLines, otherLinesFrozen     int
	sweptWhileFrozen                   int
	twice, ghostClaims, rejected       int
	recoveredFailures                  string
}

// runHungScenario runs a scheduler (Lease 3 s, so StoreTimeout 1 s) over 200 items, freezes
// the database mid-run for longer than a lease, then thaws it, and checks what was logged and
// that every item succeeded, none ran twice except the ones whose lease ran out while frozen,
// and none is stuck.
func runHungScenario(t *testing.T, store *durable.Queue, fault hungFault) hungFigures {
	t.Helper()
	const (
		items        = 200
		freezeAt     = 60 // runs before the freeze
		workers      = 4
		lease        = 3 * time.Second
		storeTimeout = lease / 3 // SchedulerConfig.StoreTimeout's default
		frozenFor    = 3500 * time.Millisecond
		warnBound    = storeTimeout + 500*time.Millisecond
	)
	var fig hungFigures
	ctx := context.Background()
	q := store
	ids := make([]record.ItemID, items)
	for i := range items {
		ids[i] = must[durable.Enqueued](t)(q.Enqueue(ctx, &Work{N: i})).ID
	}
	runs := make([]atomic.Int32, items)
	var total atomic.Int32
	reached := make(chan struct{})
	m := mediatorFor(t, handlers{work: func(ctx context.Context, w *Work) error {
		runs[w.N].Add(1)
		if total.Add(1) == freezeAt {
			close(reached)
		}
		return hungWork(ctx, 10*time.Millisecond)
	}})
	log := &logRecorder{}
	began := time.Now()
	s := must[*durable.Scheduler](t)(durable.NewScheduler(q, m, durable.SchedulerConfig{
		InstanceID: "hung-" + randomSuffix(), Workers: workers, PollInterval: 5 * time.Millisecond,
		Lease: lease, Logger: log.logger(),
	}))
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	t.Cleanup(func() { fault.thaw(t) }) // runs before the shutdown above
	defer func() {
		if t.Failed() {
			t.Logf("scheduler log:\n%s", log.dump(0, began))
		}
	}()

	select {
	case <-reached:
	case <-time.After(15 * time.Second):
		t.Fatalf("only %d runs, waiting for %d before the freeze", total.Load(), freezeAt)
	}
	if n := log.count(0, -1, hungMsgFailed, hungMsgStill); n != 0 {
		t.Fatalf("%d database failures logged before the fault", n)
	}

	// Freeze mid-run.
	mark := log.mark()
	fault.freeze(t)
	frozenAt := time.Now()
	runsAtFreeze := total.Load()
	select {
	case <-log.next(hungMsgFailed, mark):
	case <-time.After(warnBound + 5*time.Second):
		t.Fatalf("no %q within %v of the freeze", hungMsgFailed, warnBound+5*time.Second)
	}
	first, _ := log.first(hungMsgFailed, mark)
	fig.firstWarn = first.at.Sub(frozenAt)
	if fig.firstWarn > warnBound {
		t.Errorf("first %q %v after the freeze; want within StoreTimeout (%v) + 500ms", hungMsgFailed, fig.firstWarn, storeTimeout)
	}
	if fault.sweep != nil {
		time.Sleep(time.Until(frozenAt.Add(lease + 250*time.Millisecond))) // every lease held at the freeze has run out
		fig.sweptWhileFrozen = fault.sweep(t)
		if fig.sweptWhileFrozen == 0 {
			t.Errorf("another instance's sweep %v after the freeze found no expired lease", time.Since(frozenAt))
		}
	}
	time.Sleep(time.Until(frozenAt.Add(frozenFor))) // keep the database frozen
	thawMark := log.mark()
	fig.frozenFor = time.Since(frozenAt)
	fig.failureLines = log.count(mark, thawMark, hungMsgFailed, hungMsgStill)
	fig.otherLinesFrozen = thawMark - mark - fig.failureLines
	if fig.failureLines > 2 {
		t.Errorf("%d failure lines in %v frozen (poll interval 5ms): the log is not rate-limited", fig.failureLines, fig.frozenFor)
	}
	if n := log.count(mark, thawMark, hungMsgRecovered); n != 0 {
		t.Errorf("%q logged %d times while the database was frozen", hungMsgRecovered, n)
	}

	// Thaw.
	fault.thaw(t)
	thawedAt := time.Now()
	select {
	case <-log.next(hungMsgRecovered, thawMark):
	case <-time.After(10 * time.Second):
		t.Fatalf("no %q within 10s of the thaw", hungMsgRecovered)
	}
	rec, _ := log.first(hungMsgRecovered, thawMark)
	fig.recovered = rec.at.Sub(thawedAt)
	fig.recoveredFailures = rec.attrs["failures"]
	eventually(t, 15*time.Second, "every item to succeed", func() bool {
		return stats(t, q).Counts[record.StateSucceeded] == items
	})
	fig.allSucceeded = time.Since(thawedAt)
	shutdownCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.Shutdown(shutdownCtx); err != nil {
		t.Fatalf("shutdown after recovery: %v", err)
	}

	// Nothing lost, nothing stuck, a second run only after a lease ran out while frozen.
	st := stats(t, q)
	if st.Counts[record.StatePending] != 0 || st.Counts[record.StateRunning] != 0 || st.Counts[record.StateDead] != 0 ||
		st.Counts[record.StateSucceeded] != items || st.OldestDue != 0 {
		t.Errorf("stats after recovery: %+v", st)
	}
	var twice []string
	for i, id := range ids {
		it := item(t, store, id)
		as := attempts(t, store, id)
		r := int(runs[i].Load())
		switch {
		case it.State != record.StateSucceeded:
			t.Errorf("item %d (%d runs) is %s: %s", id, r, it.State, outcomes(as))
			continue
		case r == 0:
			t.Errorf("item %d succeeded without its handler running: %s", id, outcomes(as))
			continue
		case len(as) != it.Attempts || len(as) < r:
			t.Errorf("item %d: %d runs, attempts=%d, rows %s", id, r, it.Attempts, outcomes(as))
			continue
		}
		for j, a := range as {
			want := record.OutcomeAbandoned
			if j == len(as)-1 {
				want = record.OutcomeSucceeded
			}
			if a.Outcome != want || a.Number != j+1 {
				t.Errorf("item %d: %d runs, rows %s: want abandoned rows then one success", id, r, outcomes(as))
				break
			}
		}
		switch {
		case r > 2:
			t.Errorf("item %d ran %d times: %s", id, r, outcomes(as))
		case r == 2:
			// Its first run's outcome could not be written before its lease (taken before the
			// freeze) ran out and a sweep took the item back; that attempt is recorded as
			// abandoned, and the late completion was rejected by the fence.
			lost := as[0]
			if lost.StartedAt.After(frozenAt.Add(100*time.Millisecond)) || !lost.EndedAt.After(frozenAt) {
				t.Errorf("item %d ran twice, but its abandoned attempt (claimed %v, swept %v) did not lose its lease while frozen (%v..%v)",
					id, lost.StartedAt.Format(time.StampMicro), lost.EndedAt.Format(time.StampMicro),
					frozenAt.Format(time.StampMicro), thawedAt.Format(time.StampMicro))
			}
			fig.twice++
			twice = append(twice, fmt.Sprintf("%d[%s]", id, outcomes(as)))
		case len(as) > r:
			// Claimed by a claim whose answer never reached the scheduler (sent into the frozen
			// database, applied when it thawed): swept once its lease ran out, then run once.
			fig.ghostClaims++
		}
	}
	fig.rejected = log.count(0, -1, hungMsgRejected)
	if fig.sweptWhileFrozen > 0 && fig.twice != fig.sweptWhileFrozen {
		// Every item swept while frozen had been claimed before the freeze, so its handler ran
		// (or was running) then: it runs again after the thaw, and no other item runs twice. (A
		// claim sent into the frozen database and applied at the thaw, whose answer was lost,
		// holds its items until their leases run out and are swept: they run once, later.)
		t.Errorf("%d items swept while frozen, but %d ran twice (and %d claims lost their answer)", fig.sweptWhileFrozen, fig.twice, fig.ghostClaims)
	}
	t.Logf("runs before freeze %d; first %q %v after the freeze (StoreTimeout %v); %d failure line(s) and %d other line(s) in %v frozen; "+
		"swept by another instance while frozen %d; %q %v after the thaw (failures=%s); all %d succeeded %v after the thaw; "+
		"items run twice %d %v; claims whose answer was lost %d; completions rejected %d; sweeps by the scheduler itself %d; total %v",
		runsAtFreeze, hungMsgFailed, fig.firstWarn.Round(time.Millisecond), storeTimeout, fig.failureLines, fig.otherLinesFrozen,
		fig.frozenFor.Round(time.Millisecond), fig.sweptWhileFrozen, hungMsgRecovered, fig.recovered.Round(time.Millisecond), fig.recoveredFailures,
		items, fig.allSucceeded.Round(time.Millisecond), fig.twice, twice, fig.ghostClaims, fig.rejected, log.count(0, -1, hungMsgSwept), time.Since(began).Round(time.Millisecond))
	t.Logf("scheduler log from the freeze:\n%s", log.dump(mark, frozenAt))
	return fig
}

// TestHungDatabaseBehindProxy: a proxy between the scheduler and PostgreSQL stops forwarding
// (both directions, connections kept open) mid-run for longer than a lease. The scheduler must
// log the failure within StoreTimeout, once (not per poll), log the recovery after the thaw,
// and lose nothing.
//
//   - alone: the scheduler is the only instance; its leases run out while frozen, but nobody
//     sweeps them before it writes its outcomes after the thaw.
//   - swept-by-other: another instance, whose connection is healthy, sweeps the expired leases
//     while the scheduler is cut off: those items run again after the thaw (abandoned row, late
//     completion rejected), and nothing else does.
func TestHungDatabaseBehindProxy(t *testing.T) {
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	for _, other := range []bool{false, true} {
		name := "alone"
		if other {
			name = "swept-by-other"
		}
		t.Run(name, func(t *testing.T) {
			pg, store := hungSetup(t, dsn)
			fault := hungFault{
				freeze: func(*testing.T) { pg.proxy.Freeze() },
				thaw:   func(*testing.T) { pg.proxy.Thaw() },
			}
			if other {
				direct := durable.StoreOf(openQueue(t, postgres.Open(pg.direct, postgres.Config{}), durable.Config{}))
				fault.sweep = func(t *testing.T) int {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					return must[int](t)(direct.Sweep(ctx, time.Now()))
				}
			}
			opened := pg.proxy.opened.Load()
			runHungScenario(t, store, fault)
			t.Logf("connections opened through the proxy during the run: %d", pg.proxy.opened.Load()-opened)
			pg.drain(t, store)
		})
	}
}

// ---------------------------------------------------------------------------------------------
// A throwaway PostgreSQL server that the test stops with SIGSTOP.

type hungServer struct {
	dir, data, bindir string
	asOwner           []string // runuser prefix when running as root
	port              int
	pid               int // the postmaster
	dsn               string

	mu      sync.Mutex
	stopped []int
}

// hungPGBindir finds initdb and pg_ctl as scripts/with-postgres.sh does.
func hungPGBindir() (string, bool) {
	if d := os.Getenv("PG_BINDIR"); d != "" && hungExecutable(filepath.Join(d, "initdb")) {
		return d, true
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { // newest major version first
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if hungExecutable(filepath.Join(d, "initdb")) && hungExecutable(filepath.Join(d, "pg_ctl")) {
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

func hungExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// hungNeed fails the test under CI=true and skips it otherwise.
func hungNeed(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format+" (CI=true: this test must run)", args...)
	}
	t.Skipf(format, args...)
}

// startHungServer initialises and starts a PostgreSQL server of the test's own, on a free
// loopback port, in a temporary directory; it is stopped and removed at the end of the test.
func startHungServer(t *testing.T) *hungServer {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skipf("stopping a server's processes is done through /proc and SIGSTOP here; %s is not supported", runtime.GOOS)
	}
	bindir, ok := hungPGBindir()
	if !ok {
		hungNeed(t, "no PostgreSQL server binaries (initdb, pg_ctl) found")
	}
	srv := &hungServer{bindir: bindir}
	var uid, gid = -1, -1
	if os.Geteuid() == 0 {
		// initdb and postgres refuse to run as root.
		u, err := user.Lookup("postgres")
		if err != nil {
			hungNeed(t, "running as root and there is no postgres user to run the server: %v", err)
		}
		runuser, err := exec.LookPath("runuser")
		if err != nil {
			hungNeed(t, "running as root and runuser is missing: %v", err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		srv.asOwner = []string{runuser, "-u", "postgres", "--"}
	}
	dir, err := os.MkdirTemp("", "switchboard-hungpg-")
	if err != nil {
		t.Fatal(err)
	}
	srv.dir, srv.data = dir, filepath.Join(dir, "data")
	t.Cleanup(func() { srv.destroy(t) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if uid >= 0 {
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	if out, err := srv.run(60*time.Second, "initdb", "-D", srv.data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--no-locale", "--no-sync"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	initdbTook := time.Since(began)
	var lastErr error
	for range 3 { // a free port can be taken between finding it and the server binding it
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv.port = ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		conf := fmt.Sprintf("\nlisten_addresses = '127.0.0.1'\nport = %d\nunix_socket_directories = '%s'\n"+
			"max_connections = 100\nfsync = off\nsynchronous_commit = off\nfull_page_writes = off\n", srv.port, dir)
		f, err := os.OpenFile(filepath.Join(srv.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.WriteString(conf)
		_ = f.Close()
		if err != nil {
			t.Fatal(err)
		}
		var out []byte
		out, lastErr = srv.run(60*time.Second, "pg_ctl", "-D", srv.data, "-l", filepath.Join(dir, "server.log"), "-w", "-t", "30", "start")
		if lastErr == nil {
			break
		}
		server, _ := os.ReadFile(filepath.Join(dir, "server.log"))
		t.Logf("pg_ctl start on port %d: %v\n%s\n%s", srv.port, lastErr, out, server)
	}
	if lastErr != nil {
		t.Fatalf("could not start the throwaway server")
	}
	pidFile, err := os.ReadFile(filepath.Join(srv.data, "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	if srv.pid, err = strconv.Atoi(strings.TrimSpace(strings.SplitN(string(pidFile), "\n", 2)[0])); err != nil {
		t.Fatalf("postmaster.pid: %v", err)
	}
	srv.dsn = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", srv.port)
	t.Logf("throwaway server %s (pid %d) ready in %v (initdb %v)", bindir, srv.pid, time.Since(began).Round(time.Millisecond),
		initdbTook.Round(time.Millisecond))
	return srv
}

// run runs a server binary, as the postgres user when the test runs as root.
func (s *hungServer) run(timeout time.Duration, bin string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	argv := append(slices.Clone(s.asOwner), filepath.Join(s.bindir, bin))
	argv = append(argv, args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = s.dir // the postgres user may not be able to enter the test's directory
	return cmd.CombinedOutput()
}

// hungProcStat returns the state and parent of a process, from /proc.
func hungProcStat(pid int) (state byte, ppid int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	return f[0][0], ppid, err == nil
}

// children lists the processes whose parent is pid.
func hungChildren(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, pp, ok := hungProcStat(p); ok && pp == pid {
			out = append(out, p)
		}
	}
	return out
}

// stop stops every process of the server: the postmaster first (so it forks no more), then
// its children (backends, checkpointer, WAL writer, ...).
func (s *hungServer) stop(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := syscall.Kill(s.pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP postmaster %d: %v", s.pid, err)
	}
	s.stopped = []int{s.pid}
	for _, c := range hungChildren(s.pid) {
		if err := syscall.Kill(c, syscall.SIGSTOP); err == nil {
			s.stopped = append(s.stopped, c)
		}
	}
	eventually(t, 5*time.Second, "every server process to be stopped", func() bool {
		for _, p := range s.stopped {
			if st, _, ok := hungProcStat(p); ok && st != 'T' {
				return false
			}
		}
		return true
	})
	t.Logf("SIGSTOP sent to %d server processes (postmaster %d and its children)", len(s.stopped), s.pid)
}

// cont resumes every process stop stopped, and any child of the postmaster.
func (s *hungServer) cont(*testing.T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pid == 0 {
		return
	}
	_ = syscall.Kill(s.pid, syscall.SIGCONT)
	for _, p := range append(s.stopped, hungChildren(s.pid)...) {
		_ = syscall.Kill(p, syscall.SIGCONT)
	}
	s.stopped = nil
}

// destroy resumes, stops and removes the server.
func (s *hungServer) destroy(t *testing.T) {
	s.cont(t)
	if s.pid != 0 {
		if out, err := s.run(60*time.Second, "pg_ctl", "-D", s.data, "-m", "immediate", "-w", "-t", "30", "stop"); err != nil {
			t.Errorf("pg_ctl stop: %v\n%s", err, out)
			_ = syscall.Kill(s.pid, syscall.SIGKILL)
		}
	}
	if err := os.RemoveAll(s.dir); err != nil {
		t.Errorf("removing %s: %v", s.dir, err)
	}
}

// TestHungServerSIGSTOP: the same scenario as TestHungDatabaseBehindProxy, the hang made by
// stopping every process of a throwaway PostgreSQL server with SIGSTOP, then SIGCONT.
func TestHungServerSIGSTOP(t *testing.T) {
	hungLeakCheck(t)
	srv := startHungServer(t)
	store := openQueue(t, postgres.Open(srv.dsn, postgres.Config{}), durable.Config{Policy: fastPolicy})
	runHungScenario(t, store, hungFault{freeze: srv.stop, thaw: srv.cont})
	_ = store.Close()
}

// ---------------------------------------------------------------------------------------------
// An enqueue whose commit's answer is lost.

// TestAmbiguousEnqueueCommit: an Enqueue with a 1 s deadline meets a database that stops
// answering as its INSERT goes out, and returns an error matching ErrOutcomeUnknown (caused by
// context.DeadlineExceeded) with the item's token. Whether the INSERT committed is unknown to
// the caller; the documented remedy, enqueueing again with the same token (here with its
// dedupe key too), must leave exactly one item.
//
//   - response-lost: the INSERT reaches the server, which commits it; its answer is held. The
//     item exists while Enqueue reports a failure, and the retry reports it as a Duplicate.
//   - request-held: the INSERT itself is held (a server that stopped before reading it) and
//     delivered when the database resumes, racing the retry and pgx's cancel request; which
//     one lands is logged.
//   - request-lost: the INSERT is held, then its connection is torn down before the database
//     resumes (a partition that ends in a reset): it never lands, and the retry inserts.
func TestAmbiguousEnqueueCommit(t *testing.T) {
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	for _, tc := range []struct {
		name string
		dirs []int
		drop bool // tear the first attempt's connection down before the thaw
	}{
		{"response-lost", []int{hungToClient}, false},
		{"request-held", []int{hungToServer, hungToClient}, false},
		{"request-lost", []int{hungToServer, hungToClient}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pg, store := hungSetup(t, dsn)
			direct, err := sql.Open("pgx", pg.direct)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = direct.Close() })
			t.Cleanup(pg.proxy.Thaw)
			q := store
			key := "ambiguous-" + randomSuffix()
			byKey := func() []record.ItemID {
				t.Helper()
				rows, err := direct.Query("SELECT id FROM switchboard_items WHERE dedupe_key = $1 ORDER BY id", key)
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				var ids []record.ItemID
				for rows.Next() {
					var id int64
					if err := rows.Scan(&id); err != nil {
						t.Fatal(err)
					}
					ids = append(ids, record.ItemID(id))
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				return ids
			}

			// The dedupe key is a parameter of the INSERT: the chunk carrying it is the INSERT.
			trig := pg.proxy.FreezeOnSend([]byte(key), tc.dirs...)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			began := time.Now()
			_, firstErr := q.Enqueue(ctx, &Work{N: 1}, durable.WithDedupeKey(key))
			took := time.Since(began)
			cancel()
			select {
			case <-trig.fired:
			default:
				t.Fatalf("the INSERT never went through the proxy (Enqueue: %v)", firstErr)
			}
			if !errors.Is(firstErr, context.DeadlineExceeded) || !errors.Is(firstErr, durable.ErrOutcomeUnknown) {
				t.Fatalf("Enqueue into a frozen database returned %v after %v; want an unknown outcome caused by context.DeadlineExceeded", firstErr, took)
			}
			unknown, _ := errors.AsType[*durable.OutcomeUnknownError](firstErr)
			if len(unknown.Token) != 32 {
				t.Fatalf("the unknown outcome's token %q", unknown.Token)
			}
			whileFrozen := byKey()
			switch tc.name {
			case "response-lost":
				if len(whileFrozen) != 1 {
					t.Fatalf("items under the key while the answer is held: %v; the server should have committed the INSERT", whileFrozen)
				}
			default:
				if len(whileFrozen) != 0 {
					t.Fatalf("items under the key while the INSERT is held: %v", whileFrozen)
				}
			}
			if tc.drop {
				trig.conn.kill() // the held INSERT is discarded with its connection
			}

			pg.proxy.Thaw()
			ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			again, err := q.Enqueue(ctx, &Work{N: 1}, durable.WithDedupeKey(key), durable.WithToken(unknown.Token))
			if err != nil {
				t.Fatalf("enqueue again with the same dedupe key and token: %v", err)
			}
			// Let the first attempt's connection finish: its held bytes delivered, its cancel
			// request answered, the socket closed.
			select {
			case <-trig.conn.done:
			case <-time.After(15 * time.Second):
				t.Fatal("the first attempt's connection did not close after the thaw")
			}
			final := byKey()
			if len(final) != 1 || final[0] != again.ID {
				t.Fatalf("items under the key %v; want exactly one, %d (the retry's answer, duplicate=%v)", final, again.ID, again.Duplicate)
			}
			if tc.name == "response-lost" && (!again.Duplicate || again.ID != whileFrozen[0]) {
				t.Fatalf("retry returned %+v; want Duplicate of %d, which the timed-out Enqueue committed", again, whileFrozen[0])
			}
			if tc.drop && again.Duplicate {
				t.Fatalf("retry returned %+v; the first INSERT was dropped, so the retry should have inserted", again)
			}
			if it := item(t, store, again.ID); it.State != record.StatePending || it.Token != unknown.Token {
				t.Fatalf("item %+v; want it pending under token %q", it, unknown.Token)
			}
			if again.Duplicate {
				t.Logf("first Enqueue failed after %v with %v, yet its INSERT landed (item %d): the retry reported Duplicate; one item in the store",
					took.Round(time.Millisecond), firstErr, again.ID)
			} else if tc.drop {
				t.Logf("first Enqueue failed after %v with %v; its INSERT was dropped with its connection and never reached the server: the retry inserted item %d; one item in the store",
					took.Round(time.Millisecond), firstErr, again.ID)
			} else {
				t.Logf("first Enqueue failed after %v with %v; its INSERT had not landed when the retry inserted item %d (delivered later, it met the dedupe key and inserted nothing); one item in the store",
					took.Round(time.Millisecond), firstErr, again.ID)
			}
			pg.drain(t, store)
		})
	}
}

// ---------------------------------------------------------------------------------------------
// A port that refuses connections.

// TestRefusedConnectionLogsOnceAndRecovers: the scheduler's database address refuses
// connections (nothing listens) for a second while it polls every 20 ms: one failure line,
// not one per poll; then the port accepts again and the recovery is logged and the items run.
func TestRefusedConnectionLogsOnceAndRecovers(t *testing.T) {
	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	pg, store := hungSetup(t, dsn) // migrates while the port still accepts
	q := store
	const items = 5
	for i := range items {
		must[durable.Enqueued](t)(q.Enqueue(context.Background(), &Work{N: i}))
	}

	pg.proxy.StopListening() // closes the listener and the pool's connections
	if c, err := net.DialTimeout("tcp", pg.proxy.Addr(), time.Second); err == nil {
		_ = c.Close()
		t.Fatalf("%s still accepts connections", pg.proxy.Addr())
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dialing %s: %v; want connection refused", pg.proxy.Addr(), err)
	}

	log := &logRecorder{}
	m := mediatorFor(t, handlers{})
	// Lease stays at its default (30 s): no heartbeat falls in this test's window (see
	// TestIdleSchedulerHeartbeatDuringOutage for what one does).
	s := must[*durable.Scheduler](t)(durable.NewScheduler(q, m, durable.SchedulerConfig{
		InstanceID: "refused-" + randomSuffix(), PollInterval: 20 * time.Millisecond, Logger: log.logger(),
	}))
	began := time.Now()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	defer func() {
		if t.Failed() {
			t.Logf("scheduler log:\n%s", log.dump(0, began))
		}
	}()
	select {
	case <-log.next(hungMsgFailed, 0):
	case <-time.After(5 * time.Second):
		t.Fatalf("no %q within 5s of starting against a refusing port", hungMsgFailed)
	}
	first, _ := log.first(hungMsgFailed, 0)
	time.Sleep(time.Until(began.Add(time.Second))) // keep refusing for a second
	mark := log.mark()
	refusedFor := time.Since(began)
	failed := log.count(0, mark, hungMsgFailed)
	still := log.count(0, mark, hungMsgStill)
	if failed != 1 || still > 1 {
		t.Errorf("in %v of refused connections with a 20ms poll: %d %q and %d %q lines; want 1 and at most 1",
			refusedFor, failed, hungMsgFailed, still, hungMsgStill)
	}
	if n := log.count(0, mark, hungMsgRecovered); n != 0 {
		t.Errorf("%q logged %d times while every connection was refused", hungMsgRecovered, n)
	}

	// Accept again, on the same port.
	if err := pg.proxy.Listen(); err != nil {
		t.Fatalf("listening again on %s: %v", pg.proxy.Addr(), err)
	}
	acceptAt := time.Now()
	select {
	case <-log.next(hungMsgRecovered, mark):
	case <-time.After(5 * time.Second):
		t.Fatalf("no %q within 5s of the port accepting again", hungMsgRecovered)
	}
	rec, _ := log.first(hungMsgRecovered, mark)
	eventually(t, 10*time.Second, "every item to succeed", func() bool {
		return stats(t, q).Counts[record.StateSucceeded] == items
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	t.Logf("first %q %v after start (error: %s); refused for %v: %d failure line(s), %d %q; %q %v after the port accepted again (failures=%s, after=%s)",
		hungMsgFailed, first.at.Sub(began).Round(time.Millisecond), first.attrs["error"], refusedFor.Round(time.Millisecond),
		failed, still, hungMsgStill, hungMsgRecovered, rec.at.Sub(acceptAt).Round(time.Millisecond), rec.attrs["failures"], rec.attrs["after"])
	t.Logf("scheduler log:\n%s", log.dump(0, began))
	pg.drain(t, store)
}

// TestIdleSchedulerHeartbeatDuringOutage: an idle scheduler (no item in flight) against a port
// that refuses connections, with Lease 3 s (a heartbeat every 1 s), for 2.5 s. A database that
// is down the whole time is logged as failing once and never as recovered. The heartbeat used to
// "succeed" with nothing to extend (no database call), logging a false recovery and a new
// failure on every heartbeat.
func TestIdleSchedulerHeartbeatDuringOutage(t *testing.T) {

	dsn := pgDSN(t)
	if dsn == "" {
		t.Skipf("%s not set", pgDSNEnv)
	}
	pg, store := hungSetup(t, dsn)
	q := store
	pg.proxy.StopListening()
	log := &logRecorder{}
	s := must[*durable.Scheduler](t)(durable.NewScheduler(q, mediatorFor(t, handlers{}), durable.SchedulerConfig{
		InstanceID: "idle-" + randomSuffix(), PollInterval: 20 * time.Millisecond, Lease: 3 * time.Second, Logger: log.logger(),
	}))
	began := time.Now()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	time.Sleep(2500 * time.Millisecond) // keep refusing across two heartbeats
	mark := log.mark()
	failed, recovered := log.count(0, mark, hungMsgFailed), log.count(0, mark, hungMsgRecovered)
	if failed != 1 || recovered != 0 {
		t.Errorf("database down for %v, idle scheduler, heartbeat every 1s: %d %q and %d %q lines; want 1 and 0\n%s",
			time.Since(began).Round(time.Millisecond), failed, hungMsgFailed, recovered, hungMsgRecovered, log.dump(0, began))
	}
}
