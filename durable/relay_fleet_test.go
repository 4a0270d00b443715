package durable_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/ratelimit"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/behaviors/timeout"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/postgres"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/httpcall"
	"github.com/switchboard-go/switchboard/mediator"
)

// The notification relay: each child process of mode "relay" is one instance of a relay as a
// user builds it from the public API. Its HTTP front takes a notification (POST, a JSON
// Notice) and sends it through the mediator: the Notice's handler posts it to its provider
// through an http.Client on httpcall, whose pipeline of *httpcall.Call has retry, a breaker
// per provider shared by the fleet, a rate limit per provider shared by the fleet and a
// per-attempt timeout; what still fails is deferred into the queue, whose scheduler tries it
// again. The front answers 200 for a delivered notification, 202 for a deferred one, and
// what httpcall.WriteError says otherwise.
//
// The child prints "READY <front URL>" once it serves, "ANSWER <id> <status> <error>" for
// every answer that is neither 200 nor 202, "TIMEOUT <id>" for every call to a provider whose
// attempt timed out, and, on SIGTERM, after its scheduler stopped,
// "STATS <calls refused by the rate limit> <breaker openings seen> <per-attempt timeouts>".

// The relay's settings, shared by the children and the parent's checks.
const (
	relayRate    = 100                    // calls a second per provider, across the fleet
	relayAttempt = 500 * time.Millisecond // the per-attempt timeout of a call
	relayOpen    = time.Second            // how long a provider's breaker stays open
	relayLease   = 2 * time.Second        // the scheduler's lease: how soon a killed instance's items come back
)

// relayPolicy is the queue's policy: twelve attempts over up to a day, with short delays so
// that the run stays short.
var relayPolicy = retry.Policy{MaxAttempts: 12, BaseDelay: 200 * time.Millisecond, MaxDelay: 2 * time.Second, MaxAge: 24 * time.Hour}

// Notice is the relay's request: notification ID for the provider at URL. Its DedupeKey makes
// a notification a client sends again while its first copy waits in the queue the same item.
type Notice struct {
	mediator.Command
	ID  string `json:"id"`
	URL string `json:"url"`
}

// DedupeKey is the notification's id.
func (n *Notice) DedupeKey() string { return n.ID }

// noticeHeader carries the notification's id to the provider, which deduplicates by it.
const noticeHeader = "Notification-Id"

func runRelayChild() int {
	name := os.Getenv(childInstanceEnv)
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "relay child:", err)
		return 2
	}
	logCfg := zap.NewDevelopmentConfig()
	logCfg.Level = zap.NewAtomicLevelAt(zap.WarnLevel)
	logCfg.DisableStacktrace = true
	log, err := logCfg.Build()
	if err != nil {
		return fail(err)
	}
	// The pool is the application's, sized as a service's would be: a burst of deferrals waits
	// for a connection instead of opening one each, and connections are kept rather than
	// closed and opened again (database/sql keeps two idle ones by default).
	db, err := sql.Open("pgx", os.Getenv(childTargetEnv))
	if err != nil {
		return fail(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	q, err := durable.Open(context.Background(), postgres.New(db, postgres.Config{}), durable.Config{Policy: relayPolicy,
		InstanceID: name, Workers: 8, PollInterval: 20 * time.Millisecond, Lease: relayLease, Logger: log})
	if err != nil {
		return fail(err)
	}
	defer q.Close()

	// A breaker per provider, its state shared by the fleet.
	shared, err := durable.NewBreakerStore(q, "relay", durable.BreakerStoreConfig{RefreshInterval: 200 * time.Millisecond, Logger: log})
	if err != nil {
		return fail(err)
	}
	defer shared.Close()
	var opened atomic.Int64
	// ProbeTimeout above the slowest attempt (relayAttempt), as its documentation asks: a probe
	// held by an instance that died is given up on, and taken over, that much later.
	hosts := breaker.NewRegistry(breaker.Config{Key: httpcall.Authority, FailureThreshold: 5, OpenDuration: relayOpen,
		ProbeTimeout: 4 * relayAttempt, Store: shared, Instance: name,
		OnStateChange: []func(breaker.StateChange){func(c breaker.StateChange) {
			if c.To == breaker.StateOpen {
				opened.Add(1)
			}
		}}})
	// A rate limit per provider, shared by the fleet.
	permits, err := durable.NewRateLimitStore(q, durable.RateLimitStoreConfig{Name: "relay", Instance: name, Logger: log})
	if err != nil {
		return fail(err)
	}
	var refused atomic.Int64
	limiter := ratelimit.New(ratelimit.Config{Rate: relayRate, Key: httpcall.Authority, Store: permits,
		OnRefused: []func(context.Context, ratelimit.RefusedEvent){func(context.Context, ratelimit.RefusedEvent) { refused.Add(1) }}})
	defer limiter.Close()

	if err := durable.Register[*Notice](q, "relay.notice",
		durable.WithBreaker(hosts, func(n *Notice) string { return httpcall.AuthorityOf(n.URL) })); err != nil {
		return fail(err)
	}

	m := mediator.New(nil, mediator.Config{})
	base := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}
	defer base.CloseIdleConnections()
	httpcall.Register(m, base)
	call := mediator.ForRequest[*httpcall.Call]()
	var timeouts atomic.Int64
	m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 2, BaseDelay: 20 * time.Millisecond, MaxDelay: time.Second,
		RetryOnTimeout: behaviors.On}}), call)
	m.Use(breaker.New(hosts), call)
	m.Use(limiter, call)
	m.Use(timeout.New(timeout.Config{Duration: relayAttempt}), call) // per attempt
	m.Use(mediator.BehaviorFunc(func(ctx context.Context, req any, next mediator.Next) (any, error) {
		resp, err := next(ctx, req)
		if errors.Is(err, timeout.ErrExceeded) {
			timeouts.Add(1)
			if c, ok := req.(*httpcall.Call); ok {
				fmt.Println("TIMEOUT", c.Request.Header.Get(noticeHeader))
			}
		}
		return resp, err
	}), call, mediator.WithOrder(behaviors.TimeoutOrder-1))
	client := &http.Client{Transport: httpcall.NewTransport(m, httpcall.Config{})}
	mediator.HandleFunc(m, func(ctx context.Context, n *Notice) (mediator.Void, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.URL, strings.NewReader(`{"id":"`+n.ID+`"}`))
		if err != nil {
			return mediator.Void{}, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(noticeHeader, n.ID)
		resp, err := client.Do(req)
		if err != nil {
			return mediator.Void{}, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return mediator.Void{}, fmt.Errorf("provider %s refused notification %s: %s", n.URL, n.ID, resp.Status)
		}
		return mediator.Void{}, nil
	})
	m.Use(durable.NewDeferral(q, durable.DeferralConfig{}), mediator.ForRequest[*Notice]())
	if err := m.Build(); err != nil {
		return fail(err)
	}
	defer m.Close()
	if err := q.Start(m); err != nil {
		return fail(err)
	}

	front := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n Notice
		if err := json.NewDecoder(r.Body).Decode(&n); err != nil {
			http.Error(w, "the body is not a notification", http.StatusBadRequest)
			return
		}
		// The request's own context, without a deadline of the front's: a deadline shorter
		// than the in-process attempts would answer them 504 instead of deferring them
		// (TestDeferralSaysACallersDeadlineKeptItFromDeferring).
		_, err := mediator.Send(r.Context(), m, &n)
		if err == nil {
			w.WriteHeader(http.StatusOK) // delivered
			return
		}
		if code, _ := httpcall.StatusOf(err); code != http.StatusAccepted {
			fmt.Printf("ANSWER %s %d %s\n", n.ID, code, strings.ReplaceAll(err.Error(), "\n", " | "))
		}
		httpcall.WriteError(w, r, err)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	srv := &http.Server{Handler: front, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	fmt.Println("READY", "http://"+ln.Addr().String()+"/")
	select {
	case <-sig:
	case err := <-served:
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		return fail(err)
	}
	err = q.Shutdown(ctx)
	fmt.Println("STATS", refused.Load(), opened.Load(), timeouts.Load())
	if err != nil {
		return fail(err)
	}
	return 0
}

// relayChild is a running relay instance.
type relayChild struct {
	name  string
	cmd   *exec.Cmd
	url   chan string // the front's URL, once it serves
	done  chan struct{}
	mu    sync.Mutex
	lines []string // the ANSWER, TIMEOUT and STATS lines
}

func startRelayChild(t *testing.T, b backend, name string) *relayChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(b.env, childEnv+"=relay", childInstanceEnv+"="+name)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &relayChild{name: name, cmd: cmd, url: make(chan string, 1), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
				c.url <- u
				continue
			}
			c.mu.Lock()
			c.lines = append(c.lines, sc.Text())
			c.mu.Unlock()
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-c.done
	})
	return c
}

// ready waits for the child's front and returns its URL.
func (c *relayChild) ready(t *testing.T) string {
	t.Helper()
	select {
	case u := <-c.url:
		return u
	case <-c.done:
		t.Fatalf("%s ended before it served", c.name)
	case <-time.After(time.Minute):
		t.Fatalf("%s did not serve within a minute", c.name)
	}
	return ""
}

// stop ends the child with SIGTERM and waits for it; it returns its STATS numbers.
func (c *relayChild) stop(t *testing.T) (refused, opened, timeouts int) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not stop within 30 s", c.name)
	}
	if !c.cmd.ProcessState.Success() {
		// Its Shutdown said what it could not do (on stderr): a database too slow to take the
		// last outcomes within ShutdownGrace leaves their items to run again after their
		// leases, which the counts below would show.
		t.Logf("%s did not stop cleanly: %v", c.name, c.cmd.ProcessState)
	}
	for _, l := range c.printed("STATS ") {
		_, _ = fmt.Sscan(l, &refused, &opened, &timeouts)
	}
	return refused, opened, timeouts
}

func (c *relayChild) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// printed returns the child's lines that start with prefix, without it.
func (c *relayChild) printed(prefix string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, l := range c.lines {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			out = append(out, rest)
		}
	}
	return out
}

// provider is a loopback notification provider. It records every notification it accepted
// (answered 2xx to a client still waiting), by id, and how it answers the others.
type provider struct {
	name   string
	srv    *httptest.Server
	answer func(w http.ResponseWriter, r *http.Request) bool // true: accepted

	mu        sync.Mutex
	got       map[string][]time.Time // when each notification was accepted, by id: twice is a duplicate
	hits      int
	last      time.Time // of the last notification accepted
	abandoned int       // requests whose client was gone when the provider would have accepted them
}

func startProvider(t *testing.T, name string, answer func(w http.ResponseWriter, r *http.Request) bool) *provider {
	p := &provider{name: name, answer: answer, got: map[string][]time.Time{}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The body read to its end lets the server notice a client that goes away.
		_, _ = io.Copy(io.Discard, r.Body)
		p.mu.Lock()
		p.hits++
		p.mu.Unlock()
		if !p.answer(w, r) {
			return
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if r.Context().Err() != nil {
			p.abandoned++ // the relay's attempt timed out: nothing is done with the notification
			return
		}
		id := r.Header.Get(noticeHeader)
		p.got[id] = append(p.got[id], time.Now())
		p.last = time.Now()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *provider) url() string { return p.srv.URL + "/notify" }

func (p *provider) snapshot() (got map[string][]time.Time, hits, abandoned int, last time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.got), p.hits, p.abandoned, p.last
}

// relayLoad is the load generator's record of what the relay answered.
type relayLoad struct {
	client *http.Client

	mu       sync.Mutex
	fronts   []string                 // the live instances' fronts, by name
	urls     map[string]string        // front name → URL
	accepted map[string]int           // notification id → the status that accepted it (200, 202)
	items    map[string]record.ItemID // notification id → the item a 202 named
	codes    map[int]int              // answers by status
	silent   map[string][]string      // notification id → the instances that gave no answer
	refusals map[string]int           // notification id → answers that did not accept it
	armed    string                   // the front whose next written request runs kill
	kill     func()
}

func newRelayLoad() *relayLoad {
	return &relayLoad{
		client:   &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: 30 * time.Second},
		urls:     map[string]string{},
		accepted: map[string]int{}, items: map[string]record.ItemID{}, codes: map[int]int{},
		silent: map[string][]string{}, refusals: map[string]int{},
	}
}

func (l *relayLoad) add(name, url string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fronts = append(l.fronts, name)
	l.urls[name] = url
}

func (l *relayLoad) remove(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fronts = slices.DeleteFunc(l.fronts, func(f string) bool { return f == name })
}

// pick returns the n-th live front, round robin.
func (l *relayLoad) pick(n int) (name, url string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	name = l.fronts[n%len(l.fronts)]
	return name, l.urls[name]
}

// killOnWrite arms kill for front name: it runs once, as soon as a request to that front has
// been written and before its answer is read, so that the kill always meets a request in
// flight.
func (l *relayLoad) killOnWrite(name string, kill func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed, l.kill = name, sync.OnceFunc(kill)
}

// post sends body to front name at url; if name is armed (killOnWrite), its kill runs once
// the request is written.
func (l *relayLoad) post(name, url string, body []byte) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, url+"notify", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	l.mu.Lock()
	if l.armed == name {
		kill := l.kill
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { kill() },
		}))
	}
	l.mu.Unlock()
	return l.client.Do(req)
}

// send posts n until an instance accepts it (200 or 202), as a client of the relay does: an
// instance that does not answer (killed) or answers otherwise is asked again, the next one
// in turn, after the wait it asked for (200 ms when it named none).
func (l *relayLoad) send(n Notice, first int) {
	body, _ := json.Marshal(n)
	for try := range 40 {
		name, url := l.pick(first + try)
		resp, err := l.post(name, url, body)
		if err != nil {
			l.mu.Lock()
			l.silent[n.ID] = append(l.silent[n.ID], name)
			l.mu.Unlock()
			time.Sleep(50 * time.Millisecond) // pacing the client, not waiting for state
			continue
		}
		var accepted struct {
			ID string `json:"id"`
		}
		if resp.StatusCode == http.StatusAccepted {
			_ = json.NewDecoder(resp.Body).Decode(&accepted)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		l.mu.Lock()
		l.codes[resp.StatusCode]++
		switch resp.StatusCode {
		case http.StatusOK, http.StatusAccepted:
			l.accepted[n.ID] = resp.StatusCode
			if id, err := strconv.ParseInt(accepted.ID, 10, 64); err == nil {
				l.items[n.ID] = record.ItemID(id)
			}
			l.mu.Unlock()
			return
		}
		l.refusals[n.ID]++
		l.mu.Unlock()
		wait := 200 * time.Millisecond
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
			wait = time.Duration(s) * time.Second
		}
		time.Sleep(wait) // as the relay asked
	}
}

// A relay of three instances on one PostgreSQL database, as a user builds one (see
// runRelayChild), takes 1,000 notifications: 700 at 100 a second and a burst of 300 at once,
// for three loopback providers: one answers 30 % of its requests 503 with Retry-After, one is
// slow (an eighth of its answers take longer than the per-attempt timeout), one is down (its
// connections closed unanswered) for 4.5 s. One instance is killed with SIGKILL while the
// burst is answered, and another started in its place. Once the queue has drained, per
// notification: none accepted (200 or 202) is lost (neither delivered nor dead), none is dead
// while its policy's attempts and age remain, and none is delivered twice unless something
// at-least-once delivery allows explains it: the SIGKILL (it was in flight at the killed
// instance: its client got no answer there, or its item has an attempt the killed instance
// abandoned), a lease a live instance lost (an attempt abandoned by it: the database did not
// take its heartbeats in time), or a per-attempt timeout that fired as the provider accepted
// it (the relay printed a TIMEOUT for it). The run counts what met where: rate-limit refusals, breaker
// openings, per-attempt timeouts, deferrals, notifications in flight at the kill, and fails
// when one of them did not happen.
func TestFleetRelayLosesNothingWhereTheFeaturesMeet(t *testing.T) {
	t.Parallel()
	b := pgBackend(t)
	obs := b.bare(t, durable.Config{}) // migrated before the children start
	ctx := context.Background()
	begun := time.Now()

	flaky := startProvider(t, "flaky", func(w http.ResponseWriter, _ *http.Request) bool {
		if rand.N(10) < 3 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return false
		}
		return true
	})
	slow := startProvider(t, "slow", func(_ http.ResponseWriter, r *http.Request) bool {
		d := 20 * time.Millisecond
		if rand.N(8) == 0 {
			d = 2 * relayAttempt
		}
		select {
		case <-time.After(d): // the provider's work
		case <-r.Context().Done():
		}
		return true
	})
	var isDown atomic.Bool
	down := startProvider(t, "down", func(w http.ResponseWriter, _ *http.Request) bool {
		if !isDown.Load() {
			return true
		}
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close() // down: the connection ends without an answer
		}
		return false
	})
	providers := []*provider{flaky, slow, down}

	load := newRelayLoad()
	defer load.client.CloseIdleConnections()
	children := map[string]*relayChild{}
	for _, name := range []string{"relay-1", "relay-2", "relay-3"} {
		children[name] = startRelayChild(t, b, name)
	}
	for _, name := range []string{"relay-1", "relay-2", "relay-3"} {
		load.add(name, children[name].ready(t))
	}
	t.Logf("three instances serve after %v", time.Since(begun).Round(time.Millisecond))

	const (
		steady    = 700 // notifications at 100 a second
		burst     = 300 // notifications at once, at burstAt
		downAt    = 200 // the down provider goes down as notification downAt is sent...
		burstAt   = 300
		killAt    = 320 // relay-3 is killed while the burst is answered...
		restartAt = 500 // ...and relay-4 started
		upAt      = 650 // ...and comes back
	)
	var sent sync.WaitGroup
	var upTime time.Time
	notice := func(id string, i int) Notice {
		return Notice{ID: id, URL: providers[i%len(providers)].url()}
	}
	tick := time.NewTicker(10 * time.Millisecond)
	killed := make(chan struct{})
	for i := range steady {
		<-tick.C
		switch i {
		case killAt:
			// relay-3 is killed at the first request written to it from here on, before it
			// answers, so that the kill always meets work in flight.
			relay3 := children["relay-3"]
			load.killOnWrite("relay-3", func() {
				_ = relay3.cmd.Process.Signal(syscall.SIGKILL)
				load.remove("relay-3")
				t.Logf("relay-3 killed at %v, a request to it written", time.Since(begun).Round(time.Millisecond))
				close(killed)
			})
		case downAt:
			isDown.Store(true)
		case burstAt:
			for j := range burst {
				sent.Go(func() { load.send(notice(fmt.Sprintf("b%04d", j), j), j) })
			}
		case restartAt:
			<-killed
			<-children["relay-3"].done
			c := startRelayChild(t, b, "relay-4")
			children["relay-4"] = c
			go func() {
				select {
				case u := <-c.url:
					load.add("relay-4", u)
				case <-c.done:
				}
			}()
		case upAt:
			isDown.Store(false)
			upTime = time.Now()
		}
		sent.Go(func() { load.send(notice(fmt.Sprintf("n%04d", i), i), i) })
	}
	tick.Stop()
	sent.Wait()
	t.Logf("load sent and answered after %v: answers %v", time.Since(begun).Round(time.Millisecond), load.codes)

	// The queue drains: nothing pending or running (a killed instance's items come back when
	// their lease runs out, a down provider's when its breaker closes).
	deadline := time.Now().Add(40 * time.Second)
	for polls := 0; ; polls++ {
		st, err := obs.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if polls%10 == 0 {
			t.Logf("at %v: %v", time.Since(begun).Round(time.Millisecond), st.Counts)
		}
		if st.Counts[record.StatePending]+st.Counts[record.StateRunning] == 0 {
			t.Logf("drained after %v: %v", time.Since(begun).Round(time.Millisecond), st.Counts)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the queue did not drain within 40 s of the load's end: %v\n%s", st.Counts, stuck(t, obs, providers))
		}
		time.Sleep(100 * time.Millisecond) // polling the database's state with a deadline
	}
	var refused, opened, timeouts int
	for _, name := range []string{"relay-1", "relay-2", "relay-4"} {
		r, o, to := children[name].stop(t)
		refused, opened, timeouts = refused+r, opened+o, timeouts+to
	}

	// What the providers got, by notification.
	deliveredAt := map[string][]time.Time{}
	delivered := map[string]int{}
	for _, p := range providers {
		got, hits, abandoned, last := p.snapshot()
		for id, at := range got {
			delivered[id] += len(at)
			deliveredAt[id] = append(deliveredAt[id], at...)
		}
		t.Logf("provider %-5s: %d notifications, %d requests, %d abandoned by a timed-out attempt, last at %v",
			p.name, len(got), hits, abandoned, last.Sub(begun).Round(time.Millisecond))
		if p == down {
			t.Logf("the down provider was up again at %v and got its last notification %v later",
				upTime.Sub(begun).Round(time.Millisecond), last.Sub(upTime).Round(time.Millisecond))
		}
	}
	// The dead letters, by notification, with their timelines.
	type death struct {
		letter          record.DeadLetter
		attempts        int
		expired         bool
		attemptsSummary []string
	}
	dead := map[string]death{}
	for offset := 0; ; offset += 500 {
		lp, err := obs.DeadLetters(ctx, durable.DeadLetterFilter{Limit: 500, Offset: offset})
		letters := lp.Letters
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range letters {
			var n Notice
			if err := json.Unmarshal(l.Payload, &n); err != nil {
				t.Fatalf("letter %d: %v", l.ID, err)
			}
			_, timeline, err := obs.DeadLetter(ctx, l.ID)
			if err != nil {
				t.Fatal(err)
			}
			d := death{letter: l}
			for _, e := range timeline {
				switch e.Kind {
				case record.TimelineAttempt:
					d.attempts++
					d.attemptsSummary = append(d.attemptsSummary, fmt.Sprintf("%d:%s@%s", e.Number, e.Outcome, e.Instance))
				case record.TimelineExpired:
					d.expired = true
				}
			}
			dead[n.ID] = d
		}
		if len(letters) < 500 {
			break
		}
	}

	// Per notification: lost, dead early, delivered twice beyond the kill.
	items := itemsByNotice(t, obs)
	timedOut := map[string]bool{} // notifications one of whose calls timed out
	for _, c := range children {
		for _, id := range c.printed("TIMEOUT ") {
			timedOut[id] = true
		}
	}
	attempts := map[record.ItemID][]record.Attempt{}
	for _, its := range items {
		for _, it := range its {
			attempts[it.ID] = must[[]record.Attempt](t)(obs.Attempts(ctx, it.ID))
		}
	}
	var lost, deadEarly, twice, unaccepted, deliveredUnaccepted []string
	duplicates := map[string]int{} // by what explains them
	var ids []string
	for i := range steady {
		ids = append(ids, fmt.Sprintf("n%04d", i))
	}
	for j := range burst {
		ids = append(ids, fmt.Sprintf("b%04d", j))
	}
	for _, id := range ids {
		_, accepted := load.accepted[id]
		d, isDead := dead[id]
		switch {
		case !accepted:
			unaccepted = append(unaccepted, id)
			if delivered[id] > 0 {
				deliveredUnaccepted = append(deliveredUnaccepted, id)
			}
		case delivered[id] == 0 && !isDead:
			lost = append(lost, id)
		}
		if isDead && d.attempts < relayPolicy.MaxAttempts && !d.expired {
			deadEarly = append(deadEarly, fmt.Sprintf("%s after %d attempts [%s]: %s", id, d.attempts,
				strings.Join(d.attemptsSummary, " "), d.letter.Error))
		}
		if delivered[id] > 1 {
			var as []record.Attempt
			for _, it := range items[id] {
				as = append(as, attempts[it.ID]...)
			}
			abandoned := func(killed bool) bool {
				return slices.ContainsFunc(as, func(a record.Attempt) bool {
					return a.Outcome == record.OutcomeAbandoned && (a.Instance == "relay-3") == killed
				})
			}
			var rows []string
			for _, a := range as {
				rows = append(rows, fmt.Sprintf("item %d %d:%s@%s %s..%s", a.ItemID, a.Number, a.Outcome, a.Instance,
					a.StartedAt.Sub(begun).Round(time.Millisecond), a.EndedAt.Sub(begun).Round(time.Millisecond)))
			}
			var at []string
			for _, a := range deliveredAt[id] {
				at = append(at, a.Sub(begun).Round(time.Millisecond).String())
			}
			detail := fmt.Sprintf("%s (delivered at %v; accepted %d, %d items, attempts [%s], silent at %v)",
				id, at, load.accepted[id], len(items[id]), strings.Join(rows, ", "), load.silent[id])
			var why string
			switch {
			case timedOut[id]:
				// A per-attempt timeout of the relay fired as the provider accepted it: the
				// relay could not know, and tried again.
				why = "a per-attempt timeout as the provider answered"
			case slices.Contains(load.silent[id], "relay-3") || abandoned(true):
				why = "the kill (in flight at the killed instance)"
			case abandoned(false):
				// A live instance's lease ran out while its attempt ran (the database did not
				// take its heartbeats in time): another ran the item again, as at-least-once
				// delivery allows; not the kill's doing, and not a loss.
				why = "a lease lost by a live instance"
			default:
				twice = append(twice, detail)
				continue
			}
			duplicates[why]++
			t.Logf("delivered twice, explained by %s: %s", why, detail)
		}
	}
	var silentAtKilled, runningAtKill int
	for _, s := range load.silent {
		if slices.Contains(s, "relay-3") {
			silentAtKilled++
		}
	}
	for _, its := range items {
		for _, it := range its {
			if slices.ContainsFunc(attempts[it.ID], func(a record.Attempt) bool {
				return a.Instance == "relay-3" && a.Outcome == record.OutcomeAbandoned
			}) {
				runningAtKill++
			}
		}
	}
	t.Logf("%d notifications: %d accepted (%d delivered at once, 200; %d deferred, 202), %d delivered, %d dead letters; "+
		"%d without an answer from the killed instance, %d items it was running; %d answers refused a notification; "+
		"delivered twice: %v; the relays saw %d rate-limit refusals, %d breaker openings, %d per-attempt timeouts",
		len(ids), len(load.accepted), countValues(load.accepted, http.StatusOK), countValues(load.accepted, http.StatusAccepted),
		len(delivered), len(dead), silentAtKilled, runningAtKill, sum(load.refusals), duplicates, refused, opened, timeouts)
	var answers []string
	for _, name := range []string{"relay-1", "relay-2", "relay-3", "relay-4"} {
		answers = append(answers, children[name].printed("ANSWER ")...)
	}
	if len(answers) > 0 {
		t.Logf("the relays answered %d times with neither 200 nor 202:\n%s", len(answers), answerKinds(answers))
	}
	report := func(what string, list []string) {
		if len(list) > 0 {
			t.Errorf("%d %s:\n  %s", len(list), what, strings.Join(list[:min(len(list), 20)], "\n  "))
		}
	}
	report("notifications lost (accepted, neither delivered nor dead)", lost)
	report("notifications dead while their policy's attempts and age remain", deadEarly)
	report("notifications delivered twice that the SIGKILL does not explain", twice)
	report("notifications never accepted", unaccepted)
	// The run met what it is meant to: the features meeting under load.
	if refused == 0 || opened == 0 || timeouts == 0 || load.codes[http.StatusAccepted] == 0 || silentAtKilled+runningAtKill == 0 {
		t.Errorf("the run did not exercise the relay: %d rate-limit refusals, %d breaker openings, %d timeouts, %d deferrals, %d notifications in flight at the kill",
			refused, opened, timeouts, load.codes[http.StatusAccepted], silentAtKilled+runningAtKill)
	}
	if len(deliveredUnaccepted) > 0 {
		t.Logf("%d notifications delivered though never accepted", len(deliveredUnaccepted))
	}
}

// itemsByNotice returns the items of q by the notification they carry (their dedupe key).
func itemsByNotice(t *testing.T, q *durable.Queue) map[string][]record.Item {
	out := map[string][]record.Item{}
	var after record.ItemID
	for {
		page := must[[]record.Item](t)(q.List(context.Background(), durable.Filter{AfterID: after, Limit: 1000}))
		for _, it := range page {
			out[it.DedupeKey] = append(out[it.DedupeKey], it)
			after = it.ID
		}
		if len(page) < 1000 {
			return out
		}
	}
}

// answerKinds counts the ANSWER lines ("<id> <status> <error>") by status and error, the
// error's numbers and addresses left out, with one example of each.
func answerKinds(lines []string) string {
	type kind struct {
		n       int
		example string
	}
	kinds := map[string]*kind{}
	digits := strings.NewReplacer("0", "", "1", "", "2", "", "3", "", "4", "", "5", "", "6", "", "7", "", "8", "", "9", "")
	for _, l := range lines {
		f := strings.SplitN(l, " ", 3)
		if len(f) < 3 {
			continue
		}
		k := f[1] + " " + digits.Replace(f[2])
		if kinds[k] == nil {
			kinds[k] = &kind{example: l}
		}
		kinds[k].n++
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		fmt.Fprintf(&b, "  %d× %s\n", kinds[k].n, kinds[k].example)
	}
	return b.String()
}

func countValues[K comparable, V comparable](m map[K]V, v V) int {
	n := 0
	for _, x := range m {
		if x == v {
			n++
		}
	}
	return n
}

func sum[K comparable](m map[K]int) int {
	n := 0
	for _, x := range m {
		n += x
	}
	return n
}

// stuck describes the items left pending: by provider, the key they are parked on and when
// they are due, and the breakers as the database has them.
func stuck(t *testing.T, q *durable.Queue, providers []*provider) string {
	ctx := context.Background()
	items, err := q.List(ctx, durable.Filter{State: record.StatePending, Limit: 5000})
	if err != nil {
		return err.Error()
	}
	now := time.Now()
	type group struct {
		n           int
		first, last time.Duration // from now until due
		waitMin     time.Duration // from the item's last write (its park) until due: the wait
		waitMax     time.Duration // its park chose (a Recheck, a probe's time, an open time)
		attempts    map[int]int
		lastError   string
	}
	groups := map[string]*group{}
	for _, it := range items {
		var n Notice
		_ = json.Unmarshal(it.Payload, &n)
		name := n.URL
		for _, p := range providers {
			if p.url() == n.URL {
				name = p.name
			}
		}
		k := fmt.Sprintf("%s parked on %q guard %q", name, it.ParkedKey, it.GuardKey)
		g := groups[k]
		due, wait := it.NextAt.Sub(now), it.NextAt.Sub(it.UpdatedAt)
		if g == nil {
			g = &group{first: due, last: due, waitMin: wait, waitMax: wait, attempts: map[int]int{}}
			groups[k] = g
		}
		g.n++
		g.first, g.last = min(g.first, due), max(g.last, due)
		g.waitMin, g.waitMax = min(g.waitMin, wait), max(g.waitMax, wait)
		g.attempts[it.Attempts]++
		g.lastError = it.LastError
	}
	var b strings.Builder
	for k, g := range groups {
		fmt.Fprintf(&b, "  %d items of %s: due in %v..%v (%v..%v after their last write), attempts %v, e.g. last error %s\n", g.n, k,
			g.first.Round(time.Millisecond), g.last.Round(time.Millisecond), g.waitMin.Round(time.Millisecond), g.waitMax.Round(time.Millisecond),
			g.attempts, g.lastError)
	}
	view, err := durable.NewBreakerStore(q, "relay", durable.BreakerStoreConfig{RefreshInterval: time.Hour})
	if err != nil {
		return b.String() + err.Error()
	}
	defer view.Close()
	rows, err := view.Load(ctx)
	if err != nil {
		return b.String() + err.Error()
	}
	for _, r := range rows {
		fmt.Fprintf(&b, "  breaker %+v\n", r)
	}
	return b.String()
}
