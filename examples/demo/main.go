package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"sync"
	"syscall"
	"time"

	"github.com/samber/do/v2"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/behaviors"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/fallback"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/behaviors/timeout"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/mediator"
)

// Charge asks a payment endpoint to charge a card. It is idempotent by Ref, so it is safe to
// retry and to defer.
type Charge struct {
	mediator.Command
	Ref      string `json:"ref"`
	Endpoint string `json:"endpoint"`
	Cents    int    `json:"cents"`
}

// Rate is a read: the exchange rate an endpoint quotes. A stale rate is better than none.
type Rate struct {
	mediator.Returns[float64]
	Endpoint string
}

// statusError is what the remote endpoint answers with; 503 is retryable, 402 is not.
type statusError struct {
	endpoint string
	code     int
}

func (e *statusError) Error() string   { return fmt.Sprintf("%s answered %d", e.endpoint, e.code) }
func (e *statusError) StatusCode() int { return e.code }

// network simulates remote endpoints that can be taken down and brought back.
type network struct {
	mu    sync.Mutex
	down  map[string]bool
	calls map[string]int
}

func (n *network) call(endpoint string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls[endpoint]++
	if n.down[endpoint] {
		return &statusError{endpoint: endpoint, code: 503}
	}
	return nil
}

func (n *network) set(endpoint string, down bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down[endpoint] = down
}

func (n *network) count(endpoint string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.calls[endpoint]
}

type chargeHandler struct {
	net  *network
	done chan<- string
}

func (h *chargeHandler) Handle(ctx context.Context, c *Charge) (mediator.Void, error) {
	if c.Cents <= 0 {
		return mediator.Void{}, &statusError{endpoint: c.Endpoint, code: 402}
	}
	if err := h.net.call(c.Endpoint); err != nil {
		return mediator.Void{}, err
	}
	if d, ok := durable.FromContext(ctx, c); ok {
		h.done <- fmt.Sprintf("scheduler charged %s on %s (durable attempt %d)", c.Ref, c.Endpoint, d.Attempt)
	}
	return mediator.Void{}, nil
}

func endpointKey(req any) string {
	switch r := req.(type) {
	case *Charge:
		return r.Endpoint
	case *Rate:
		return r.Endpoint
	}
	return behaviors.TypeKey(reflect.TypeOf(req))
}

// options says how run serves the admin dashboard.
type options struct {
	// dashboard, when not empty, is the loopback address the admin API and dashboard are
	// served on while the job runs ("127.0.0.1:0" picks a free port).
	dashboard string
	// linger keeps the dashboard up after the job until ctx ends (Ctrl-C), to look around.
	linger bool
	// served receives the dashboard's URL and token once it listens (tests read it).
	served func(url, token string)
}

func run(ctx context.Context, out io.Writer, dbPath string, opt options) error {
	var outMu sync.Mutex // the scheduler's workers print too
	say := func(format string, args ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
	}

	queue, err := durable.Open(ctx, sqlite.Open(dbPath), durable.Config{
		Policy: retry.Policy{MaxAttempts: 3, BaseDelay: 50 * time.Millisecond, MaxDelay: time.Second, Jitter: behaviors.Off},
	})
	if err != nil {
		return err
	}
	defer queue.Close()
	durable.Register[*Charge](queue, "payments.charge")

	breakers := breaker.NewRegistry(breaker.Config{
		Key:              endpointKey,
		FailureThreshold: 3,
		OpenDuration:     300 * time.Millisecond,
		OnStateChange: []func(breaker.StateChange){func(c breaker.StateChange) {
			say("  breaker %s: %s -> %s", c.Key, c.From, c.To)
		}},
	})
	net := &network{down: map[string]bool{}, calls: map[string]int{}}
	done := make(chan string, 16)

	i := do.New()
	do.ProvideValue(i, net)
	m := mediator.New(i, mediator.Config{})
	mediator.Handle[*Charge, mediator.Void](m, func(i do.Injector) (*chargeHandler, error) {
		return &chargeHandler{net: do.MustInvoke[*network](i), done: done}, nil
	})
	mediator.HandleFunc(m, func(_ context.Context, r *Rate) (float64, error) {
		if err := net.call(r.Endpoint); err != nil {
			return 0, err
		}
		return 1.08, nil
	})
	for _, b := range []mediator.Behavior{
		breaker.New(breakers),
		retry.New(retry.Config{
			Policy: retry.Policy{MaxAttempts: 3, BaseDelay: 10 * time.Millisecond, Strategy: retry.Exponential},
			OnRetry: []func(context.Context, retry.Event){func(_ context.Context, e retry.Event) {
				say("  retry after attempt %d: %v", e.Attempt, e.Err)
			}},
		}),
		fallback.NewFor(func(_ context.Context, r *Rate, err error) (float64, error) {
			say("  fallback for %s: %v", r.Endpoint, err)
			return 1.05, nil // the last rate we saw
		}, fallback.Config{}),
		timeout.New(timeout.Config{Duration: time.Second}),
		durable.NewDeferral(queue, durable.DeferralConfig{}),
	} {
		m.Use(b)
	}
	if err := m.Build(); err != nil {
		return err
	}
	defer m.Close()

	if opt.dashboard != "" {
		stop, err := serveDashboard(opt, say, breakers, queue, m)
		if err != nil {
			return err
		}
		defer func() {
			if opt.linger {
				say("the dashboard stays up; press Ctrl-C to stop")
				<-ctx.Done()
			}
			stop()
		}()
	}

	chain, _ := mediator.Explain[*Charge](m)
	say("pipeline of *Charge (registered in a scrambled order):\n%s", chain)

	charge := func(c *Charge) {
		_, err := mediator.Send(ctx, m, c)
		var deferred *durable.DeferredError
		switch {
		case err == nil:
			say("%s: charged", c.Ref)
		case errors.As(err, &deferred):
			say("%s: deferred as item %d (%v)", c.Ref, deferred.ItemID, deferred.Cause)
		default:
			say("%s: failed: %v", c.Ref, err)
		}
	}

	say("1. endpoint pay-a is up")
	charge(&Charge{Ref: "ch-1", Endpoint: "pay-a", Cents: 1200})

	say("2. endpoint pay-b goes down: retries, then the breaker opens, then the charge is deferred")
	net.set("pay-b", true)
	charge(&Charge{Ref: "ch-2", Endpoint: "pay-b", Cents: 700})
	calls := net.count("pay-b")
	charge(&Charge{Ref: "ch-3", Endpoint: "pay-b", Cents: 300})
	say("   calls to pay-b while its breaker was open: %d", net.count("pay-b")-calls)
	say("   pay-a still flows:")
	charge(&Charge{Ref: "ch-4", Endpoint: "pay-a", Cents: 50})

	say("3. a read degrades to its fallback while pay-b is down")
	rate, err := mediator.Send(ctx, m, &Rate{Endpoint: "pay-b"})
	say("   rate %.2f, err %v", rate, err)

	say("4. a declined card is not retried and not deferred")
	charge(&Charge{Ref: "ch-5", Endpoint: "pay-a", Cents: 0})

	say("5. a charge to pay-c, which never comes back, is enqueued for later")
	net.set("pay-c", true)
	enq, err := queue.Enqueue(ctx, &Charge{Ref: "ch-6", Endpoint: "pay-c", Cents: 99})
	if err != nil {
		return err
	}
	say("   enqueued item %d", enq.ID)

	say("6. pay-b recovers; the scheduler retries the parked charges")
	net.set("pay-b", false)
	err = queue.Start(m, durable.SchedulerConfig{
		InstanceID: "demo-1", PollInterval: 20 * time.Millisecond, Breakers: breakers,
	})
	if err != nil {
		return err
	}
	for range 2 {
		say("   %s", <-done)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := queue.Stats(ctx)
		if err != nil {
			return err
		}
		if st.Counts[record.StateDead] == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := queue.Shutdown(ctx); err != nil {
		return err
	}

	say("7. the queue afterwards")
	st, err := queue.Stats(ctx)
	if err != nil {
		return err
	}
	for _, s := range []record.ItemState{record.StatePending, record.StateSucceeded, record.StateDead} {
		say("   %-9s %d", s, st.Counts[s])
	}
	attempts, err := queue.Attempts(ctx, enq.ID)
	if err != nil {
		return err
	}
	say("   dead letter item %d, attempt timeline:", enq.ID)
	for _, a := range attempts {
		say("     #%d on %s: %s %s", a.Number, a.Instance, a.Outcome, a.Error)
	}
	say("   breakers:")
	for _, b := range breakers.Snapshot() {
		say("     %s %s", b.Key, b.State)
	}
	return nil
}

func main() {
	keep := flag.String("db", "", "SQLite file to keep the queue in (default: a temporary file)")
	dash := flag.String("dashboard", "127.0.0.1:0", "loopback address to serve the admin dashboard on while the demo runs; empty: none")
	quit := flag.Bool("quit", false, "exit when the job is done instead of keeping the dashboard up until Ctrl-C")
	flag.Parse()
	path := *keep
	if path == "" {
		dir, err := os.MkdirTemp("", "switchboard-demo")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "queue.db")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opt := options{dashboard: *dash, linger: *dash != "" && !*quit}
	if err := run(ctx, os.Stdout, path, opt); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// serveDashboard serves the admin API and dashboard on opt.dashboard with a fresh token, says
// where, and returns the function that stops it.
func serveDashboard(opt options, say func(string, ...any), breakers *breaker.Registry, queue *durable.Queue, m *mediator.Mediator) (func(), error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	token := hex.EncodeToString(b[:])
	h, err := admin.New(admin.Config{Breakers: breakers, Queue: queue, Sender: m, Token: token})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", opt.dashboard)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	url := "http://" + ln.Addr().String() + "/"
	say("dashboard: %s (token %s)", url, token)
	if opt.served != nil {
		opt.served(url, token)
	}
	return func() {
		_ = srv.Close()
		<-served
	}, nil
}
