package durable_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/ratelimit"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/postgres"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/mediator"
)

// The budget child (mode "budget"): one instance of a fleet as an application runs it, with
// everything that takes a connection on PostgreSQL: a queue opened with a connection budget
// (budgetDriver), its scheduler, a BreakerStore with a subscriber (a breaker.Registry) and two
// RateLimitStores in use (a limiter of each), and, when "go" comes on stdin, a burst of
// enqueues from many goroutines at once. An item's handler makes one outbound call through the
// breaker and both limiters (so every item leases permits): a call of the parent's ledger (an
// HTTP endpoint), which records the item, attempt and instance. It prints
//
//	READY                    once the scheduler runs
//	WARM                     after a call on "warm"
//	ENQ <item>               for each enqueue that stored an item
//	ENQERR <sqlstate|-> <e>  for each enqueue that failed
//	ENQUEUED <ok> <failed>   when the burst is over
//
// and logs (zap, warn and up) on stderr; it shuts down when stdin closes.

// budgetSpecEnv holds the child's budgetSpec, as JSON.
const budgetSpecEnv = "SWITCHBOARD_DURABLE_CHILD_BUDGET"

// budgetSpec is what a budget child runs.
type budgetSpec struct {
	Instance string // the instance's name: its InstanceID and its connections' application_name
	DSN      string // with application_name set to Instance
	// MaxConns and TransactionPooling are the driver's postgres.Config.
	MaxConns           int
	TransactionPooling bool
	Workers            int
	PollInterval       time.Duration
	Lease              time.Duration
	// StoreTimeout bounds the calls of the scheduler (durable.Config.StoreTimeout) and of the
	// fleet stores (their Timeout); 0: their defaults.
	StoreTimeout time.Duration
	Items        int           // enqueued on "go"...
	Senders      int           // ...by this many goroutines at once
	HandlerDelay time.Duration // what a handler takes besides its call of the ledger
	FleetRate    float64       // the fleet's limit of the key "fleet", calls a second
	OtherRate    float64       // the limit of the instance's own key in the second store
	Ledger       string        // the ledger's URL
}

// budgetCall is a budget child's outbound call: the ledger's record of an attempt of an item.
type budgetCall struct {
	mediator.Command
	Item    record.ItemID
	Attempt int
}

// budgetDriver is the driver of every budget child's queue and of the budget tests' own: the
// PostgreSQL database of dsn with a budget of maxConns connections, through a pooler in
// transaction mode when pooling is set. (Before the budget existed, postgres.Open(dsn) opened
// an unbounded pool: TestFleetBudgetFitsASmallServer's failure there is why it exists.)
func budgetDriver(dsn string, maxConns int, pooling bool) durable.Driver {
	return postgres.Open(dsn, postgres.Config{MaxConns: maxConns, TransactionPooling: pooling})
}

// budgetPolicy retries a failed call quickly: the handlers fail only when the ledger does.
var budgetPolicy = retry.Policy{MaxAttempts: 10, BaseDelay: 50 * time.Millisecond, MaxDelay: time.Second}

func runBudgetChild() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "budget child:", err)
		return 2
	}
	var spec budgetSpec
	if err := json.Unmarshal([]byte(os.Getenv(budgetSpecEnv)), &spec); err != nil {
		return fail(err)
	}
	logCfg := zap.NewDevelopmentConfig()
	logCfg.Level = zap.NewAtomicLevelAt(zap.WarnLevel)
	logCfg.DisableStacktrace = true
	log, err := logCfg.Build()
	if err != nil {
		return fail(err)
	}
	log = log.With(zap.String("child", spec.Instance))
	ctx := context.Background()
	q, err := durable.Open(ctx, budgetDriver(spec.DSN, spec.MaxConns, spec.TransactionPooling), durable.Config{
		Policy: budgetPolicy, InstanceID: spec.Instance, Workers: spec.Workers, PollInterval: spec.PollInterval,
		Lease: spec.Lease, StoreTimeout: spec.StoreTimeout, Logger: log})
	if err != nil {
		return fail(err)
	}
	defer q.Close()
	breakers, err := durable.NewBreakerStore(q, "budget", durable.BreakerStoreConfig{Timeout: spec.StoreTimeout, Logger: log})
	if err != nil {
		return fail(err)
	}
	defer breakers.Close()
	// The registry subscribes to the store (its shared state), which then polls and, with
	// notifications, listens.
	reg := breaker.NewRegistry(breaker.Config{Store: breakers, Instance: spec.Instance, FailureThreshold: 1000,
		OnStoreError: []func(error){func(err error) { log.Error("breaker store", zap.Error(err)) }}})
	var limiters []*ratelimit.Behavior
	// The store "fleet" holds the fleet's limit of one key, "fleet"; the store "other" a limit
	// per instance (a tenant's, say), each instance's own key: leased as often, on a row of
	// its own.
	for _, l := range []struct {
		name, key string
		rate      float64
	}{{"fleet", "fleet", spec.FleetRate}, {"other", spec.Instance, spec.OtherRate}} {
		st, err := durable.NewRateLimitStore(q, durable.RateLimitStoreConfig{Name: l.name, Instance: spec.Instance,
			Timeout: spec.StoreTimeout, Logger: log})
		if err != nil {
			return fail(err)
		}
		rl := ratelimit.New(ratelimit.Config{Rate: l.rate, MaxWait: time.Second, Store: st,
			Key: func(any) string { return l.key }})
		defer rl.Close()
		limiters = append(limiters, rl)
	}
	if err := durable.Register[*Work](q, "test.work"); err != nil {
		return fail(err)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	m := mediator.New(nil, mediator.Config{})
	// An item's handler makes one outbound call, a request of its own through the breaker and
	// the two limiters (which wait for a permit there, up to MaxWait, where a scheduler's
	// worker would park the item instead).
	mediator.HandleFunc(m, func(ctx context.Context, w *Work) (mediator.Void, error) {
		d, _ := durable.FromContext(ctx, w)
		if spec.HandlerDelay > 0 {
			select {
			case <-time.After(spec.HandlerDelay): // the handler's work
			case <-ctx.Done():
				return mediator.Void{}, ctx.Err()
			}
		}
		return mediator.Send(ctx, m, &budgetCall{Item: d.ItemID, Attempt: d.Attempt})
	})
	mediator.HandleFunc(m, func(ctx context.Context, c *budgetCall) (mediator.Void, error) {
		u := fmt.Sprintf("%s?item=%d&attempt=%d&instance=%s&at=%d", spec.Ledger, c.Item, c.Attempt, url.QueryEscape(spec.Instance), time.Now().UnixNano())
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
		if err != nil {
			return mediator.Void{}, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return mediator.Void{}, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return mediator.Void{}, nil
	})
	call := mediator.ForRequest[*budgetCall]()
	m.Use(breaker.New(reg), call)
	for _, rl := range limiters {
		m.Use(rl, call)
	}
	if err := m.Build(); err != nil {
		return fail(err)
	}
	defer m.Close()
	// One call before the run, so that the run measures the limits, not the start of a process
	// (its first leases, and the clock offset they estimate). The ledger counts no call
	// before its begin, and no item 0.
	if err := warmUp(ctx, m); err != nil {
		return fail(fmt.Errorf("the first call: %w", err))
	}
	if err := q.Start(m); err != nil {
		return fail(err)
	}
	fmt.Println("READY")
	var out sync.Mutex // the lines of the burst's goroutines, whole
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == "warm" {
			// Another call, once every instance has started: its lease, on a database no
			// longer busy with the instances' start, estimates the clock offset the permits of
			// the run are placed by.
			if err := warmUp(ctx, m); err != nil {
				return fail(fmt.Errorf("the warm-up call: %w", err))
			}
			fmt.Println("WARM")
			continue
		}
		if in.Text() != "go" {
			continue
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		var ok, failed int
		for g := range spec.Senders {
			wg.Go(func() {
				<-start
				for i := g; i < spec.Items; i += spec.Senders {
					ectx, cancel := context.WithTimeout(ctx, 30*time.Second)
					e, err := q.Enqueue(ectx, &Work{N: i})
					cancel()
					out.Lock()
					if err != nil {
						failed++
						fmt.Printf("ENQERR %s %s\n", sqlState(err), strings.ReplaceAll(err.Error(), "\n", " | "))
					} else {
						ok++
						fmt.Printf("ENQ %d\n", e.ID)
					}
					out.Unlock()
				}
			})
		}
		close(start)
		wg.Wait()
		fmt.Printf("ENQUEUED %d %d\n", ok, failed)
	}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := q.Shutdown(sctx); err != nil {
		return fail(fmt.Errorf("shutdown: %w", err))
	}
	return 0
}

// warmUp makes one call that passes the limits (a refused one comes back when told to): a
// call before the run, on item 0, which the ledger does not count.
func warmUp(ctx context.Context, m *mediator.Mediator) error {
	for {
		_, err := mediator.Send(ctx, m, &budgetCall{})
		le, ok := errors.AsType[*ratelimit.LimitedError](err)
		if !ok {
			return err
		}
		time.Sleep(le.Wait) // a refused caller comes back when told to
	}
}

// sqlState returns the SQLSTATE of the server's error err carries, "-" when none.
func sqlState(err error) string {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		return pgErr.Code
	}
	return "-"
}

// budgetChild is a running budget child.
type budgetChild struct {
	spec  budgetSpec
	cmd   *exec.Cmd
	in    io.WriteCloser
	ready chan struct{} // closed at READY
	warm  chan struct{} // closed at WARM
	burst chan struct{} // closed at ENQUEUED
	done  chan struct{} // closed when the process has exited and its output is read

	mu       sync.Mutex
	enqueued []record.ItemID
	enqErrs  []string // "<sqlstate> <error>"
	stderr   strings.Builder
}

// startBudgetChild starts a budget child running spec; extraEnv is added to its environment.
func startBudgetChild(t *testing.T, spec budgetSpec, extraEnv ...string) *budgetChild {
	t.Helper()
	js, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"=budget", budgetSpecEnv+"="+string(js)), extraEnv...)
	c := &budgetChild{spec: spec, cmd: cmd, ready: make(chan struct{}), warm: make(chan struct{}), burst: make(chan struct{}), done: make(chan struct{})}
	if c.in, err = cmd.StdinPipe(); err != nil {
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
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var readers sync.WaitGroup
	readers.Go(func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			l := sc.Text()
			switch {
			case l == "READY":
				close(c.ready)
			case l == "WARM":
				close(c.warm)
			case strings.HasPrefix(l, "ENQ "):
				id, _ := strconv.ParseInt(strings.TrimPrefix(l, "ENQ "), 10, 64)
				c.mu.Lock()
				c.enqueued = append(c.enqueued, record.ItemID(id))
				c.mu.Unlock()
			case strings.HasPrefix(l, "ENQERR "):
				c.mu.Lock()
				c.enqErrs = append(c.enqErrs, strings.TrimPrefix(l, "ENQERR "))
				c.mu.Unlock()
			case strings.HasPrefix(l, "ENQUEUED "):
				close(c.burst)
			}
		}
	})
	readers.Go(func() {
		sc := bufio.NewScanner(errOut)
		sc.Buffer(nil, 1<<20)
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
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-c.done
		}
		if text := c.stderrText(); t.Failed() && text != "" {
			lines := strings.SplitAfter(text, "\n")
			head := min(len(lines), 5)
			t.Logf("%s logged %d lines; the first and the last:\n%s", spec.Instance, len(lines)-1,
				strings.Join(append(lines[:head:head], lines[max(head, len(lines)-5):]...), ""))
		}
	})
	return c
}

// waitFor waits for ch (one of the child's signals) or fails the test after bound.
func (c *budgetChild) waitFor(t *testing.T, ch <-chan struct{}, what string, bound time.Duration) {
	t.Helper()
	select {
	case <-ch:
	case <-c.done:
		t.Fatalf("%s exited before %s:\n%s", c.spec.Instance, what, c.stderrText())
	case <-time.After(bound):
		t.Fatalf("%s: no %s within %v:\n%s", c.spec.Instance, what, bound, c.stderrText())
	}
}

func (c *budgetChild) send(t *testing.T, line string) {
	t.Helper()
	if _, err := fmt.Fprintln(c.in, line); err != nil {
		t.Fatalf("%s: %v", c.spec.Instance, err)
	}
}

// stop closes the child's stdin and waits for it to shut down.
func (c *budgetChild) stop(t *testing.T) {
	t.Helper()
	_ = c.in.Close()
	select {
	case <-c.done:
	case <-time.After(40 * time.Second):
		t.Fatalf("%s did not shut down within 40 s", c.spec.Instance)
	}
	if !c.cmd.ProcessState.Success() {
		t.Errorf("%s did not shut down cleanly: %v\n%s", c.spec.Instance, c.cmd.ProcessState, c.stderrText())
	}
}

// kill ends the child with SIGKILL.
func (c *budgetChild) kill() {
	_ = c.cmd.Process.Kill()
	<-c.done
}

func (c *budgetChild) stderrText() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.String()
}

// results returns the items the child's burst stored and its enqueues' errors.
func (c *budgetChild) results() (enqueued []record.ItemID, errs []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.enqueued), slices.Clone(c.enqErrs)
}

// refusalMarks are what a connection the server refused for lack of slots leaves in an
// error's text (SQLSTATE 53300); connErrorMarks what any failed connection leaves: pgx's failed
// connect (a refusal, a dial or handshake that timed out), and PgBouncer's refusals (its client
// limit, its wait for a server connection).
var (
	refusalMarks   = []string{"53300", "too many clients"}
	connErrorMarks = append([]string{"failed to connect", "connection refused", "no more connections allowed", "query_wait_timeout"}, refusalMarks...)
)

// linesWith counts the lines of text that carry one of marks, and returns the first few.
func linesWith(text string, marks []string) (n int, first []string) {
	for l := range strings.Lines(text) {
		if slices.ContainsFunc(marks, func(m string) bool { return strings.Contains(l, m) }) {
			n++
			if len(first) < 3 {
				first = append(first, strings.TrimSpace(l))
			}
		}
	}
	return n, first
}

// ledgerCall is one call of a handler, as the ledger recorded it.
type ledgerCall struct {
	instance string
	attempt  int
	at       time.Time
}

// ledger is the loopback endpoint the budget children's handlers call: it records every call
// by item, and counts them per second since begin, by the time the child made each.
type ledger struct {
	srv *httptest.Server

	mu    sync.Mutex
	start time.Time
	per   map[int]int
	calls map[record.ItemID][]ledgerCall
	total int
}

func startLedger(t *testing.T) *ledger {
	l := &ledger{per: map[int]int{}, calls: map[record.ItemID][]ledgerCall{}}
	l.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err1 := strconv.ParseInt(r.URL.Query().Get("item"), 10, 64)
		attempt, err2 := strconv.Atoi(r.URL.Query().Get("attempt"))
		if err := errors.Join(err1, err2); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		// The call's time is when the child made it (the same host's clock): a parent slow to
		// take it, on a busy machine, does not move it to a later second.
		now := time.Now()
		if at, err := strconv.ParseInt(r.URL.Query().Get("at"), 10, 64); err == nil {
			now = time.Unix(0, at)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if !l.start.IsZero() && !now.Before(l.start) && id != 0 {
			l.per[int(now.Sub(l.start)/time.Second)]++
		}
		l.calls[record.ItemID(id)] = append(l.calls[record.ItemID(id)], ledgerCall{instance: r.URL.Query().Get("instance"), attempt: attempt, at: now})
		if id != 0 {
			l.total++
		}
	}))
	t.Cleanup(l.srv.Close)
	return l
}

// begin starts the per-second count.
func (l *ledger) begin() {
	l.mu.Lock()
	l.start = time.Now()
	l.mu.Unlock()
}

// count returns the calls of items recorded so far (not the warm-up calls, of item 0).
func (l *ledger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// callsOf returns the calls of item id.
func (l *ledger) callsOf(id record.ItemID) []ledgerCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls[id])
}

// perSecond returns the calls of seconds 0..n-1 since begin.
func (l *ledger) perSecond(n int) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]int, n)
	for i := range out {
		out[i] = l.per[i]
	}
	return out
}

// sampledConn is one connection a connSampler saw: of an instance (its application_name),
// in a state, after a query.
type sampledConn struct {
	app, state, query string
	pid               int64
}

// connSampler samples, in phases the test names, the connections of each instance of apps (by
// application_name) and records, per phase and instance, the fewest and most connections seen
// at once, the fewest and most of them listening, and every sample in which an instance held
// more than its limit.
type connSampler struct {
	apps  []string
	limit int
	read  func(ctx context.Context) ([]sampledConn, error)

	mu       sync.Mutex
	phase    string
	phases   []string                      // in the order they began
	samples  map[string]int                // samples per phase
	conns    map[string]map[string]*minMax // phase → instance → connections
	listen   map[string]map[string]*minMax // phase → instance → listening connections
	over     []string                      // the samples above limit, described
	errs     int
	lastErr  error
	stopOnce sync.Once
	stopped  chan struct{}
	done     chan struct{}
}

// minMax is the range of a count over samples.
type minMax struct{ min, max int }

func (m *minMax) add(n int) {
	m.min, m.max = min(m.min, n), max(m.max, n)
}

func (m *minMax) String() string {
	if m.min == m.max {
		return strconv.Itoa(m.min)
	}
	return fmt.Sprintf("%d..%d", m.min, m.max)
}

// pgActivity reads the client backends of db's server whose application_name starts with
// prefix, from pg_stat_activity.
func pgActivity(db *sql.DB, prefix string) func(ctx context.Context) ([]sampledConn, error) {
	return func(ctx context.Context) ([]sampledConn, error) {
		rows, err := db.QueryContext(ctx, `SELECT application_name, coalesce(state, ''), coalesce(query, ''), pid
			FROM pg_stat_activity WHERE backend_type = 'client backend' AND starts_with(application_name, $1)`, prefix)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []sampledConn
		for rows.Next() {
			var c sampledConn
			if err := rows.Scan(&c.app, &c.state, &c.query, &c.pid); err != nil {
				return nil, err
			}
			out = append(out, c)
		}
		return out, rows.Err()
	}
}

// bouncerWatch reads PgBouncer's admin console (on conn): the client connections of the
// instances (SHOW CLIENTS, those whose application_name starts with prefix), and, every
// fifth read, its pool of the database db (SHOW POOLS), kept as a timeline for a failure's
// report.
type bouncerWatch struct {
	conn       *pgx.Conn
	prefix, db string
	begun      time.Time

	mu       sync.Mutex
	reads    int
	timeline []string
}

// clients is a connSampler's read: SHOW CLIENTS (and SHOW POOLS).
func (w *bouncerWatch) clients(ctx context.Context) ([]sampledConn, error) {
	var out []sampledConn
	err := w.show(ctx, "SHOW CLIENTS", func(row map[string]any) {
		c := sampledConn{}
		c.app, _ = row["application_name"].(string)
		c.state, _ = row["state"].(string)
		if strings.HasPrefix(c.app, w.prefix) {
			out = append(out, c)
		}
	})
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.reads++
	pools := w.reads%5 == 1
	w.mu.Unlock()
	if pools {
		err = w.show(ctx, "SHOW POOLS", func(row map[string]any) {
			if row["database"] != w.db {
				return
			}
			var b strings.Builder
			fmt.Fprintf(&b, "%6.1f s:", time.Since(w.begun).Seconds())
			for _, col := range []string{"cl_active", "cl_waiting", "cl_active_cancel_req", "cl_waiting_cancel_req", "sv_active", "sv_idle", "sv_used", "sv_login", "maxwait"} {
				fmt.Fprintf(&b, " %s=%v", col, row[col])
			}
			w.mu.Lock()
			w.timeline = append(w.timeline, b.String())
			w.mu.Unlock()
		})
	}
	return out, err
}

// show runs a SHOW command and calls each with its rows, by column name.
func (w *bouncerWatch) show(ctx context.Context, cmd string, each func(row map[string]any)) error {
	rows, err := w.conn.Query(ctx, cmd)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return err
		}
		row := map[string]any{}
		for i, f := range rows.FieldDescriptions() {
			row[f.Name] = vals[i]
		}
		each(row)
	}
	return rows.Err()
}

// report logs the pool's timeline when t failed.
func (w *bouncerWatch) report(t *testing.T) {
	t.Helper()
	if !t.Failed() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("PgBouncer's pool of %s:\n  %s", w.db, strings.Join(w.timeline, "\n  "))
}

// startConnSampler samples with read every interval until stop, starting in phase.
func startConnSampler(t *testing.T, apps []string, limit int, interval time.Duration, phase string, read func(ctx context.Context) ([]sampledConn, error)) *connSampler {
	s := &connSampler{apps: apps, limit: limit, read: read, phase: phase, phases: []string{phase},
		samples: map[string]int{}, conns: map[string]map[string]*minMax{}, listen: map[string]map[string]*minMax{},
		stopped: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			s.sample()
			select {
			case <-s.stopped:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(s.stop)
	return s
}

func (s *connSampler) sample() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conns, err := s.read(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.errs++
		s.lastErr = err
		return
	}
	by := map[string][]sampledConn{}
	for _, c := range conns {
		by[c.app] = append(by[c.app], c)
	}
	s.samples[s.phase]++
	if s.conns[s.phase] == nil {
		s.conns[s.phase], s.listen[s.phase] = map[string]*minMax{}, map[string]*minMax{}
	}
	for _, app := range s.apps {
		cs := by[app]
		listening := 0
		for _, c := range cs {
			if isListening(c) {
				listening++
			}
		}
		if s.conns[s.phase][app] == nil {
			s.conns[s.phase][app] = &minMax{min: len(cs), max: len(cs)}
			s.listen[s.phase][app] = &minMax{min: listening, max: listening}
		}
		s.conns[s.phase][app].add(len(cs))
		s.listen[s.phase][app].add(listening)
		if len(cs) > s.limit && len(s.over) < 20 {
			var d []string
			for _, c := range cs {
				d = append(d, fmt.Sprintf("pid %d %s %q", c.pid, c.state, c.query))
			}
			s.over = append(s.over, fmt.Sprintf("%s: %s held %d connections: %s", s.phase, app, len(cs), strings.Join(d, "; ")))
		}
	}
}

// isListening reports whether c is a notification connection: idle after its LISTEN.
func isListening(c sampledConn) bool {
	return c.state == "idle" && strings.HasPrefix(c.query, "LISTEN ")
}

// setPhase names the phase of the samples from now on.
func (s *connSampler) setPhase(phase string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.phase = phase
	s.phases = append(s.phases, phase)
}

// count returns how many samples phase has.
func (s *connSampler) count(phase string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples[phase]
}

// latest takes a sample now and returns each instance's listening connections in it.
func (s *connSampler) latestListening(ctx context.Context) (map[string]int, error) {
	conns, err := s.read(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, app := range s.apps {
		out[app] = 0
	}
	for _, c := range conns {
		if isListening(c) {
			out[c.app]++
		}
	}
	return out, nil
}

func (s *connSampler) stop() {
	s.stopOnce.Do(func() { close(s.stopped) })
	<-s.done
}

// report stops the sampler and fails t for every sample in which an instance held more than
// the limit; it logs, per phase, the samples taken and each instance's range of connections
// and of listening ones.
func (s *connSampler) report(t *testing.T) {
	t.Helper()
	s.stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.phases {
		if s.samples[p] == 0 {
			t.Logf("connections, %s: no sample", p)
			continue
		}
		var conns, listen []string
		if len(s.apps) > 8 { // a fleet: the distribution of the most rather than every instance
			most, lmost := map[int]int{}, map[int]int{}
			for _, app := range s.apps {
				most[s.conns[p][app].max]++
				lmost[s.listen[p][app].max]++
			}
			conns, listen = []string{fmt.Sprintf("instances by most connections %v", most)}, []string{fmt.Sprintf("instances by most listening %v", lmost)}
		} else {
			for _, app := range s.apps {
				conns = append(conns, fmt.Sprintf("%s=%v", app, s.conns[p][app]))
				listen = append(listen, fmt.Sprintf("%s=%v", app, s.listen[p][app]))
			}
		}
		t.Logf("connections, %s: %d samples; at once: %s; listening: %s", p, s.samples[p], strings.Join(conns, " "), strings.Join(listen, " "))
	}
	if s.errs > 0 {
		t.Logf("%d samples failed, the last: %v", s.errs, s.lastErr)
	}
	for _, o := range s.over {
		t.Errorf("above the budget of %d: %s", s.limit, o)
	}
}

// listening returns, for phase, each instance's range of listening connections.
func (s *connSampler) listening(phase string) map[string]minMax {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]minMax{}
	for app, m := range s.listen[phase] {
		out[app] = *m
	}
	return out
}
