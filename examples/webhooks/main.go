package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/switchboard-go/switchboard/admin"
	"github.com/switchboard-go/switchboard/behaviors/breaker"
	"github.com/switchboard-go/switchboard/behaviors/retry"
	"github.com/switchboard-go/switchboard/behaviors/timeout"
	"github.com/switchboard-go/switchboard/behaviors/validation"
	"github.com/switchboard-go/switchboard/durable"
	"github.com/switchboard-go/switchboard/durable/record"
	"github.com/switchboard-go/switchboard/durable/sqlite"
	"github.com/switchboard-go/switchboard/httpcall"
	"github.com/switchboard-go/switchboard/mediator"
)

// Deliver posts one event to one subscriber. Receivers deduplicate by the Webhook-Id header,
// so it is safe to retry and to defer.
type Deliver struct {
	mediator.Command
	ID      string          `json:"id"`
	URL     string          `json:"url"`
	Payload json.RawMessage `json:"payload"`
}

// DedupeKey makes an event sent again while its first copy waits in the queue the same item.
func (d *Deliver) DedupeKey() string { return d.ID + " " + d.URL }

// Validate refuses an event that cannot be delivered: the inbound side answers it 422.
func (d *Deliver) Validate() error {
	switch {
	case d.ID == "":
		return errors.New("id is required")
	case httpcall.AuthorityOf(d.URL) == "":
		return fmt.Errorf("url %q is not an absolute URL", d.URL)
	}
	return nil
}

// deliver is Deliver's handler: one POST through client, whose transport sends it through the
// pipeline of *httpcall.Call. An error status (408, 429, 5xx) is already an error there; another
// non-2xx answer is the subscriber refusing the event, which no retry changes.
func deliver(client *http.Client) func(context.Context, *Deliver) (mediator.Void, error) {
	return func(ctx context.Context, d *Deliver) (mediator.Void, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(d.Payload))
		if err != nil {
			return mediator.Void{}, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Webhook-Id", d.ID)
		resp, err := client.Do(req)
		if err != nil {
			return mediator.Void{}, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return mediator.Void{}, fmt.Errorf("subscriber %s refused event %s: %s", d.URL, d.ID, resp.Status)
		}
		return mediator.Void{}, nil
	}
}

// events is the inbound endpoint: each event becomes a Deliver, and Send's error is the answer
// (202 with the item's id when it was deferred, 422 when it is invalid, 503 with Retry-After
// when its host's breaker is open, 504 on a timeout; nothing when the client has gone).
func events(m *mediator.Mediator) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var d Deliver
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&d); err != nil {
			http.Error(w, "the body is not a JSON event", http.StatusBadRequest)
			return
		}
		if _, err := mediator.Send(r.Context(), m, &d); err != nil {
			httpcall.WriteError(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent) // delivered
	}
}

// The host breakers' failure threshold and the scheduler's workers: with one probe per open
// period, they bound the requests a down host gets, whatever the number of its events.
const (
	failureThreshold = 3
	workers          = 4
)

// options says how run runs; main gives the defaults, the test shorter ones.
type options struct {
	addr    string        // loopback address of POST /events and the admin under /admin/
	events  int           // events sent to each subscriber
	openFor time.Duration // how long an open host breaker refuses calls before one probe
	maxAge  time.Duration // how long an event may wait for its subscriber before it is a dead letter
	linger  bool          // keep serving the admin after the run until ctx ends (Ctrl-C)
	// inspect, when set, is called after the summary while the admin is still served.
	inspect func(adminURL, token string)
}

func run(ctx context.Context, out io.Writer, dbPath string, opt options) (*summary, error) {
	healthy := &receiver{name: "healthy", answer: func(int) (int, string) { return http.StatusNoContent, "" }}
	bursty := &receiver{name: "bursty", answer: func(hit int) (int, string) {
		if hit%7 == 6 || hit%7 == 0 { // two in every seven requests
			return http.StatusServiceUnavailable, "1"
		}
		return http.StatusNoContent, ""
	}}
	down := &receiver{name: "down", answer: func(int) (int, string) { return http.StatusServiceUnavailable, "" }}
	receivers := []*receiver{healthy, bursty, down}
	for _, rc := range receivers {
		if err := rc.start(); err != nil {
			return nil, err
		}
		defer rc.stop()
	}

	// One breaker per subscriber host, keyed as httpcall.Authority keys a *Call.
	hosts := breaker.NewRegistry(breaker.Config{
		Key: httpcall.Authority, FailureThreshold: failureThreshold, OpenDuration: opt.openFor,
	})

	outcomes := &settled{n: map[record.Settled]int{}} // how the scheduler's claims ended: succeeded, retried, refused, expired…
	// Config.Breakers is not needed: the registration names the breaker of its items.
	queue, err := durable.Open(ctx, sqlite.Open(dbPath), durable.Config{
		Policy:     retry.Policy{MaxAttempts: 20, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second},
		InstanceID: "webhooks-1", Workers: workers, PollInterval: 20 * time.Millisecond,
	})
	if err != nil {
		return nil, err
	}
	defer queue.Close()
	// The items are held back by the breaker of the host they post to: while it is open they
	// are parked on it, uncharged; one of them probes when it may; they are freed when it closes.
	// MaxAge ends an event that waited too long: it becomes a dead letter.
	durable.Register[*Deliver](queue, "webhooks.deliver",
		durable.WithBreaker(hosts, func(d *Deliver) string { return httpcall.AuthorityOf(d.URL) }),
		durable.WithPolicy(retry.Policy{MaxAge: opt.maxAge}))

	m := mediator.New(nil, mediator.Config{})
	m.Observe(outcomes)
	httpcall.Register(m, nil)
	call := mediator.ForRequest[*httpcall.Call]()
	m.Use(retry.New(retry.Config{Policy: retry.Policy{MaxAttempts: 2, BaseDelay: 20 * time.Millisecond, MaxDelay: 200 * time.Millisecond}}), call)
	m.Use(breaker.New(hosts), call)
	m.Use(timeout.New(timeout.Config{Duration: 2 * time.Second}), call) // per attempt
	client := &http.Client{Transport: httpcall.NewTransport(m, httpcall.Config{})}
	defer client.CloseIdleConnections()
	mediator.HandleFunc(m, deliver(client))
	m.Use(validation.New(), mediator.ForRequest[*Deliver]())
	m.Use(durable.NewDeferral(queue, durable.DeferralConfig{}), mediator.ForRequest[*Deliver]())
	if err := m.Build(); err != nil {
		return nil, err
	}
	defer m.Close()

	if err := queue.Start(m); err != nil {
		return nil, err
	}
	defer queue.Shutdown(context.WithoutCancel(ctx)) // on an early return; a second call returns the first one's result

	srv, err := serve(opt.addr, m, hosts, queue)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	fmt.Fprintf(out, "events: POST %sevents\nadmin:  %s (token %s)\n", srv.url, srv.adminURL, srv.token)

	// Events go to the subscribers in turn; each answer says what became of it.
	sum := &summary{answers: map[int]int{}, items: map[string][]record.ItemID{}}
	start := time.Now()
	post := func(d Deliver) (int, record.ItemID, error) {
		body, _ := json.Marshal(d)
		resp, err := http.Post(srv.url+"events", "application/json", bytes.NewReader(body))
		if err != nil {
			return 0, 0, err
		}
		defer resp.Body.Close()
		var accepted struct {
			ID record.ItemID `json:"id,string"`
		}
		if resp.StatusCode == http.StatusAccepted {
			err = json.NewDecoder(resp.Body).Decode(&accepted)
		}
		return resp.StatusCode, accepted.ID, err
	}
	defer http.DefaultClient.CloseIdleConnections()
	for i := range opt.events * len(receivers) {
		rc := receivers[i%len(receivers)]
		code, id, err := post(Deliver{ID: fmt.Sprintf("evt-%d", i+1), URL: rc.url, Payload: json.RawMessage(`{"n":1}`)})
		if err != nil {
			return nil, err
		}
		sum.answers[code]++
		if id != 0 {
			sum.items[rc.name] = append(sum.items[rc.name], id)
		}
	}
	if code, _, err := post(Deliver{ID: "evt-bad", URL: "not a url"}); err == nil {
		sum.answers[code]++
	}
	fmt.Fprintf(out, "sent %d events and an invalid one: %d delivered (204), %d deferred (202 with the item id), %d invalid (422)\n",
		opt.events*len(receivers), sum.answers[http.StatusNoContent], sum.answers[http.StatusAccepted], sum.answers[http.StatusUnprocessableEntity])

	// Wait until every stored item is delivered or dead: the deadline bounds the wait. Meanwhile
	// count the items parked on the down host's breaker.
	downKey := httpcall.AuthorityOf(down.url)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		parked, err := queue.Items(ctx, durable.ItemFilter{Parked: true, Key: downKey, Limit: 500})
		if err != nil {
			return nil, err
		}
		sum.parked = max(sum.parked, len(parked.Items))
		st, err := queue.Stats(ctx)
		if err != nil {
			return nil, err
		}
		if st.Counts[record.StatePending]+st.Counts[record.StateRunning] == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
	sum.took = time.Since(start)
	sum.downKey, sum.downBreaker = downKey, hosts.Admission(downKey).State
	// Stop the scheduler: its observers have heard every outcome once it has stopped.
	if err := queue.Shutdown(ctx); err != nil {
		return nil, err
	}
	sum.outcomes = outcomes.counts()
	if err := sum.collect(ctx, queue, receivers); err != nil {
		return nil, err
	}
	sum.print(out, opt.events)
	if opt.inspect != nil {
		opt.inspect(srv.adminURL, srv.token)
	}
	if opt.linger {
		fmt.Fprintln(out, "the admin stays up; press Ctrl-C to stop")
		<-ctx.Done()
	}
	return sum, nil
}

func main() {
	keep := flag.String("db", "", "SQLite file to keep the queue in (default: a temporary file)")
	addr := flag.String("addr", "127.0.0.1:0", "loopback address of POST /events and the admin dashboard under /admin/")
	quit := flag.Bool("quit", false, "exit when the run is done instead of keeping the admin up until Ctrl-C")
	flag.Parse()
	// The work runs in a function, so that its deferred clean-up (the temporary directory)
	// runs before an exit with an error.
	err := func() error {
		path := *keep
		if path == "" {
			dir, err := os.MkdirTemp("", "switchboard-webhooks")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			path = filepath.Join(dir, "queue.db")
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		opt := options{addr: *addr, events: 10, openFor: time.Second, maxAge: 5 * time.Second, linger: !*quit}
		_, err := run(ctx, os.Stdout, path, opt)
		return err
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// summary is what became of the events.
type summary struct {
	answers     map[int]int                // inbound answers by status code
	items       map[string][]record.ItemID // the deferred events' items, by receiver
	delivered   map[string]int             // distinct events each receiver accepted
	hits        map[string]int             // requests that reached each receiver
	attempts    map[string]int             // attempt rows of each receiver's items
	dead        map[string]int             // dead letters of each receiver's items
	lastError   map[string]string          // of a dead letter of each receiver's items
	parked      int                        // the most items parked on the down host's breaker at once
	outcomes    map[record.Settled]int     // the scheduler's claims by outcome
	downKey     string                     // the down host's breaker key
	downBreaker breaker.State              // the down host's breaker at the end
	took        time.Duration              // from the first event until no item was left to try
}

func (s *summary) collect(ctx context.Context, q *durable.Queue, receivers []*receiver) error {
	s.delivered, s.hits, s.attempts, s.dead, s.lastError = map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}, map[string]string{}
	page, err := q.DeadLetters(ctx, durable.DeadLetterFilter{Limit: 500})
	if err != nil {
		return err
	}
	letters := page.Letters
	for _, rc := range receivers {
		s.delivered[rc.name], s.hits[rc.name] = rc.counts()
		for _, id := range s.items[rc.name] {
			a, err := q.Attempts(ctx, id)
			if err != nil {
				return err
			}
			s.attempts[rc.name] += len(a)
			if i := slices.IndexFunc(letters, func(l record.DeadLetter) bool { return l.ItemID == id }); i >= 0 {
				s.dead[rc.name]++
				s.lastError[rc.name] = letters[i].Error
			}
		}
	}
	return nil
}

func (s *summary) print(out io.Writer, events int) {
	fmt.Fprintf(out, "after %v:\n", s.took.Round(100*time.Millisecond))
	for _, name := range []string{"healthy", "bursty", "down"} {
		fmt.Fprintf(out, "  %-8s %2d of %d delivered, %2d requests reached it; %2d deferred, %d attempts by the scheduler, %2d dead letters\n",
			name, s.delivered[name], events, s.hits[name], len(s.items[name]), s.attempts[name], s.dead[name])
	}
	fmt.Fprintf(out, "  the down host's breaker (%s) is %s; up to %d of its items were parked on it at once, charged no attempt\n", s.downKey, s.downBreaker, s.parked)
	if e := s.lastError["down"]; e != "" {
		fmt.Fprintf(out, "  its dead letters say: %s\n", e)
	}
	fmt.Fprintf(out, "  the scheduler's claims: %d succeeded, %d failed and retried, %d refused (parked, uncharged), %d expired\n",
		s.outcomes[record.SettledSucceeded], s.outcomes[record.SettledRetried], s.outcomes[record.SettledRefused], s.outcomes[record.SettledExpired])
}

// receiver is a subscriber on loopback; answer says how it answers its hit-th request.
type receiver struct {
	name   string
	url    string
	answer func(hit int) (status int, retryAfter string)
	stop   func()
	mu     sync.Mutex
	hits   int
	got    map[string]bool // Webhook-Ids accepted
}

func (rc *receiver) start() error {
	rc.got = map[string]bool{}
	url, stop, err := listen("127.0.0.1:0", rc)
	rc.url, rc.stop = url+"hook", stop
	return err
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc.mu.Lock()
	rc.hits++
	code, retryAfter := rc.answer(rc.hits)
	if code/100 == 2 {
		rc.got[r.Header.Get("Webhook-Id")] = true
	}
	rc.mu.Unlock()
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.WriteHeader(code)
}

func (rc *receiver) counts() (delivered, hits int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.got), rc.hits
}

// server serves POST /events and the admin under /admin/ on addr.
type server struct {
	url, adminURL, token string
	stop                 func()
}

func serve(addr string, m *mediator.Mediator, hosts *breaker.Registry, queue *durable.Queue) (*server, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	token := hex.EncodeToString(b[:])
	adm, err := admin.New(admin.Config{Breakers: hosts, Queue: queue, Sender: m, Token: token})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /events", events(m))
	mux.Handle("/admin/", http.StripPrefix("/admin", adm))
	url, stop, err := listen(addr, mux)
	if err != nil {
		return nil, err
	}
	return &server{url: url, adminURL: url + "admin/", token: token, stop: stop}, nil
}

// listen serves h on addr; it returns the base URL and the function that stops it.
func listen(addr string, h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	return "http://" + ln.Addr().String() + "/", func() {
		_ = srv.Close()
		<-served
	}, nil
}

// settled counts how the scheduler's claims ended: a durable.SettledObserver, attached to the
// mediator the queue is started with.
type settled struct {
	mu sync.Mutex
	n  map[record.Settled]int
}

// OnSettled counts one claim's outcome.
func (s *settled) OnSettled(_ string, outcome record.Settled) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n[outcome]++
}

// counts returns the outcomes counted so far.
func (s *settled) counts() map[record.Settled]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.n)
}
