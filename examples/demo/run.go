package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/fallback"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/behaviors/timeout"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/health"
	"github.com/switchboard-go/switchboard/httpcall"
	"github.com/switchboard-go/switchboard/logging"
	"github.com/switchboard-go/switchboard/mediator"
	"github.com/switchboard-go/switchboard/metrics"
	"github.com/switchboard-go/switchboard/tracing"
)

// options says how run runs; main gives them from the flags, the tests shorter ones.
type options struct {
	duration time.Duration // how long the run lasts; requests stop at sendUntil of it
	rate     int           // requests a second
	addr     string        // of the dashboard, /metrics and the probes
	dir      string        // of the queue and the log file
	quit     bool          // return after the summary instead of serving until ctx ends
	progress bool          // rewrite one progress line (a terminal) instead of printing one now and then
	// served, when set, is called once the dashboard listens (tests open it).
	served func(url, token string)
	// inspect, when set, is called after the summary while the dashboard is still served.
	inspect func(url, token string)
}

// The resilience settings that do not depend on the run's length.
const (
	attempts         = 3                      // per HTTP call, in process
	attemptTimeout   = 500 * time.Millisecond // per attempt
	failureThreshold = 8                      // consecutive failures that open an endpoint's breaker
	workers          = 8                      // of the durable scheduler
	inFlight         = 64                     // requests in flight at most; the sender waits beyond
	source           = "demo.deliver"         // the durable name of *Deliver
)

// demo is one run's state.
type demo struct {
	opt   options
	t     timings
	start atomic.Pointer[time.Time] // see begin
	out   *console
	eps   []*endpoint
	// unanswered is the deliveries' base transport, which remembers the attempts that got no
	// answer; the summary tells their second copies from deliveries sent twice by mistake.
	unanswered *unanswered
	m          *mediator.Mediator
	queue      *durable.Queue
	hosts      *breaker.Registry

	mu    sync.Mutex
	rows  map[string]*row // by endpoint
	trips map[string]int  // breaker openings by endpoint
	fails []string        // the first errors of requests that failed outright
}

// row counts what became of the requests to one endpoint, in process.
type row struct {
	sent, first, retried, fellBack, clientError, failed int
	delivered                                           int             // deliveries among first and retried
	deferred                                            []record.ItemID // deliveries the deferral stored
}

// tally is one request's story, filled in by the behaviors' observers through its context.
type tally struct {
	retries  atomic.Int32
	fellBack atomic.Bool
}

type tallyKey struct{}

func tallyOf(ctx context.Context) *tally {
	t, _ := ctx.Value(tallyKey{}).(*tally)
	return t
}

func run(ctx context.Context, out io.Writer, opt options) (*report, error) {
	d := &demo{opt: opt, t: timings{d: opt.duration}, rows: map[string]*row{}, trips: map[string]int{}}
	d.begin() // again once everything is set up
	d.out = &console{w: out, progress: opt.progress}

	// The endpoints, on loopback.
	d.eps = newEndpoints(2 * attemptTimeout)
	d.unanswered = newUnanswered(http.DefaultTransport.(*http.Transport).Clone())
	names := map[string]string{} // breaker key by authority
	for _, e := range d.eps {
		e.done = d.done
		url, stop, err := listen("127.0.0.1:0", e)
		if err != nil {
			return nil, err
		}
		defer stop()
		e.url = url
		names[httpcall.AuthorityOf(url)] = e.name
		d.rows[e.name] = &row{}
	}

	// zap at info into a file; tracing into memory; metrics on a private registry.
	if err := os.MkdirAll(opt.dir, 0o755); err != nil {
		return nil, err
	}
	logPath := filepath.Join(opt.dir, "demo.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	logger := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(logFile), zap.InfoLevel))
	defer func() { _ = logger.Sync() }()
	spans := &spanCounter{traces: map[trace.TraceID]bool{}}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer func() { _ = tp.Shutdown(context.WithoutCancel(ctx)) }()
	rec, err := metrics.New(metrics.Config{})
	if err != nil {
		return nil, err
	}

	// One breaker per endpoint, keyed as httpcall.Authority keys a call.
	d.hosts = breaker.NewRegistry(breaker.Config{
		Key: keyOf(names), FailureThreshold: failureThreshold, OpenDuration: d.t.openFor(),
	})
	d.hosts.Declare(keys(d.eps)...) // so the dashboard lists every endpoint from the start

	// The queue: what the in-process attempts could not deliver waits here for its endpoint's
	// breaker, retried with a patient policy, until MaxAge makes it a dead letter.
	d.queue, err = durable.Open(ctx, sqlite.Open(filepath.Join(opt.dir, "queue.db")), durable.Config{
		Policy: retry.Policy{
			MaxAttempts: 8, BaseDelay: d.t.at(1.0 / 60), MaxDelay: d.t.at(1.0 / 12),
			RetryOnTimeout: behaviors.On, RetryOnTransport: behaviors.On, MaxAge: d.t.maxAge(),
		},
		Logger:      logger,
		Propagators: []durable.Propagator{tracing.Propagator(tracing.Config{TracerProvider: tp})},
		InstanceID:  "demo-1", Workers: workers, PollInterval: 100 * time.Millisecond,
	})
	if err != nil {
		return nil, err
	}
	defer d.queue.Close()
	if n, err := leftOver(ctx, d.queue); err != nil {
		return nil, err
	} else if n.items+n.letters > 0 {
		return nil, fmt.Errorf("-dir %s holds the queue of an earlier run (%d items, %d dead letters), whose endpoints are gone: give a new directory (or none, for a temporary one)", opt.dir, n.items, n.letters)
	}
	durable.Register[*Deliver](d.queue, source, durable.WithBreaker(d.hosts, func(q *Deliver) string { return q.Endpoint }))

	// The pipeline. Every request is traced, logged and measured; a Quote falls back to the
	// last rate; a Deliver that still fails is deferred; every HTTP call is retried, guarded
	// by its endpoint's breaker and bounded per attempt.
	last := &rates{m: map[string]float64{}}
	d.m = mediator.New(nil, mediator.Config{Logger: logger})
	// The observers: each attaches once and hears every behavior of the pipelines and of the
	// queue started with d.m (retries, fallbacks, breaker changes and refusals, claims,
	// settled items).
	lg := logging.New(logging.Config{Logger: logger, Breakers: d.hosts})
	d.m.Observe(rec)
	d.m.Observe(tracing.SpanEvents{})
	d.m.Observe(lg)
	d.m.Observe(d) // the demo's own: the console's breaker lines and the tallies
	httpcall.Register(d.m, nil)
	call := mediator.ForRequest[*httpcall.Call]()
	d.m.Use(tracing.New(tracing.Config{TracerProvider: tp}))
	// Logging outside fallback logs a Quote the fallback answered as the success its caller
	// got, not as the failure the fallback hid (docs/observability.md).
	d.m.Use(lg, mediator.WithOrder(behaviors.FallbackOrder-1))
	d.m.Use(rec.Behavior())
	d.m.Use(fallback.NewFor(func(_ context.Context, q *Quote, _ error) (float64, error) {
		if r, ok := last.get(q.Endpoint); ok {
			return r, nil
		}
		return 0, errNoRate
	}, fallback.Config{}))
	d.m.Use(durable.NewDeferral(d.queue, durable.DeferralConfig{}), mediator.ForRequest[*Deliver]())
	d.m.Use(retry.New(retry.Config{
		Policy: retry.Policy{
			MaxAttempts: attempts, BaseDelay: 50 * time.Millisecond, MaxDelay: 2 * time.Second,
			RetryOnTimeout: behaviors.On, RetryOnTransport: behaviors.On,
		},
	}), call)
	d.m.Use(breaker.New(d.hosts), call)
	d.m.Use(timeout.New(timeout.Config{Duration: attemptTimeout}), call)
	client := &http.Client{Transport: httpcall.NewTransport(d.m, httpcall.Config{Base: d.unanswered})}
	defer client.CloseIdleConnections()
	mediator.HandleFunc(d.m, deliver(client))
	mediator.HandleFunc(d.m, quote(client, last))
	if err := d.m.Build(); err != nil {
		return nil, err
	}
	defer d.m.Close()
	for _, c := range []func() error{
		func() error { return rec.CollectBreakers(d.hosts) },
		func() error { return rec.CollectQueue(d.queue) },
	} {
		if err := c(); err != nil {
			return nil, err
		}
	}

	if err := d.queue.Start(d.m); err != nil {
		return nil, err
	}
	defer d.queue.Shutdown(context.WithoutCancel(ctx)) // on an early return; a second call returns the first one's result

	// The operator's side: the dashboard and API, /metrics and the probes on one server.
	token, err := newToken()
	if err != nil {
		return nil, err
	}
	adm, err := admin.New(admin.Config{Breakers: d.hosts, Queue: d.queue, Sender: d.m, Token: token, Metrics: rec.Handler(), Logger: logger})
	if err != nil {
		return nil, err
	}
	probes, err := health.New(health.Config{Queue: d.queue})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/", adm)
	mux.Handle("GET /healthz", probes.Liveness())
	mux.Handle("GET /readyz", probes.Readiness())
	base, stopAdmin, err := listen(opt.addr, mux)
	if err != nil {
		return nil, err
	}
	defer stopAdmin()

	d.intro(base, token, logPath)
	if opt.served != nil {
		opt.served(base, token)
	}

	// The run: requests until sendUntil, the operator's replay, progress until the end. Its
	// clock starts now, so that the time setting up took (migrations, a slow machine) does not
	// eat into the first phase.
	d.begin()
	stopSending := make(chan struct{})
	var senders sync.WaitGroup
	senders.Go(func() { d.send(context.WithoutCancel(ctx), stopSending) })
	senders.Go(func() { d.operate(ctx) })
	d.watch(ctx)
	close(stopSending)
	senders.Wait()

	// The scheduler stops before the summary, so no item changes while it is counted.
	if err := d.queue.Shutdown(context.WithoutCancel(ctx)); err != nil {
		return nil, err
	}
	rep, err := d.report(context.WithoutCancel(ctx))
	if err != nil {
		return nil, err
	}
	rep.spans, rep.traces = spans.counts()
	rep.series = scrapeCount(base, token)
	_ = logger.Sync()
	rep.logLines = countLines(logPath)
	rep.print(d.out.w, d)
	if err := rep.check(); err != nil {
		return rep, err
	}
	if opt.inspect != nil {
		opt.inspect(base, token)
	}
	if !opt.quit && ctx.Err() == nil {
		fmt.Fprintf(d.out.w, "\nthe dashboard stays up at %s (token %s): the outage's remaining dead letters replay successfully now. Ctrl-C to stop.\n", base, token)
		<-ctx.Done()
	}
	return rep, nil
}

// done is the fraction of the run done: 0 at its start, 1 at its end.
func (d *demo) done() float64 { return float64(d.since()) / float64(d.opt.duration) }

func (d *demo) elapsed() string { return roundDuration(d.since()) }

// begin starts the run's clock. The endpoints read it on their servers' goroutines.
func (d *demo) begin() {
	now := time.Now()
	d.start.Store(&now)
}

func (d *demo) since() time.Duration { return time.Since(*d.start.Load()) }

func keys(eps []*endpoint) []string {
	ks := make([]string, len(eps))
	for i, e := range eps {
		ks[i] = e.name
	}
	return ks
}

// OnRetry counts a retry in the tally of the request's line (retry.Observer).
func (d *demo) OnRetry(ctx context.Context, _ retry.Event) {
	if t := tallyOf(ctx); t != nil {
		t.retries.Add(1)
	}
}

// OnFallback marks a Quote the fallback answered (fallback.Observer).
func (d *demo) OnFallback(ctx context.Context, f fallback.Fallback) {
	if t := tallyOf(ctx); t != nil && f.Verdict == fallback.Answered {
		t.fellBack.Store(true)
	}
}

// OnStateChange prints a breaker's transition where it happens and counts its openings
// (breaker.Observer).
func (d *demo) OnStateChange(c breaker.StateChange) {
	if c.To == breaker.StateOpen {
		d.mu.Lock()
		d.trips[c.Key]++
		d.mu.Unlock()
		d.out.event(d.elapsed(), "breaker %s: %s → open for %s (%s)", c.Key, c.From, roundDuration(d.t.openFor()), c.Reason)
		return
	}
	d.out.event(d.elapsed(), "breaker %s: %s → %s", c.Key, c.From, c.To)
}

// send sends requests at the rate until sendUntil or stop, round robin over the endpoints,
// every fourth a Quote, and waits for the last one.
func (d *demo) send(ctx context.Context, stop <-chan struct{}) {
	tick := time.NewTicker(time.Second / time.Duration(d.opt.rate))
	defer tick.Stop()
	slots := make(chan struct{}, inFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	for seq := 1; ; seq++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		if d.done() >= sendUntil {
			return
		}
		select {
		case slots <- struct{}{}:
		case <-stop:
			return
		}
		e := d.eps[seq%len(d.eps)]
		wg.Go(func() {
			defer func() { <-slots }()
			d.one(ctx, e, seq)
		})
	}
}

// one sends request seq to e and records what became of it.
func (d *demo) one(ctx context.Context, e *endpoint, seq int) {
	t := &tally{}
	ctx = context.WithValue(ctx, tallyKey{}, t)
	isQuote := seq%4 == 3
	var err error
	if isQuote {
		_, err = mediator.Send(ctx, d.m, &Quote{Endpoint: e.name, URL: e.url + "rates"})
	} else {
		_, err = mediator.Send(ctx, d.m, &Deliver{Seq: seq, Endpoint: e.name, URL: e.url + "deliveries"})
	}
	var deferred *durable.DeferredError
	var refused *refusedError
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.rows[e.name]
	r.sent++
	switch {
	case err == nil && t.fellBack.Load():
		r.fellBack++
	case err == nil:
		if t.retries.Load() == 0 {
			r.first++
		} else {
			r.retried++
		}
		if !isQuote {
			r.delivered++
		}
	case errors.As(err, &deferred):
		r.deferred = append(r.deferred, deferred.ItemID)
	case errors.As(err, &refused):
		r.clientError++
	default:
		r.failed++
		if len(d.fails) < 3 {
			d.fails = append(d.fails, fmt.Sprintf("%s: %v", e.name, err))
		}
	}
}

// operate is the operator: once the outage is over and its breaker closed, it replays half of
// the outage's dead letters and leaves the rest for the dashboard.
func (d *demo) operate(ctx context.Context) {
	wait := func(until float64) bool {
		for d.done() < until {
			select {
			case <-ctx.Done():
				return false
			case <-time.After(50 * time.Millisecond):
			}
		}
		return true
	}
	if !wait(replayAt) {
		return
	}
	for d.hosts.Admission("outage").State != breaker.StateClosed {
		if d.done() >= sendUntil || !wait(d.done()+0.01) {
			d.out.event(d.elapsed(), "the outage's breaker is still not closed: no replay")
			return
		}
	}
	var outage []record.DeadLetterID
	for offset := 0; ; {
		page, err := d.queue.DeadLetters(ctx, durable.DeadLetterFilter{Source: source, Limit: 500, Offset: offset})
		if err != nil {
			d.out.event(d.elapsed(), "listing dead letters failed: %v", err)
			return
		}
		for _, l := range page.Letters {
			var q Deliver
			if json.Unmarshal(l.Payload, &q) == nil && q.Endpoint == "outage" {
				outage = append(outage, l.ID)
			}
		}
		if len(page.Letters) < 500 {
			break
		}
		offset += len(page.Letters)
	}
	if len(outage) == 0 {
		d.out.event(d.elapsed(), "the outage left no dead letter to replay")
		return
	}
	half := outage[:(len(outage)+1)/2]
	var ok int
	var lastErr error
	for _, id := range half {
		res, err := d.queue.Replay(ctx, d.m, id, "demo operator")
		if res == durable.Replayed {
			ok++
		} else if err != nil {
			lastErr = err
		}
	}
	msg := fmt.Sprintf("the operator replays %d of the outage's %d dead letters: %d succeeded", len(half), len(outage), ok)
	if lastErr != nil {
		msg += fmt.Sprintf(" (last failure: %v)", lastErr)
	}
	if rest := len(outage) - len(half); rest > 0 {
		msg += fmt.Sprintf("; %d %s for you in the dashboard", rest, plural(rest, "waits", "wait"))
	}
	d.out.event(d.elapsed(), "%s", msg)
}

// watch announces the endpoints' phases and shows progress until the run's end or ctx's.
func (d *demo) watch(ctx context.Context) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	announced := map[string]bool{}
	announce := func(name string, when bool, format string, args ...any) {
		if when && !announced[name] {
			announced[name] = true
			d.out.event(d.elapsed(), format, args...)
		}
	}
	every := max(time.Second, d.opt.duration/6) // a line now and then when the output is no terminal
	if d.opt.progress {
		every = time.Second
	}
	lastLine := time.Now()
	for {
		select {
		case <-ctx.Done():
			d.out.event(d.elapsed(), "interrupted: no new requests; the summary follows")
			return
		case <-tick.C:
		}
		f := d.done()
		announce("down", f >= outageFrom, "outage goes down: it answers 503 until %s", roundDuration(d.t.at(outageTo)))
		announce("up", f >= outageTo, "outage is back")
		announce("stop", f >= sendUntil, "no new requests from now: the queue has until %s to drain", roundDuration(d.opt.duration))
		for i := 0; float64(i)*burstEvery+burstFrom < burstsUntil; i++ {
			at := burstFrom + float64(i)*burstEvery
			announce(fmt.Sprint("burst", i), f >= at && f < at+burstLen, "bursty answers 503 (Retry-After: 1) for %s", roundDuration(d.t.at(burstLen)))
		}
		if f >= 1 {
			d.out.clear()
			return
		}
		if time.Since(lastLine) >= every {
			lastLine = time.Now()
			d.out.status(d.elapsed(), d.progressLine(ctx))
		}
	}
}

// progressLine is one line of where the run stands.
func (d *demo) progressLine(ctx context.Context) string {
	d.mu.Lock()
	var sent, ok, fell, refused, failed, deferred int
	for _, r := range d.rows {
		sent, ok, fell = sent+r.sent, ok+r.first+r.retried, fell+r.fellBack
		refused, failed, deferred = refused+r.clientError, failed+r.failed, deferred+len(r.deferred)
	}
	d.mu.Unlock()
	line := fmt.Sprintf("answered %d: ok %d  fell back %d  4xx %d  failed %d  deferred %d", sent, ok, fell, refused, failed, deferred)
	if st, err := d.queue.Stats(ctx); err == nil {
		line += fmt.Sprintf("  queue %d pending, %d dead letters", st.Counts[record.StatePending]+st.Counts[record.StateRunning], st.DeadLetters[record.DeadLetterFailed])
	}
	var open []string
	for _, e := range d.eps {
		if left, isOpen := d.hosts.OpenFor(e.name); isOpen {
			open = append(open, fmt.Sprintf("%s %s", e.name, roundDuration(left)))
		}
	}
	if len(open) > 0 {
		line += "  open: " + strings.Join(open, ", ")
	}
	return line
}

// intro says what runs and where to look.
func (d *demo) intro(base, token, logPath string) {
	w := d.out.w
	fmt.Fprintf(w, "switchboard demo: an outbound dispatcher sends %d requests a second to %d endpoints on loopback for %s\n\n",
		d.opt.rate, len(d.eps), roundDuration(d.opt.duration))
	for _, e := range d.eps {
		fmt.Fprintf(w, "  %-7s %s  %s\n", e.name, e.url, e.about)
	}
	fmt.Fprintf(w, "\nevery 4th request is a Quote (a read: falls back to the last rate), the others Deliver (deferred to the queue when they still fail).\n")
	fmt.Fprintf(w, "each HTTP call: retry (%d attempts, Retry-After honoured) → the endpoint's breaker (opens after %d failures, for %s) → timeout (%s per attempt)\n",
		attempts, failureThreshold, roundDuration(d.t.openFor()), roundDuration(attemptTimeout))
	fmt.Fprintf(w, "deferred deliveries wait on their endpoint's breaker in SQLite; one that waits over %s becomes a dead letter\n\n", roundDuration(d.t.maxAge()))
	fmt.Fprintf(w, "dashboard: %s  (token %s)\n", base, token)
	fmt.Fprintf(w, "metrics:   curl -H 'Authorization: Bearer %s' %smetrics\n", token, base)
	fmt.Fprintf(w, "health:    %sreadyz  %shealthz\n", base, base)
	fmt.Fprintf(w, "logs:      %s (zap, JSON, info and up)\n", logPath)
	fmt.Fprintf(w, "queue:     %s (SQLite)\n\n", filepath.Join(d.opt.dir, "queue.db"))
}

// roundDuration prints d as a person reads it: whole seconds from 10 s (90s, not 1m30s: the
// run's times line up), tenths below, whole milliseconds under a second.
func roundDuration(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return fmt.Sprintf("%ds", int64(d.Round(time.Second)/time.Second))
	case d >= time.Second:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Millisecond).String()
	}
}

// rates is each endpoint's last quoted rate.
type rates struct {
	mu sync.Mutex
	m  map[string]float64
}

func (r *rates) set(endpoint string, v float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[endpoint] = v
}

func (r *rates) get(endpoint string) (float64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.m[endpoint]
	return v, ok
}

// spanCounter is a span processor that counts ended spans and their traces: the demo keeps its
// traces in memory; a service sends them to an exporter.
type spanCounter struct {
	mu     sync.Mutex
	spans  int
	traces map[trace.TraceID]bool
}

func (s *spanCounter) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (s *spanCounter) OnEnd(sp sdktrace.ReadOnlySpan) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spans++
	s.traces[sp.SpanContext().TraceID()] = true
}
func (s *spanCounter) Shutdown(context.Context) error   { return nil }
func (s *spanCounter) ForceFlush(context.Context) error { return nil }

func (s *spanCounter) counts() (spans, traces int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spans, len(s.traces)
}

// console writes the run's events, each on a line of its own, and on a terminal one progress
// line that each status rewrites.
type console struct {
	mu       sync.Mutex
	w        io.Writer
	progress bool
	shown    bool // a progress line is on screen
}

func (c *console) event(at, format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.erase()
	fmt.Fprintf(c.w, "%6s  %s\n", at, fmt.Sprintf(format, args...))
}

func (c *console) status(at, line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.progress {
		fmt.Fprintf(c.w, "%6s  · %s\n", at, line)
		return
	}
	c.erase()
	fmt.Fprintf(c.w, "%6s  · %s", at, line)
	c.shown = true
}

func (c *console) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.erase()
}

func (c *console) erase() {
	if c.shown {
		fmt.Fprint(c.w, "\r\033[K")
		c.shown = false
	}
}

// leftOver counts what an earlier run left in the queue: items in any state and dead letters.
func leftOver(ctx context.Context, q *durable.Queue) (n struct{ items, letters int64 }, err error) {
	items, letters, err := q.Counts(ctx)
	for _, c := range items {
		n.items += c
	}
	for _, c := range letters {
		n.letters += c
	}
	return n, err
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
